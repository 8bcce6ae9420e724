package kvcache

import (
	"fmt"

	"github.com/ruvllm/ruvllm/kernels"
)

// A tiered pool (Q8, Q4, Tiered) keeps each block in up to three forms:
//
//   - the exact form (F16), written by Store. Every block has one while it
//     is being filled; afterwards it is kept while a holder reads the block
//     hot, then as cache until the arena needs the room;
//   - the warm form (8 bits, Tiered with WarmTokens), made when the block
//     fills, kept while a holder reads it warm;
//   - the static form (8 bits for Q8, 4 for Q4 and Tiered), made when the
//     block fills and kept for its life: one per block of the pool.
//
// The F16 and warm forms live in arenas of slots smaller than the pool (the
// memory saving is that most blocks have their static form only); a slot
// is free, needed (a holder reads the block in that form: the block's need
// count is positive), idle (attached to a block nobody needs it of: cache,
// taken back least recently idle first) or pinned (the exact form of a
// block not yet full, its only copy).
//
// Which form a row reads depends only on positions: the row at pos reads
// the block holding pos and the HotTokens/BlockTokens blocks before it in
// F16, the WarmTokens/BlockTokens before those in the warm form, and older
// blocks in the static form, each quantized from the exact form when its
// block filled. So a sequence's outputs do not depend on how its prompt is
// split over passes, and restoring the exact form of a block (a spilled
// page) gives back the very forms the block had. Only when an arena runs
// short does a row read a lower form than its position says: an exact form
// of a full block is then taken back even when needed (pool pressure), and
// a block that gets no warm slot is read in its static form.

// Form is one of a tiered block's forms.
type Form uint8

// The forms of a tiered block, from most to least exact.
const (
	FormF16 Form = iota
	FormQ8
	FormQ4
)

func (f Form) String() string {
	return [...]string{"f16", "q8", "q4"}[f]
}

// Bits is the width of the form's elements.
func (f Form) Bits() int { return [...]int{16, 8, 4}[f] }

// tiers is the tiered part of a pool.
type tiers struct {
	base       Form // the static form: FormQ8 or FormQ4
	hotBlocks  int  // full blocks before a row's own block read at F16
	warmBlocks int  // blocks before those read in the warm form; 0: no warm form

	// Bytes of one K and one V tile of a head, in the static and warm
	// forms; of one layer of a block's static form; of a whole block's.
	kTile, vTile   int
	kTile8, vTile8 int
	layerQ, blockQ int
	layerW, blockW int
	baseData       []byte // static forms: (blocks, layers, [kv_heads K tiles, kv_heads V tiles])

	half arena[uint16] // exact forms: (slots, layers, [K (kv_heads, head_dim, bt), V (kv_heads, bt, head_dim_v)])
	warm arena[byte]   // warm forms: as static, at 8 bits
}

// arena is the slots of one dynamic form. Slot lists are doubly linked
// through prev/next; index slots is the free list's sentinel, slots+1 the
// idle list's.
type arena[T uint16 | byte] struct {
	slots      int
	elems      int     // elements of one slot
	data       []T     // (slots, elems)
	owner      []int32 // block of each slot, -1 when free
	state      []uint8 // slotFree, slotIdle, slotNeeded, slotPinned
	prev, next []int32
	free, idle int
	pinned     int
}

const (
	slotFree uint8 = iota
	slotIdle
	slotNeeded
	slotPinned
)

func newArena[T uint16 | byte](slots, elems int) arena[T] {
	a := arena[T]{slots: slots, elems: elems}
	if slots == 0 {
		return a
	}
	a.data = make([]T, slots*elems)
	a.owner = make([]int32, slots)
	a.state = make([]uint8, slots)
	a.prev = make([]int32, slots+2)
	a.next = make([]int32, slots+2)
	for _, h := range []int32{int32(slots), int32(slots + 1)} {
		a.prev[h], a.next[h] = h, h
	}
	for s := slots - 1; s >= 0; s-- {
		a.owner[s] = -1
		a.link(int32(slots), int32(s))
	}
	a.free = slots
	return a
}

func (a *arena[T]) freeHead() int32 { return int32(a.slots) }
func (a *arena[T]) idleHead() int32 { return int32(a.slots + 1) }

// link puts slot s after at.
func (a *arena[T]) link(at, s int32) {
	n := a.next[at]
	a.prev[s], a.next[s] = at, n
	a.next[at], a.prev[n] = s, s
}

func (a *arena[T]) unlink(s int32) {
	pr, nx := a.prev[s], a.next[s]
	a.next[pr], a.prev[nx] = nx, pr
	a.prev[s], a.next[s] = s, s
}

// setState moves slot s to state st, keeping the lists and counts.
func (a *arena[T]) setState(s int32, st uint8) {
	switch a.state[s] {
	case slotFree:
		a.unlink(s)
		a.free--
	case slotIdle:
		a.unlink(s)
		a.idle--
	case slotPinned:
		a.pinned--
	}
	a.state[s] = st
	switch st {
	case slotFree:
		a.link(a.freeHead(), s)
		a.free++
		a.owner[s] = -1
	case slotIdle:
		a.link(a.prev[a.idleHead()], s) // back: taken back last
		a.idle++
	case slotPinned:
		a.pinned++
	}
}

// slice is slot s's elements.
func (a *arena[T]) slice(s int32) []T {
	i := int(s) * a.elems
	return a.data[i : i+a.elems : i+a.elems]
}

// baseForm is the static form of the blocks of a quantized pool of type
// typ: the form each full block keeps for its life.
func baseForm(typ Precision) Form {
	if typ == Q8 {
		return FormQ8
	}
	return FormQ4
}

// tierOptions fills in a tiered pool's forms and sizes: the tiers and the
// bytes of the static, exact and warm forms of one block.
func tierOptions(o *PoolOptions) (t *tiers, halfBytes, warmBytes float64, err error) {
	t = &tiers{base: baseForm(o.Type)}
	switch o.Type {
	case Tiered:
		if o.HotTokens < 0 || o.WarmTokens < 0 {
			return nil, 0, 0, fmt.Errorf("kvcache: negative hot (%d) or warm (%d) tokens", o.HotTokens, o.WarmTokens)
		}
		t.hotBlocks = (o.HotTokens + o.BlockTokens - 1) / o.BlockTokens
		t.warmBlocks = (o.WarmTokens + o.BlockTokens - 1) / o.BlockTokens
	}
	if o.HeadDim > maxTileDim || o.HeadDimV > maxTileDim || o.BlockTokens > maxTileDim {
		return nil, 0, 0, fmt.Errorf("kvcache: head dims %d/%d and %d-token blocks: a quantized cache takes at most %d",
			o.HeadDim, o.HeadDimV, o.BlockTokens, maxTileDim)
	}
	bits := t.base.Bits()
	t.kTile = kernels.KVTileBytes(bits, o.HeadDim, o.BlockTokens, true)
	t.vTile = kernels.KVTileBytes(bits, o.BlockTokens, o.HeadDimV, false)
	t.layerQ = o.KVHeads * (t.kTile + t.vTile)
	t.blockQ = o.Layers * t.layerQ
	if t.warmBlocks > 0 {
		t.kTile8 = kernels.KVTileBytes(8, o.HeadDim, o.BlockTokens, true)
		t.vTile8 = kernels.KVTileBytes(8, o.BlockTokens, o.HeadDimV, false)
		t.layerW = o.KVHeads * (t.kTile8 + t.vTile8)
		t.blockW = o.Layers * t.layerW
	}
	halfBytes = float64(o.Layers) * float64(o.BlockTokens) * float64(o.KVHeads) * float64(o.HeadDim+o.HeadDimV) * 2
	return t, halfBytes, float64(t.blockW), nil
}

// maxTileDim bounds the sides of a tile (kernels' own bound).
const maxTileDim = 1024

// defaultSlots are the exact and warm slots of a tiered pool of n blocks
// when PoolOptions leave them 0: room for a long prefill pass (every block
// it writes is exact until its pass ends) and, for each of Sequences
// sequences, its block being filled and its hot and warm blocks.
func defaultSlots(o *PoolOptions, t *tiers, n int) (half, warm int) {
	seqs := max(o.Sequences, 1)
	pass := 512/o.BlockTokens + 1
	half = pass + seqs*(t.hotBlocks+1)
	if t.warmBlocks > 0 {
		warm = pass + seqs*(t.hotBlocks+t.warmBlocks+1)
	}
	return min(half, n), min(warm, n)
}

// halfKeys is the exact keys of layer in slot s: (kv_heads, head_dim, bt).
func (p *Pool) halfLayer(s int32, layer int) []uint16 {
	a := &p.tier.half
	per := a.elems / p.opt.Layers
	return a.slice(s)[layer*per : (layer+1)*per]
}

// HalfKeys is the exact keys of block b in layer of a tiered pool, (kv_heads,
// head_dim, block_tokens): row c of a head is channel c over the block's
// positions. It is nil when the block has no exact form.
func (p *Pool) HalfKeys(b, layer int) []uint16 {
	s := p.meta[b].half
	if s < 0 {
		return nil
	}
	l := p.halfLayer(s, layer)
	return l[:p.opt.KVHeads*p.opt.HeadDim*p.bt]
}

// HalfValues is the exact values of block b in layer of a tiered pool,
// (kv_heads, block_tokens, head_dim_v): row t of a head is position t's
// value. It is nil when the block has no exact form.
func (p *Pool) HalfValues(b, layer int) []uint16 {
	s := p.meta[b].half
	if s < 0 {
		return nil
	}
	l := p.halfLayer(s, layer)
	return l[p.opt.KVHeads*p.opt.HeadDim*p.bt:]
}

// QuantKeys is the tile of head's keys of block b in layer in form f (FormQ8
// or FormQ4; kernels' KV tile of head_dim × block_tokens grouped by row), or
// nil when the block has no such form.
func (p *Pool) QuantKeys(b, layer, head int, f Form) []byte {
	t := p.tier
	switch {
	case f == t.base:
		at := b*t.blockQ + layer*t.layerQ + head*t.kTile
		return t.baseData[at : at+t.kTile]
	case f == FormQ8 && p.meta[b].warm >= 0:
		l := t.warm.slice(p.meta[b].warm)[layer*t.layerW:]
		return l[head*t.kTile8 : (head+1)*t.kTile8]
	}
	return nil
}

// QuantValues is QuantKeys for the values (kernels' KV tile of block_tokens ×
// head_dim_v grouped by column).
func (p *Pool) QuantValues(b, layer, head int, f Form) []byte {
	t := p.tier
	switch {
	case f == t.base:
		at := b*t.blockQ + layer*t.layerQ + p.opt.KVHeads*t.kTile + head*t.vTile
		return t.baseData[at : at+t.vTile]
	case f == FormQ8 && p.meta[b].warm >= 0:
		l := t.warm.slice(p.meta[b].warm)[layer*t.layerW+p.opt.KVHeads*t.kTile8:]
		return l[head*t.vTile8 : (head+1)*t.vTile8]
	}
	return nil
}

// Tiered reports whether the pool's blocks have precision tiers (Q8, Q4,
// Tiered), read through ReadForm and the Half/Quant accessors, rather than
// one F16 or F32 array (KeysF16 ...).
func (p *Pool) Tiered() bool { return p.tier != nil }

// ReadForm is the form in which the row at position pos reads block b,
// which holds positions [i·BlockTokens, (i+1)·BlockTokens) of the row's
// table: the block's exact form for the row's own block and the hot ones
// before it, the warm form for the warm ones, the static form for older
// ones; a lower form when the block lacks the one its position asks.
func (p *Pool) ReadForm(b, i, pos int) Form {
	t, m := p.tier, &p.meta[b]
	cur := pos / p.bt
	if i >= cur-t.hotBlocks && m.half >= 0 {
		return FormF16
	}
	if i >= cur-t.hotBlocks-t.warmBlocks && m.warm >= 0 {
		return FormQ8
	}
	return t.base
}

// hotFromOf and warmFromOf are the first blocks a table whose next row is
// at position next reads in the exact and warm forms.
func (p *Pool) hotFromOf(next int) int  { return max(0, next/p.bt-p.tier.hotBlocks) }
func (p *Pool) warmFromOf(next int) int { return max(0, next/p.bt-p.tier.hotBlocks-p.tier.warmBlocks) }

// needHalf and needWarm add d (+1 or -1) to the holders that read block b
// in its exact or warm form; a form nobody needs becomes idle (cache).
func (p *Pool) needHalf(b int, d int32) {
	m := &p.meta[b]
	m.halfNeed += d
	if m.half >= 0 {
		p.tier.half.retarget(m.half, m.halfNeed)
	}
}

func (p *Pool) needWarm(b int, d int32) {
	m := &p.meta[b]
	m.warmNeed += d
	if m.warm >= 0 {
		p.tier.warm.retarget(m.warm, m.warmNeed)
	}
}

// retarget puts a slot that is not pinned on the idle list when nobody
// needs its form, and takes it off when someone does.
func (a *arena[T]) retarget(s int32, needs int32) {
	switch {
	case needs > 0 && a.state[s] == slotIdle:
		a.setState(s, slotNeeded)
	case needs == 0 && a.state[s] == slotNeeded:
		a.setState(s, slotIdle)
	}
}

// takeSlot detaches a slot for a new form: a free one, else the one idle
// longest (its block loses the form). It returns -1 when there is none.
func takeSlot[T uint16 | byte](a *arena[T], lose func(b int32)) int32 {
	if a.slots == 0 {
		return -1
	}
	if s := a.next[a.freeHead()]; s != a.freeHead() {
		return s
	}
	if s := a.next[a.idleHead()]; s != a.idleHead() {
		lose(a.owner[s])
		a.setState(s, slotFree)
		return s
	}
	return -1
}

// attachHalf gives block b, which is about to be written, an exact form:
// a free or idle slot, else (pool pressure) the needed exact form of a full
// block, whose holders read it in a lower form from then on. The slot is
// pinned until the block fills. Callers check halfAvailable first.
func (p *Pool) attachHalf(b int) {
	a := &p.tier.half
	s := takeSlot(a, func(o int32) { p.meta[o].half = -1 })
	if s < 0 {
		for i := range int32(a.slots) {
			if a.state[i] == slotNeeded {
				p.meta[a.owner[i]].half = -1
				a.setState(i, slotFree)
				s = i
				break
			}
		}
	}
	if s < 0 {
		panic("kvcache: no exact slot for a block being written")
	}
	a.owner[s] = int32(b)
	a.setState(s, slotPinned)
	p.meta[b].half = s
}

// halfAvailable is the exact slots attachHalf can hand out: all but the
// pinned ones.
func (p *Pool) halfAvailable() int { return p.tier.half.slots - p.tier.half.pinned }

// attachWarm gives the full block b a warm form if a free or idle slot is
// left (else it has none: pool pressure), and reports whether it has one.
func (p *Pool) attachWarm(b int) bool {
	a := &p.tier.warm
	s := takeSlot(a, func(o int32) { p.meta[o].warm = -1 })
	if s < 0 {
		return false
	}
	a.owner[s] = int32(b)
	p.meta[b].warm = s
	a.setState(s, slotIdle)
	a.retarget(s, p.meta[b].warmNeed)
	return true
}

// seal marks block b full: its static (and warm) forms are written in every
// layer, so its exact form may be taken back.
func (p *Pool) seal(b int) {
	m := &p.meta[b]
	m.sealed = true
	p.sealed++
	if m.half >= 0 {
		p.unpinHalf(b)
	}
}

// unpinHalf makes block b's exact form, pinned while it was written, cache
// or needed as its holders' windows say.
func (p *Pool) unpinHalf(b int) {
	m := &p.meta[b]
	p.tier.half.setState(m.half, slotIdle)
	p.tier.half.retarget(m.half, m.halfNeed)
}

// dropForms frees the exact and warm slots of block b, which leaves use.
func (p *Pool) dropForms(b int) {
	m := &p.meta[b]
	if m.half >= 0 {
		p.tier.half.setState(m.half, slotFree)
		m.half = -1
	}
	if m.warm >= 0 {
		p.tier.warm.setState(m.warm, slotFree)
		m.warm = -1
	}
	if m.sealed {
		p.sealed--
	}
	m.sealed, m.lossy = false, false
	m.halfNeed, m.warmNeed = 0, 0
}

// adoptForms moves the exact and warm forms of block from onto block to,
// an equal block (the same tokens after the same chain) that lacks them, as
// Commit gives a table the cached copy of a block it computed again.
func (p *Pool) adoptForms(to, from int) {
	mt, mf := &p.meta[to], &p.meta[from]
	if s := mf.half; s >= 0 && mt.half < 0 && mf.sealed && !mf.lossy {
		mt.half, mf.half = s, -1
		p.tier.half.owner[s] = int32(to)
		p.tier.half.setState(s, slotIdle)
		p.tier.half.retarget(s, mt.halfNeed)
	}
	if s := mf.warm; s >= 0 && mt.warm < 0 && !mf.lossy {
		mt.warm, mf.warm = s, -1
		p.tier.warm.owner[s] = int32(to)
		p.tier.warm.setState(s, slotIdle)
		p.tier.warm.retarget(s, mt.warmNeed)
	}
}

// pushBlock appends block b, which the caller has added a reference to, to
// the table, counting the table's needs of its forms.
func (t *BlockTable) pushBlock(b int) {
	t.blocks = append(t.blocks, b)
	if p := t.pool; p.tier != nil {
		// A new last block is in both windows: they start at or before it.
		p.needHalf(b, 1)
		if p.tier.warmBlocks > 0 {
			p.needWarm(b, 1)
		}
	}
}

// popBlock takes the table's last block off, with its needs and its
// reference.
func (t *BlockTable) popBlock() {
	p, i := t.pool, len(t.blocks)-1
	b := t.blocks[i]
	if p.tier != nil {
		if i >= t.hotFrom {
			p.needHalf(b, -1)
		}
		if p.tier.warmBlocks > 0 && i >= t.warmFrom {
			p.needWarm(b, -1)
		}
		t.hotFrom, t.warmFrom = min(t.hotFrom, i), min(t.warmFrom, i)
	}
	t.blocks = t.blocks[:i]
	p.decRef(b)
}

// replaceNeeds moves the table's needs of its block at index i from block
// old to block b, which takes its place.
func (t *BlockTable) replaceNeeds(i, old, b int) {
	p := t.pool
	if p.tier == nil {
		return
	}
	if i >= t.hotFrom {
		p.needHalf(old, -1)
		p.needHalf(b, 1)
	}
	if p.tier.warmBlocks > 0 && i >= t.warmFrom {
		p.needWarm(old, -1)
		p.needWarm(b, 1)
	}
}

// setWindow moves the table's windows to those of a next row at position
// next: it needs the exact forms of its blocks from hotFromOf(next) on and
// the warm forms from warmFromOf(next) on.
func (t *BlockTable) setWindow(next int) {
	p := t.pool
	if p.tier == nil {
		return
	}
	n := len(t.blocks)
	move := func(from *int, to int, need func(b int, d int32)) {
		to = min(to, n)
		for i := *from; i < to; i++ {
			need(t.blocks[i], -1)
		}
		for i := to; i < *from; i++ {
			need(t.blocks[i], 1)
		}
		*from = to
	}
	move(&t.hotFrom, p.hotFromOf(next), p.needHalf)
	if p.tier.warmBlocks > 0 {
		move(&t.warmFrom, p.warmFromOf(next), p.needWarm)
	}
}

// quantizeLayer writes layer of block b's static form, and its warm form
// when it has one, from its exact form: the block's positions are all
// written in that layer.
func (p *Pool) quantizeLayer(b, layer int) {
	p.quantizeForm(b, layer, p.tier.base)
	if p.meta[b].warm >= 0 {
		p.quantizeForm(b, layer, FormQ8)
	}
}

// quantizeForm writes layer of block b's form f (its static form, or FormQ8
// for its warm form) from its exact form.
func (p *Pool) quantizeForm(b, layer int, f Form) {
	o := &p.opt
	src := p.halfLayer(p.meta[b].half, layer)
	kHalf := o.HeadDim * p.bt
	vHalf := p.bt * o.HeadDimV
	bits := f.Bits()
	for h := range o.KVHeads {
		k := src[h*kHalf : (h+1)*kHalf]
		v := src[o.KVHeads*kHalf+h*vHalf:][:vHalf]
		kernels.QuantizeKVTile(p.QuantKeys(b, layer, h, f), k, p.bt, bits, o.HeadDim, p.bt, true)
		kernels.QuantizeKVTile(p.QuantValues(b, layer, h, f), v, o.HeadDimV, bits, p.bt, o.HeadDimV, false)
	}
}

// dequantizeInto writes into dst, an exact form, the full block b
// dequantized from its best quantized form: what a copy of a block that has
// lost its exact form starts from.
func (p *Pool) dequantizeInto(dst []uint16, b int) {
	o := &p.opt
	f := p.tier.base
	if p.meta[b].warm >= 0 {
		f = FormQ8
	}
	kHalf, vHalf := o.HeadDim*p.bt, p.bt*o.HeadDimV
	per := len(dst) / o.Layers
	for l := range o.Layers {
		d := dst[l*per : (l+1)*per]
		for h := range o.KVHeads {
			kernels.DequantizeKVTile(d[h*kHalf:], p.bt, p.QuantKeys(b, l, h, f), f.Bits(), o.HeadDim, p.bt, true)
			kernels.DequantizeKVTile(d[o.KVHeads*kHalf+h*vHalf:], o.HeadDimV, p.QuantValues(b, l, h, f), f.Bits(), p.bt, o.HeadDimV, false)
		}
	}
}

// tierBytes is the memory of a table's block b that the table needs: its
// static form, and its exact and warm forms when they are pinned or
// needed.
func (p *Pool) tierBytes(b int) int64 {
	t, m := p.tier, &p.meta[b]
	n := int64(t.blockQ)
	if m.half >= 0 && t.half.state[m.half] >= slotNeeded {
		n += int64(t.half.elems) * 2
	}
	if m.warm >= 0 && t.warm.state[m.warm] == slotNeeded {
		n += int64(t.blockW)
	}
	return n
}

// storeTiered writes the keys k (m, kv_heads, head_dim) and values v (m,
// kv_heads, head_dim_v) of m positions from offset off into layer of block
// b's exact form; when they complete the block, it makes the layer's
// quantized forms, and after the last layer seals the block.
func (p *Pool) storeTiered(b, layer, off int, k, v []float32) {
	o := &p.opt
	dst := p.halfLayer(p.meta[b].half, layer)
	kHalf, vHalf := o.HeadDim*p.bt, p.bt*o.HeadDimV
	m := len(k) / p.kRow
	var buf [maxTileDim]uint16
	for i := range m {
		t := off + i
		for h := range o.KVHeads {
			kh := buf[:o.HeadDim]
			kernels.FP32ToFP16Row(k[(i*o.KVHeads+h)*o.HeadDim:][:o.HeadDim], kh)
			d := dst[h*kHalf+t:]
			for c, x := range kh {
				d[c*p.bt] = x
			}
			kernels.FP32ToFP16Row(v[(i*o.KVHeads+h)*o.HeadDimV:][:o.HeadDimV], dst[o.KVHeads*kHalf+h*vHalf+t*o.HeadDimV:][:o.HeadDimV])
		}
	}
	if off+m < p.bt {
		return
	}
	if layer == 0 && p.tier.warmBlocks > 0 {
		p.attachWarm(b)
	}
	p.quantizeLayer(b, layer)
	if layer == o.Layers-1 {
		p.seal(b)
	}
}

// tierAt reads element (r, c) of head's key (key: channel r, position c) or
// value (position r, channel c) tile of block b in layer from the block's
// most exact form.
func (p *Pool) tierAt(b, layer, head int, key bool, r, c int) float32 {
	o := &p.opt
	if s := p.meta[b].half; s >= 0 {
		l := p.halfLayer(s, layer)
		if key {
			return kernels.FP16ToFP32(l[(head*o.HeadDim+r)*p.bt+c])
		}
		return kernels.FP16ToFP32(l[o.KVHeads*o.HeadDim*p.bt+(head*p.bt+r)*o.HeadDimV+c])
	}
	f := p.tier.base
	if p.meta[b].warm >= 0 {
		f = FormQ8
	}
	if key {
		return kernels.KVTileAt(p.QuantKeys(b, layer, head, f), f.Bits(), o.HeadDim, p.bt, true, r, c)
	}
	return kernels.KVTileAt(p.QuantValues(b, layer, head, f), f.Bits(), p.bt, o.HeadDimV, false, r, c)
}
