package kvcache

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"time"
	"unsafe"

	"github.com/ruvllm/ruvllm/kernels"
	"github.com/ruvllm/ruvllm/neuralfield"
)

// A pool with a Store (PoolOptions.Store) writes every full block to it
// when a table commits the block: a page of the block's tokens and its
// exact keys and values (the F16 form, what the block held when it
// filled), and in a quantized pool its static form (the 8- or 4-bit form
// it keeps for its life) after them. A block restored from the store is
// bit for bit the block that was committed, in every precision: an F16
// pool copies the exact form; a quantized one copies the static form, and
// the exact form only into the blocks a row continuing the table reads at
// F16 or in the warm form (making the warm form from it, as when the block
// filled). So restoring is a checksum and a copy, and a tiered pool does
// not spend exact slots on old blocks it would read at 4 bits. The page is
// keyed by a SHA-256 chain: a block's key hashes its parent's key and its
// tokens, and a table's first block's parent is the table's store
// namespace, which hashes the model file, the precision and tiers, the
// page format (StorePageFormat), and the adapter and its scale (StoreKey,
// SetStoreNamespace). So a page is only found by a prompt that starts with
// the same tokens under the same model, adapter and precision, whatever
// process wrote it. The page's tokens and length are checked before a
// block is restored, too.
//
// Writing is behind the decode path: the page is copied into the store's
// queue, which its own goroutine writes. Match and Reuse continue a chain
// that RAM lacks from the store: they find how far the store goes, ask the
// kernel to read those pages ahead, and restore them block after block
// into the pool, registered in the prefix index as committed blocks.

// StorePageFormat is the layout of the pages a pool spills; store keys
// (PoolOptions.StoreKey) should hash it, so that pages of another layout
// are never looked for. 2: a quantized pool's pages hold the static form
// after the exact one.
const StorePageFormat = 2

// RestoreBuckets are the upper bounds, in seconds, of the histogram of
// restore durations in Stats.RestoreBuckets.
var RestoreBuckets = [...]float64{0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2}

// storeState is a pool's part of its store.
type storeState struct {
	store  *neuralfield.Store
	key    neuralfield.Key // StoreKey
	hasher hash.Hash
	buf    []byte // a block's tokens, little endian, and a chain key
	keys   []neuralfield.Key
	// pageBytes is StorePageBytes of the pool's options.
	pageBytes int

	spilled, restored uint64
	hitTokens, missTk uint64
	restores          uint64
	restoreSeconds    float64
	restoreBuckets    [len(RestoreBuckets)]uint64
	tokenMismatches   uint64
}

// newStoreState is a pool's part of o.Store, after checking that its pages
// fit a block.
func newStoreState(o *PoolOptions) (*storeState, error) {
	if o.Store == nil {
		return nil, nil
	}
	if o.Type == F32 {
		return nil, errors.New("kvcache: an F32 pool cannot spill to a store (its pages hold F16 forms)")
	}
	need := StorePageBytes(*o)
	if need > o.Store.PageBytes() {
		return nil, fmt.Errorf("kvcache: a block's page of %d bytes does not fit the store's pages of %d", need, o.Store.PageBytes())
	}
	return &storeState{
		store:     o.Store,
		key:       o.StoreKey,
		hasher:    sha256.New(),
		buf:       make([]byte, 4*o.BlockTokens),
		pageBytes: need,
	}, nil
}

// StorePageBytes is the page a block of pools of these options spills:
// its tokens, its exact keys and values and, in a quantized pool, its
// static form; PoolOptions.Store's pages must allow it.
func StorePageBytes(o PoolOptions) int {
	if o.HeadDimV == 0 {
		o.HeadDimV = o.HeadDim
	}
	if o.BlockTokens == 0 {
		o.BlockTokens = DefaultBlockTokens
	}
	n := 4*o.BlockTokens + 2*o.Layers*o.KVHeads*o.BlockTokens*(o.HeadDim+o.HeadDimV)
	if o.Type.Quantized() {
		bits := baseForm(o.Type).Bits()
		n += o.Layers * o.KVHeads * (kernels.KVTileBytes(bits, o.HeadDim, o.BlockTokens, true) + kernels.KVTileBytes(bits, o.BlockTokens, o.HeadDimV, false))
	}
	return n
}

// chainKey is the store key of a block of tokens after the block (or
// namespace) keyed parent.
func (s *storeState) chainKey(parent *neuralfield.Key, tokens []int32) neuralfield.Key {
	for i, t := range tokens {
		binary.LittleEndian.PutUint32(s.buf[4*i:], uint32(t))
	}
	s.hasher.Reset()
	s.hasher.Write(parent[:])
	s.hasher.Write(s.buf[:4*len(tokens)])
	var k neuralfield.Key
	s.hasher.Sum(k[:0])
	return k
}

// SetStoreNamespace sets the key the table's chains start from in the
// pool's store, for a namespace whose keys and values are not the pool's
// plain ones (an adapter and its scale): a hash of the pool's StoreKey and
// what the namespace stands for, the same in every process. SetNamespace
// to a namespace other than 0 leaves the table out of the store until
// SetStoreNamespace is called.
func (t *BlockTable) SetStoreNamespace(k neuralfield.Key) {
	t.storeNS, t.storeOK = k, t.pool.store != nil
}

// keyBlock gives the table's block i, now committed, its store key, and
// writes it to the store when it is new there. A block whose parent has no
// key (it was committed without a store namespace) gets none.
func (t *BlockTable) keyBlock(i int, spill bool) {
	p, s := t.pool, t.pool.store
	m := &p.meta[t.blocks[i]]
	if s == nil || !t.storeOK {
		return
	}
	if m.keyed {
		// A block computed again that RAM still had: in use.
		s.store.Touch(m.skey)
		return
	}
	parent := &t.storeNS
	if i > 0 {
		pm := &p.meta[t.blocks[i-1]]
		if !pm.keyed {
			return
		}
		parent = &pm.skey
	}
	m.skey, m.keyed = s.chainKey(parent, t.tokens[i*p.bt:(i+1)*p.bt]), true
	if spill && !m.lossy {
		p.spill(t.blocks[i])
	}
}

// touch tells the store that the table's blocks are in use, so that its
// least recently used pages are not the prefixes that stay in RAM.
func (t *BlockTable) touch() {
	p, s := t.pool, t.pool.store
	if s == nil {
		return
	}
	s.keys = s.keys[:0]
	for _, b := range t.blocks {
		if m := &p.meta[b]; m.keyed {
			s.keys = append(s.keys, m.skey)
		}
	}
	s.store.Touch(s.keys...)
}

// spill queues block b's page in the store.
func (p *Pool) spill(b int) {
	s, m := p.store, &p.meta[b]
	for i, t := range p.blockTokens(b) {
		binary.LittleEndian.PutUint32(s.buf[4*i:], uint32(t))
	}
	var ok bool
	switch {
	case p.tier != nil:
		if m.half < 0 {
			return
		}
		t := p.tier
		ok = s.store.Put(m.skey, s.buf, halfBytes(t.half.slice(m.half)), t.baseData[b*t.blockQ:(b+1)*t.blockQ])
	default:
		ok = s.store.Put(m.skey, s.buf, halfBytes(p.k16[b*p.blockK:(b+1)*p.blockK]), halfBytes(p.v16[b*p.blockV:(b+1)*p.blockV]))
	}
	if ok {
		s.spilled++
	}
}

// halfBytes is halves as the bytes of memory (little endian on the
// platforms we run; StoreKey should say the order).
func halfBytes(h []uint16) []byte {
	if len(h) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&h[0])), 2*len(h))
}

// storeReach is for how many blocks of tokens after the first have ones
// (in RAM, the last of them block last) the store continues the chain, up
// to maxBlocks blocks in all; it fills s.keys with their keys.
func (t *BlockTable) storeReach(tokens []int32, have, last, maxBlocks int) int {
	p, s := t.pool, t.pool.store
	if s == nil || !t.storeOK {
		return 0
	}
	s.keys = s.keys[:0]
	parent := t.storeNS
	if have > 0 {
		m := &p.meta[last]
		if !m.keyed {
			return 0
		}
		parent = m.skey
	}
	for j := have; j < min(maxBlocks, len(tokens)/p.bt); j++ {
		k := s.chainKey(&parent, tokens[j*p.bt:(j+1)*p.bt])
		if !s.store.Has(k) {
			break
		}
		s.keys = append(s.keys, k)
		parent = k
	}
	return len(s.keys)
}

// restore appends to the table the blocks whose keys storeReach found,
// read from the store, as far as they read back whole and the pool has
// room; it returns how many it restored.
func (t *BlockTable) restore(tokens []int32) int {
	p, s := t.pool, t.pool.store
	if len(s.keys) == 0 {
		return 0
	}
	start := time.Now()
	s.store.Prefetch(s.keys...)
	first := len(t.blocks)
	end := first + len(s.keys)
	for _, k := range s.keys {
		if !t.restoreBlock(k, tokens, p.tier == nil || len(t.blocks) >= p.exactFromOf(end)) {
			break
		}
	}
	// Cut short (a page that failed its checksum, no room): the blocks now
	// last need the exact forms that only the planned last ones got. A
	// block that cannot have its exact form is given back with those after
	// it, and the blocks before it then need theirs.
	for p.tier != nil && len(t.blocks) < end {
		end = len(t.blocks)
		for i := max(first, p.exactFromOf(end)); i < end; i++ {
			if p.meta[t.blocks[i]].half < 0 && !t.restoreExact(i, s.keys[i-first], tokens) {
				for len(t.blocks) > i {
					t.popBlock()
				}
				break
			}
		}
	}
	n := len(t.blocks) - first
	d := time.Since(start).Seconds()
	s.restores++
	s.restored += uint64(n)
	s.restoreSeconds += d
	for i, ub := range RestoreBuckets {
		if d <= ub {
			s.restoreBuckets[i]++
		}
	}
	return n
}

// exactFromOf is the first block, of a table whose blocks end before block
// end, that a row continuing it may read at F16 or in the warm form (made
// from the exact one): a row at the last block's last position or after.
func (p *Pool) exactFromOf(end int) int {
	return end - 1 - p.tier.hotBlocks - p.tier.warmBlocks
}

// restoreBlock appends to the table the block of key k, its next block of
// tokens, read from the store, with its exact form when exact is set (a
// tiered pool's other blocks get their static form alone). It reports
// whether it did.
func (t *BlockTable) restoreBlock(k neuralfield.Key, tokens []int32, exact bool) bool {
	p, s := t.pool, t.pool.store
	j := len(t.blocks)
	blk := tokens[j*p.bt : (j+1)*p.bt]
	if p.available() < 1 || exact && p.tier != nil && p.halfAvailable() < 1 {
		return false
	}
	var b int
	if exact {
		b = p.alloc(false)
	} else {
		b = p.take()
		p.meta[b].dirty = true
	}
	if err := s.store.Get(k, func(page []byte) error { return p.fillBlock(b, page, blk) }); err != nil {
		p.decRef(b)
		return false
	}
	parentHash, parentID := t.namespace, t.namespace
	if j > 0 {
		pm := &p.meta[t.blocks[j-1]]
		parentHash, parentID = pm.hash, pm.id
	}
	p.register(b, p.hash(parentHash, blk), parentID, j == 0, blk)
	m := &p.meta[b]
	m.skey, m.keyed = k, true
	t.pushBlock(b)
	return true
}

// restoreExact gives the table's block i, restored from the page of key k
// (tokens' block i) with its static form alone, its exact (and warm) form
// from the page again; it reports whether it did.
func (t *BlockTable) restoreExact(i int, k neuralfield.Key, tokens []int32) bool {
	p, s := t.pool, t.pool.store
	b := t.blocks[i]
	if p.halfAvailable() < 1 {
		return false
	}
	p.attachHalf(b)
	err := s.store.Get(k, func(page []byte) error {
		if err := p.checkPage(page, tokens[i*p.bt:(i+1)*p.bt]); err != nil {
			return err
		}
		p.fillExact(b, page[4*p.bt:])
		return nil
	})
	if err != nil {
		p.tier.half.setState(p.meta[b].half, slotFree)
		p.meta[b].half = -1
		return false
	}
	p.unpinHalf(b)
	return true
}

// checkPage checks that a page is a block's of these tokens.
func (p *Pool) checkPage(page []byte, tokens []int32) error {
	if len(page) != p.store.pageBytes {
		return fmt.Errorf("kvcache: a stored page of %d bytes, want %d", len(page), p.store.pageBytes)
	}
	for i, t := range tokens {
		if int32(binary.LittleEndian.Uint32(page[4*i:])) != t {
			p.store.tokenMismatches++
			return errors.New("kvcache: a stored page holds other tokens")
		}
	}
	return nil
}

// fillBlock writes a page's keys and values into block b, after checking
// that the page is a block's and holds tokens: the exact form (in a tiered
// pool when the block has an exact slot, and then its warm form made from
// it) and the static form. A tiered block is then sealed, as when it
// filled.
func (p *Pool) fillBlock(b int, page []byte, tokens []int32) error {
	if err := p.checkPage(page, tokens); err != nil {
		return err
	}
	data := page[4*p.bt:]
	if t := p.tier; t != nil {
		exact := 2 * t.half.elems
		copy(t.baseData[b*t.blockQ:(b+1)*t.blockQ], data[exact:])
		if p.meta[b].half >= 0 {
			p.fillExact(b, data[:exact])
		}
		p.seal(b)
		return nil
	}
	k := halfBytes(p.k16[b*p.blockK : (b+1)*p.blockK])
	copy(k, data)
	copy(halfBytes(p.v16[b*p.blockV:(b+1)*p.blockV]), data[len(k):])
	return nil
}

// fillExact copies a page's exact form into the exact slot of tiered block
// b, and makes the block's warm form from it when the pool has warm forms
// and a slot for it.
func (p *Pool) fillExact(b int, data []byte) {
	t := p.tier
	copy(halfBytes(t.half.slice(p.meta[b].half)), data[:2*t.half.elems])
	if t.warmBlocks > 0 && p.meta[b].warm < 0 && p.attachWarm(b) {
		for l := range p.opt.Layers {
			p.quantizeForm(b, l, FormQ8)
		}
	}
}

// storeStats adds the store's counters to st.
func (p *Pool) storeStats(st *Stats) {
	s := p.store
	if s == nil {
		return
	}
	st.SpilledBlocks, st.RestoredBlocks = s.spilled, s.restored
	st.StoreHitTokens, st.StoreMissTokens = s.hitTokens, s.missTk
	st.Restores, st.RestoreSeconds, st.RestoreBuckets = s.restores, s.restoreSeconds, s.restoreBuckets
	st.StoreTokenMismatches = s.tokenMismatches
	st.Store = s.store.Stats()
}
