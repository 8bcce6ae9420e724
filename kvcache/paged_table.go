package kvcache

import (
	"fmt"

	"github.com/ruvllm/ruvllm/kernels"
	"github.com/ruvllm/ruvllm/neuralfield"
)

// BlockTable is one sequence's view of a pool: the tokens it holds and, in
// order, the blocks holding their keys and values. Position pos lives in
// block Blocks()[pos/BlockTokens] at offset pos%BlockTokens.
//
// After Append, the values of the table's last block at positions at or
// past Len read as zeros while the block is the table's alone (so attention
// may run its value dot products past Len with zero weights without meeting
// a stale NaN); in a block it shares they hold what the other holders
// wrote. Keys past Len are left unspecified: nothing reads them. Like its pool, a
// table is not safe for concurrent use.
type BlockTable struct {
	pool   *Pool
	blocks []int   // (ceil(len/block_tokens)) block ids; capacity for maxLen
	tokens []int32 // capacity maxLen
	// The leading blocks that are full and registered in the index. Their
	// chain hashes and ids are in the pool's metadata.
	committed int
	maxLen    int
	namespace uint64
	// staleTail is set when Truncate left the last block shared or cached
	// with other tokens' values past Len; the next Append that writes the
	// block in place zeroes them first.
	staleTail bool
	// In a tiered pool, the table counts a need of the exact forms of its
	// blocks from index hotFrom on, and of the warm forms from warmFrom
	// on: the blocks its next row reads in those forms (setWindow).
	hotFrom, warmFrom int
	// storeNS is the key its chains start from in the pool's store, when
	// storeOK (spill.go).
	storeNS neuralfield.Key
	storeOK bool
}

// NewTable creates an empty table for up to maxLen tokens. Its slices are
// sized once, so appending never allocates; maxLen cannot exceed what the
// pool holds.
func (p *Pool) NewTable(maxLen int) (*BlockTable, error) {
	if maxLen <= 0 || maxLen > p.n*p.bt {
		return nil, fmt.Errorf("kvcache: a table of %d tokens does not fit a pool of %d blocks of %d",
			maxLen, p.n, p.bt)
	}
	t := &BlockTable{
		pool:   p,
		blocks: make([]int, 0, (maxLen+p.bt-1)/p.bt),
		tokens: make([]int32, 0, maxLen),
		maxLen: maxLen,
	}
	t.SetNamespace(0)
	return t, nil
}

// SetNamespace empties the table (as Release) and sets the namespace its
// blocks are committed and matched in. Blocks are shared through the index
// only within one namespace: give tables whose keys and values are computed
// differently for the same tokens (another LoRA adapter or scale) different
// namespaces. The zero value is the namespace of plain model runs.
//
// In a pool with a store, namespace 0 keeps its blocks there under the
// pool's StoreKey; another namespace stays out of the store until
// SetStoreNamespace gives its key.
func (t *BlockTable) SetNamespace(ns uint64) {
	t.Release()
	t.namespace = ns
	t.storeOK = ns == 0 && t.pool.store != nil
	if t.storeOK {
		t.storeNS = t.pool.store.key
	}
}

// Namespace is the table's namespace; see SetNamespace.
func (t *BlockTable) Namespace() uint64 { return t.namespace }

// Pool is the pool the table's blocks come from.
func (t *BlockTable) Pool() *Pool { return t.pool }

// Len is the number of tokens the table holds.
func (t *BlockTable) Len() int { return len(t.tokens) }

// MaxLen is the most tokens the table can hold.
func (t *BlockTable) MaxLen() int { return t.maxLen }

// Tokens are the table's tokens, in order. The slice is the table's own:
// read it, don't keep or change it.
func (t *BlockTable) Tokens() []int32 { return t.tokens }

// Blocks are the ids of the table's blocks, in position order. The slice is
// the table's own and valid until the next change of the table (Append may
// replace the last block, Commit any block by an equal one).
func (t *BlockTable) Blocks() []int { return t.blocks }

// Committed is the number of leading tokens in blocks registered in the
// prefix index.
func (t *BlockTable) Committed() int { return t.committed * t.pool.bt }

// Bytes is the memory of the blocks the table holds; a block it shares
// counts in full for each holder (the pool's Stats counts it once). In a
// tiered pool it counts each block's static form and the exact and warm
// forms the table's rows read (or the block being filled holds), not the
// ones kept as cache.
func (t *BlockTable) Bytes() int64 {
	p := t.pool
	if p.tier == nil {
		return int64(len(t.blocks)) * p.BlockBytes()
	}
	var n int64
	for _, b := range t.blocks {
		n += p.tierBytes(b)
	}
	return n
}

// Locate is the block and offset in it of position pos (< Len).
func (t *BlockTable) Locate(pos int) (block, offset int) {
	return t.blocks[pos/t.pool.bt], pos % t.pool.bt
}

// Append records tokens after the table's Len and makes room for their keys
// and values: the blocks covering positions [Len, Len+len(tokens)) are the
// table's alone and unregistered when it returns, so Store may write them.
// It takes new blocks from the pool as needed and copies the last block
// first when it is shared or cached (copy-on-write). It returns the
// position of the first appended token.
//
// On an error (ErrTableFull, ErrPoolFull) nothing has changed. Appending a
// decode token allocates nothing, whether or not it needs a new block.
func (t *BlockTable) Append(tokens []int32) (int, error) {
	p := t.pool
	pos, n := len(t.tokens), len(tokens)
	if n == 0 {
		return pos, nil
	}
	if n > t.maxLen-pos {
		return pos, fmt.Errorf("%w: %d tokens after %d of %d", ErrTableFull, n, pos, t.maxLen)
	}
	need := (pos+n+p.bt-1)/p.bt - len(t.blocks) // new blocks
	copyLast, unregisterLast := false, false
	if pos%p.bt != 0 {
		m := &p.meta[t.blocks[len(t.blocks)-1]]
		switch {
		case p.tier != nil:
			// A tiered block that is shared, promised to the index or
			// full (its quantized forms made) is copied before a write.
			if m.ref > 1 || m.id != 0 || m.sealed {
				copyLast = true
				need++
			}
		case m.ref > 1:
			copyLast = true
			need++
		case m.id != 0:
			// The table's alone but promised to the index. Copy it, so
			// that the cached prefix survives for the next prompt, when
			// the copy has room: it returns the old block to the cache, so
			// it costs one block only for the moment of the copy.
			if p.available() >= max(need, 1) {
				copyLast = true
			} else {
				unregisterLast = true
			}
		}
	}
	if need > p.available() || p.tier != nil && need > p.halfAvailable() {
		return pos, p.fullError(need)
	}
	last := len(t.blocks) - 1
	switch {
	case copyLast:
		old := t.blocks[last]
		b := p.alloc(false)
		p.copyBlock(b, old, pos%p.bt)
		t.replaceNeeds(last, old, b)
		p.decRef(old)
		t.blocks[last] = b
		p.copies++
	case unregisterLast:
		b := t.blocks[last]
		p.unregister(b)
		p.zeroTail(b, pos%p.bt)
	case t.staleTail && pos%p.bt != 0:
		p.zeroTail(t.blocks[last], pos%p.bt)
	}
	t.staleTail = false
	for len(t.blocks)*p.bt < pos+n {
		t.pushBlock(p.alloc(true))
	}
	t.tokens = append(t.tokens, tokens...)
	return pos, nil
}

// Need is the fewest blocks Append of n tokens takes from the pool: the new
// blocks past the table's last, and a copy of the last when another table
// shares it. Tables appending in one step fit together when the sum of
// their Needs is at most the pool's Available.
func (t *BlockTable) Need(n int) int {
	p := t.pool
	pos := len(t.tokens)
	if n <= 0 {
		return 0
	}
	need := (pos+n+p.bt-1)/p.bt - len(t.blocks)
	if pos%p.bt != 0 {
		m := &p.meta[t.blocks[len(t.blocks)-1]]
		if m.ref > 1 || p.tier != nil && (m.id != 0 || m.sealed) {
			need++
		}
	}
	return need
}

// Truncate keeps the first n tokens and gives back the blocks past them,
// last first, so that the deepest cached blocks are evicted first. A kept
// partial block that is shared or cached is left as is and copied on the
// next Append; one the table has alone gets zero values past n.
func (t *BlockTable) Truncate(n int) error {
	if n < 0 || n > len(t.tokens) {
		return fmt.Errorf("kvcache: cannot truncate %d tokens to %d", len(t.tokens), n)
	}
	p := t.pool
	keep := (n + p.bt - 1) / p.bt
	for len(t.blocks) > keep {
		t.popBlock()
	}
	t.tokens = t.tokens[:n]
	t.setWindow(n)
	t.committed = min(t.committed, n/p.bt)
	t.staleTail = false
	if off := n % p.bt; off != 0 {
		if b := t.blocks[keep-1]; p.writable(b) {
			p.zeroTail(b, off)
		} else {
			t.staleTail = true
		}
	}
	return nil
}

// Release gives every block back to the pool, last first; the table is
// empty and may be used again.
func (t *BlockTable) Release() {
	// Truncate(0) cannot fail.
	_ = t.Truncate(0)
}

// Fork creates a table holding the same tokens in the same blocks, each
// block's reference count one higher, as the n choices of one request share
// their prompt. Whichever table writes a shared block first copies it.
func (t *BlockTable) Fork() *BlockTable {
	f := &BlockTable{
		pool:   t.pool,
		blocks: make([]int, 0, cap(t.blocks)),
		tokens: make([]int32, 0, cap(t.tokens)),
		maxLen: t.maxLen,
	}
	f.Share(t)
	return f
}

// Share empties t (as Release) and makes it hold src's tokens in src's
// blocks, as Fork does for a new table; src must come from the same pool and
// fit in t's MaxLen (it panics otherwise: the caller checks). t takes src's
// namespace.
func (t *BlockTable) Share(src *BlockTable) {
	if src.pool != t.pool || len(src.tokens) > t.maxLen {
		panic(fmt.Sprintf("kvcache: Share of %d tokens into a table of %d, same pool %v", len(src.tokens), t.maxLen, src.pool == t.pool))
	}
	if src == t {
		return
	}
	t.Release()
	for _, b := range src.blocks {
		t.pool.incRef(b)
		t.pushBlock(b)
	}
	t.tokens = append(t.tokens, src.tokens...)
	t.committed = src.committed
	t.namespace = src.namespace
	t.storeNS, t.storeOK = src.storeNS, src.storeOK
	t.staleTail = src.staleTail
	t.setWindow(len(t.tokens))
}

// Store writes the keys k (n, kv_heads, head_dim) and values
// v (n, kv_heads, head_dim_v) of n consecutive tokens from position pos in
// layer, rounded to the pool's precision. The positions must be below Len
// and in blocks Append made writable; writing anywhere else is a bug in the
// caller (it would change another sequence's keys and values) and panics.
func (t *BlockTable) Store(layer, pos int, k, v []float32) {
	p := t.pool
	n := len(k) / max(p.kRow, 1)
	if layer < 0 || layer >= p.opt.Layers || pos < 0 || n*p.kRow != len(k) || n*p.vRows != len(v) || pos+n > len(t.tokens) {
		panic(fmt.Sprintf("kvcache: Store(layer %d, pos %d, %d keys, %d values) out of range of %d tokens",
			layer, pos, len(k), len(v), len(t.tokens)))
	}
	for n > 0 {
		b, off := t.Locate(pos)
		if !p.writable(b) {
			panic(fmt.Sprintf("kvcache: Store at position %d into block %d, which is shared or cached", pos, b))
		}
		m := min(n, p.bt-off)
		if p.tier != nil {
			p.storeTiered(b, layer, off, k[:m*p.kRow], v[:m*p.vRows])
		} else if p.opt.Type == F16 {
			storeKeys(p.KeysF16(b, layer), k[:m*p.kRow], p.opt.HeadDim, p.bt, off, kernels.FP32ToFP16Row)
			storeValuesF16(p.ValuesF16(b, layer), v[:m*p.vRows], p.bt, off)
		} else {
			storeKeys(p.KeysF32(b, layer), k[:m*p.kRow], p.opt.HeadDim, p.bt, off, func(src, dst []float32) { copy(dst, src) })
			storeValuesF32(p.ValuesF32(b, layer), v[:m*p.vRows], p.bt, off)
		}
		k, v = k[m*p.kRow:], v[m*p.vRows:]
		pos += m
		n -= m
	}
}

// storeKeys puts the keys k (m, heads, hd) of m tokens into a block's keys
// dst (heads, bt, hd) from offset off, each head's row converted by put.
func storeKeys[T uint16 | float32](dst []T, k []float32, hd, bt, off int, put func(src []float32, dst []T)) {
	heads := len(dst) / (bt * hd)
	for t := range len(k) / (heads * hd) {
		for h := range heads {
			at := (h*bt + off + t) * hd
			put(k[(t*heads+h)*hd:][:hd], dst[at:at+hd])
		}
	}
}

// storeValuesF32 transposes the values v (m, rows) of m tokens into a
// block's values dst (rows, bt) from offset off.
func storeValuesF32(dst []float32, v []float32, bt, off int) {
	rows := len(dst) / bt
	for t := range len(v) / rows {
		for r, x := range v[t*rows : (t+1)*rows] {
			dst[r*bt+off+t] = x
		}
	}
}

// storeValuesF16 is storeValuesF32 rounding to F16, a chunk of a token's
// values at a time with the vector conversion.
func storeValuesF16(dst []uint16, v []float32, bt, off int) {
	var buf [256]uint16
	rows := len(dst) / bt
	for t := range len(v) / rows {
		row := v[t*rows : (t+1)*rows]
		for c := 0; c < rows; c += len(buf) {
			h := buf[:min(len(buf), rows-c)]
			kernels.FP32ToFP16Row(row[c:c+len(h)], h)
			for r, x := range h {
				dst[(c+r)*bt+off+t] = x
			}
		}
	}
}

// KeyAt reads element i of head h's key at pos, widened to float32; for
// tests and debugging, not the hot path. In a tiered pool it reads the
// block's most exact form.
func (t *BlockTable) KeyAt(layer, pos, h, i int) float32 {
	p := t.pool
	b, off := t.Locate(pos)
	if p.tier != nil {
		return p.tierAt(b, layer, h, true, i, off)
	}
	j := (h*p.bt+off)*p.opt.HeadDim + i
	if p.opt.Type == F16 {
		return kernels.FP16ToFP32(p.KeysF16(b, layer)[j])
	}
	return p.KeysF32(b, layer)[j]
}

// ValueAt reads element i of head h's value at pos, widened to float32.
func (t *BlockTable) ValueAt(layer, pos, h, i int) float32 {
	p := t.pool
	b, off := t.Locate(pos)
	if p.tier != nil {
		return p.tierAt(b, layer, h, false, off, i)
	}
	j := (h*p.opt.HeadDimV+i)*p.bt + off
	if p.opt.Type == F16 {
		return kernels.FP16ToFP32(p.ValuesF16(b, layer)[j])
	}
	return p.ValuesF32(b, layer)[j]
}
