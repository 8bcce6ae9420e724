package sona

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Record kinds of the store.
const (
	recTrajectory = 'T'
	recFeedback   = 'F'
)

// errRecord is a record that does not decode; replay skips it.
var errRecord = errors.New("sona: malformed record")

// encodeTrajectory writes t with its arms by name, so that a router that
// numbers its arms differently reads it back.
func (r *Router) encodeTrajectory(t *trajectory) []byte {
	b := make([]byte, 0, 64+8*len(t.f.text)+24*len(t.outs))
	b = append(b, recTrajectory, featureVersion, byte(r.opt.FeatureBits))
	b = appendString(b, t.id)
	b = binary.AppendVarint(b, t.at)
	b = binary.AppendUvarint(b, uint64(len(t.f.text)))
	prev := uint32(0)
	for _, tm := range t.f.text {
		b = binary.AppendUvarint(b, uint64(tm.idx-prev))
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(tm.val))
		prev = tm.idx
	}
	b = append(b, numDense)
	for _, v := range t.f.dense {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	if t.f.hasUser {
		b = append(b, 1)
		b = binary.AppendUvarint(b, uint64(t.f.user))
	} else {
		b = append(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(t.outs)))
	for _, o := range t.outs {
		b = appendString(b, r.names[o.arm])
		for _, v := range []float32{o.quality, o.qweight, o.cost} {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
	}
	return b
}

func encodeFeedback(id string, rating float64) []byte {
	b := []byte{recFeedback}
	b = appendString(b, id)
	return binary.LittleEndian.AppendUint64(b, math.Float64bits(rating))
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// reader decodes a record, remembering the first failure.
type reader struct {
	b   []byte
	err bool
}

func (d *reader) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *reader) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *reader) byte() byte {
	if len(d.b) < 1 {
		d.err = true
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *reader) f32() float32 {
	if len(d.b) < 4 {
		d.err = true
		return 0
	}
	v := math.Float32frombits(binary.LittleEndian.Uint32(d.b))
	d.b = d.b[4:]
	return v
}

func (d *reader) f64() float64 {
	if len(d.b) < 8 {
		d.err = true
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(d.b))
	d.b = d.b[8:]
	return v
}

func (d *reader) str() string {
	n := d.uvarint()
	if d.err || n > uint64(len(d.b)) {
		d.err = true
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// finite reports whether v is a number, neither NaN nor infinite.
func finite(v float32) bool {
	return !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0)
}

// decodeTrajectory reads a trajectory record (after its kind byte) written
// with the same features; arms are added by name. The caller holds mu for
// writing.
func (r *Router) decodeTrajectory(b []byte) (trajectory, error) {
	d := &reader{b: b}
	if v, bits := d.byte(), d.byte(); d.err || v != featureVersion || int(bits) != r.opt.FeatureBits {
		return trajectory{}, fmt.Errorf("%w: features of another version or size", errRecord)
	}
	t := trajectory{id: d.str(), at: d.varint()}
	n := d.uvarint()
	if d.err || n > uint64(len(d.b)) {
		return trajectory{}, errRecord
	}
	buckets := uint64(r.x.buckets())
	t.f.text = make([]term, n)
	idx := uint64(0)
	for i := range t.f.text {
		delta := d.uvarint()
		if i > 0 && delta == 0 {
			d.err = true
		}
		idx += delta
		t.f.text[i] = term{idx: uint32(idx), val: d.f32()}
		if idx >= buckets || !finite(t.f.text[i].val) {
			d.err = true
		}
	}
	if nd := d.byte(); int(nd) != numDense {
		d.err = true
	}
	for i := range t.f.dense {
		if t.f.dense[i] = d.f32(); !finite(t.f.dense[i]) {
			d.err = true
		}
	}
	if d.byte() == 1 {
		u := d.uvarint()
		t.f.user, t.f.hasUser = uint32(u), true
		if u >= buckets {
			d.err = true
		}
	}
	outs := d.uvarint()
	if d.err || outs > uint64(MaxArms) {
		return trajectory{}, errRecord
	}
	for range outs {
		name := d.str()
		q, w, c := d.f32(), d.f32(), d.f32()
		if d.err || name == "" || !finite(q) || !finite(w) || !finite(c) || q < 0 || q > 1 || w < 0 || w > 1 {
			return trajectory{}, errRecord
		}
		arm, err := r.armIndex(name)
		if err != nil {
			return trajectory{}, err
		}
		t.outs = append(t.outs, armOutcome{arm: arm, quality: q, qweight: w, cost: max(c, -1)})
	}
	if d.err || len(d.b) != 0 {
		return trajectory{}, errRecord
	}
	return t, nil
}

// replay rebuilds the router from its store: every trajectory is learnt
// again and every rating applied, in the order they happened. Records it
// cannot use (another feature version, damage the checksum missed) are
// skipped; the store is then compacted to what the router holds.
func (r *Router) replay() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	skipped := 0
	err := r.opt.Store.Load(func(rec []byte) error {
		if len(rec) == 0 {
			skipped++
			return nil
		}
		switch rec[0] {
		case recTrajectory:
			t, err := r.decodeTrajectory(rec[1:])
			if errors.Is(err, ErrTooManyArms) {
				return err
			}
			if err != nil {
				skipped++
				return nil
			}
			r.learn(&t)
		case recFeedback:
			d := &reader{b: rec[1:]}
			id, rating := d.str(), d.f64()
			if d.err || len(d.b) != 0 || math.IsNaN(rating) || rating < -maxRating || rating > maxRating {
				skipped++
				return nil
			}
			// A rating of a trajectory the bank no longer holds is old
			// news: its weight updates were lost with the compaction
			// that dropped the trajectory, as they would have been.
			r.applyFeedback(id, rating)
		default:
			skipped++
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sona: replaying the store: %w", err)
	}
	r.replaySkipped = skipped
	if skipped > 0 || r.opt.Store.Records() > 2*r.bank.used {
		return r.compact()
	}
	return nil
}

// compact rewrites the store as the trajectories the bank holds, oldest
// first, their ratings folded in. The caller holds mu for writing.
func (r *Router) compact() error {
	recs := make([][]byte, 0, r.bank.used)
	start := 0
	if r.bank.used == len(r.bank.slots) {
		start = r.bank.next
	}
	for i := range r.bank.used {
		t := &r.bank.slots[(start+i)%len(r.bank.slots)]
		recs = append(recs, r.encodeTrajectory(t))
	}
	return r.opt.Store.Compact(recs)
}

// persist appends t to the store, compacting it when it holds twice what
// the bank does. A failing store is reported once and then left alone:
// routing goes on in memory. The caller holds mu for writing.
func (r *Router) persist(t *trajectory) {
	if r.opt.Store == nil || r.storeErr != nil {
		return
	}
	r.storeErr = r.opt.Store.Append(r.encodeTrajectory(t))
	if r.storeErr == nil && r.opt.Store.Records() > 2*len(r.bank.slots) {
		r.storeErr = r.compact()
	}
}

// persistFeedback appends a rating to the store. The caller holds mu for
// writing.
func (r *Router) persistFeedback(id string, rating float64) {
	if r.opt.Store == nil || r.storeErr != nil {
		return
	}
	r.storeErr = r.opt.Store.Append(encodeFeedback(id, rating))
}

// StoreError is the error that stopped the router's store, if any: from
// then on it learns in memory only.
func (r *Router) StoreError() error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.storeErr
}

// Close stops learning and closes the store; decisions still work.
func (r *Router) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	if r.opt.Store == nil {
		return nil
	}
	return r.opt.Store.Close()
}
