package kvcache

import (
	"errors"
	"fmt"
	"hash/maphash"
	"math"

	"github.com/ruvllm/ruvllm/neuralfield"
)

// The paged cache keeps the keys and values of many sequences in one pool of
// fixed-size blocks, vLLM's design: a sequence owns a BlockTable listing the
// blocks that hold its positions; blocks are reference counted so that
// sequences with the same prefix (a shared system prompt, the n choices of
// one request) hold one copy; a full block whose keys and values are written
// is registered in a prefix index under a hash of its tokens and of the chain
// before it, and stays there after its last user lets go, until the pool needs
// the room (least recently used first).
//
// A Pool and its tables are not safe for concurrent use: the engine's single
// scheduler goroutine drives them, as it drives the backend. Reading the K/V
// of blocks (attention) while nothing changes a table is safe from many
// goroutines.

// Errors the paged cache wraps, for errors.Is.
var (
	// ErrPoolFull means a table needs more blocks than are free or evictable.
	ErrPoolFull = errors.New("kvcache: KV block pool is full")
	// ErrTableFull means tokens would take a table past its MaxLen.
	ErrTableFull = errors.New("kvcache: block table is full")
)

// DefaultBlockTokens is the positions of one block when PoolOptions leaves
// BlockTokens zero, vLLM's default.
const DefaultBlockTokens = 16

// maxBlockTokens bounds a block so that a hostile option cannot make one
// block larger than the pool.
const maxBlockTokens = 1 << 16

// PoolOptions are the dimensions of a pool and its budget.
type PoolOptions struct {
	Layers   int
	KVHeads  int
	HeadDim  int // per-head length of a key
	HeadDimV int // per-head length of a value; 0 means HeadDim
	// BlockTokens is the positions of one block; 0 means DefaultBlockTokens.
	BlockTokens int
	Type        Precision
	// HotTokens (Tiered) are the most recent positions before a row's own
	// block that it reads at F16, WarmTokens those before them it reads at
	// 8 bits; both are rounded up to whole blocks. Older positions are read
	// at 4 bits.
	HotTokens, WarmTokens int
	// HotSlots and WarmSlots (Q8, Q4, Tiered) are the blocks' worth of
	// memory for exact (F16) and warm (8-bit) forms; 0 sizes them for a
	// prefill pass of 512 tokens plus Sequences sequences' hot and warm
	// blocks. With fewer, rows read some blocks in a lower form.
	HotSlots, WarmSlots int
	// Sequences is how many tables are expected to fill blocks at once
	// (the engine's slots); 0 means 1. It only sizes the default slots.
	Sequences int
	// Store, when set, receives every full block a table commits and
	// continues the prefix chains RAM has lost (spill.go); its pages must
	// hold StorePageBytes. StoreKey keys this pool's blocks there: a hash
	// of everything that makes their keys and values (the model file, the
	// precision and tiers, the arithmetic's version, the byte order).
	Store    *neuralfield.Store
	StoreKey neuralfield.Key
	// Blocks is the number of blocks; when it is 0 the pool has as many
	// whole blocks as fit in Bytes (the keys and values only; the
	// bookkeeping, a few words per block and a token id per position, is
	// not counted).
	Blocks int
	Bytes  int64
}

// Pool is a fixed number of KV blocks allocated once, with the prefix index
// and the lists of unused blocks.
//
// Layout of the storage (F16 or F32, as Type says), block-major so that a
// block's keys or values are one contiguous range (one copy for
// copy-on-write, one range to spill later):
//
//	keys   (blocks, layers, kv_heads, block_tokens, head_dim)
//	values (blocks, layers, kv_heads, head_dim_v, block_tokens): transposed within the block
//
// so one block of one layer is what attention reads for block_tokens
// positions, each kv head's part contiguous: keys (kv_heads, block_tokens,
// head_dim), one row per position, and values (kv_heads, head_dim_v,
// block_tokens), one row per value element, as llama.cpp's cache holds them
// transposed without flash attention.
//
// Every block is in one of three states: used (reference count > 0, held by
// tables), cached (count 0 but registered in the prefix index; on the LRU
// list, evicted from its front) and free (count 0, not registered).
type Pool struct {
	opt    PoolOptions
	n      int // blocks
	bt     int // positions of a block
	kRow   int // elements of one position's keys: kv_heads*head_dim
	vRows  int // value rows of one block and layer: kv_heads*head_dim_v
	layerK int // elements of one block's keys in one layer: bt*kRow
	layerV int // elements of one block's values in one layer: vRows*bt
	blockK int // elements of one block's keys, all layers
	blockV int

	k16, v16 []uint16
	k32, v32 []float32

	// tier is set in a pool of tiered blocks (Q8, Q4, Tiered), which keeps
	// them in tier's arrays rather than k16/v16 or k32/v32.
	tier *tiers
	// store is set when the pool spills to a store.
	store *storeState

	meta   []blockMeta
	tokens []int32 // (blocks, block_tokens): the tokens of registered blocks

	// links of the free and LRU lists: index i < n is block i, n is the
	// free list's sentinel and n+1 the LRU list's.
	prev, next     []int32
	freeN, cachedN int

	// The prefix index: a chained hash table of fixed size (a power of two
	// no smaller than n), so that registering never allocates.
	buckets []int32
	mask    uint64
	seed    maphash.Seed
	hash    func(parent uint64, tokens []int32) uint64 // tests inject collisions here
	nextID  uint64

	used, shared int
	sealed       int // tiered blocks whose static form is written
	hits, misses uint64
	evictions    uint64
	copies       uint64
	dedups       uint64
}

// blockMeta is the bookkeeping of one block.
type blockMeta struct {
	// Set while the block is registered in the prefix index; id is 0
	// otherwise. Ids are never reused, so that a child registered under
	// an evicted parent can never be reached through a new block that
	// took the parent's place.
	id     uint64
	parent uint64 // id of the block before it in its chain; for the first block, the namespace
	hash   uint64 // chain hash: hash(parent's hash, tokens); a first block's parent hash is the namespace
	ref    int32
	bnext  int32 // next block in its index bucket, -1 at the end
	list   uint8 // onNoList, onFreeList or onLRUList
	root   bool  // the first block of its chain
	// Set once the block has been handed out: before that its memory is
	// the zero pages the pool was made with and needs no clearing.
	dirty bool
	// Tiered pools: the block's exact (F16) and warm slots (-1: none), the
	// holders that read it in those forms, and whether it is full with its
	// quantized forms written (sealed blocks are never written again).
	half, warm         int32
	halfNeed, warmNeed int32
	sealed             bool
	// lossy is set on a tiered block whose exact form was rebuilt from a
	// quantized one (a copy of a block that had lost its exact form): its
	// keys and values are near, not equal to, what the model computed, so
	// it is never spilled as exact.
	lossy bool
	// skey is the block's key in the store (spill.go), set (keyed) while
	// it is registered and its table had a store namespace.
	skey  neuralfield.Key
	keyed bool
}

const (
	onNoList uint8 = iota
	onFreeList
	onLRUList
)

// NewPool allocates the pool: every block's memory, once.
func NewPool(o PoolOptions) (*Pool, error) {
	if o.HeadDimV == 0 {
		o.HeadDimV = o.HeadDim
	}
	if o.BlockTokens == 0 {
		o.BlockTokens = DefaultBlockTokens
	}
	if o.Layers <= 0 || o.KVHeads <= 0 || o.HeadDim <= 0 || o.HeadDimV <= 0 {
		return nil, fmt.Errorf("kvcache: layers %d, kv heads %d and head dims %d/%d must be positive",
			o.Layers, o.KVHeads, o.HeadDim, o.HeadDimV)
	}
	if o.BlockTokens < 0 || o.BlockTokens > maxBlockTokens {
		return nil, fmt.Errorf("kvcache: %d tokens per block is outside [1, %d]", o.BlockTokens, maxBlockTokens)
	}
	if o.Type < F16 || o.Type > Tiered {
		return nil, fmt.Errorf("kvcache: unknown precision %d", int(o.Type))
	}
	if o.Blocks < 0 || o.Bytes < 0 {
		return nil, fmt.Errorf("kvcache: negative budget of %d blocks or %d bytes", o.Blocks, o.Bytes)
	}
	if o.HotSlots < 0 || o.WarmSlots < 0 || o.Sequences < 0 {
		return nil, fmt.Errorf("kvcache: negative slots (%d hot, %d warm) or sequences (%d)", o.HotSlots, o.WarmSlots, o.Sequences)
	}
	// Sizes in float64 first, so that the checks cannot overflow. A tiered
	// pool's blocks are their static forms; its exact and warm slots are
	// extra (extra is their memory, which a byte budget pays first).
	elem := float64(o.Type.DType().RowBytes(1))
	blockBytes := float64(o.Layers) * float64(o.BlockTokens) * float64(o.KVHeads) * float64(o.HeadDim+o.HeadDimV) * elem
	var tier *tiers
	var halfBytes, warmBytes float64
	if o.Type.Quantized() {
		var err error
		if tier, halfBytes, warmBytes, err = tierOptions(&o); err != nil {
			return nil, err
		}
		blockBytes = float64(tier.blockQ)
	}
	if blockBytes > maxBytes || halfBytes > maxBytes {
		return nil, fmt.Errorf("kvcache: one block of %.0f bytes is more than the %d allowed", max(blockBytes, halfBytes), int64(maxBytes))
	}
	n := o.Blocks
	extra := 0.0
	if n == 0 {
		budget := float64(o.Bytes)
		if tier != nil {
			// The default slots depend on n only through a min: size them
			// for a pool of unbounded blocks, then see what is left.
			hs, ws := o.HotSlots, o.WarmSlots
			dh, dw := defaultSlots(&o, tier, math.MaxInt32)
			if hs == 0 {
				hs = dh
			}
			if ws == 0 {
				ws = dw
			}
			budget -= float64(hs)*halfBytes + float64(ws)*warmBytes
		}
		nb := math.Floor(budget / blockBytes)
		if nb < 1 {
			return nil, fmt.Errorf("kvcache: a budget of %d bytes holds no block of %.0f bytes", o.Bytes, blockBytes)
		}
		n = int(min(nb, math.MaxInt32))
	}
	if tier != nil {
		dh, dw := defaultSlots(&o, tier, n)
		if o.HotSlots == 0 {
			o.HotSlots = dh
		}
		if o.WarmSlots == 0 && tier.warmBlocks > 0 {
			o.WarmSlots = dw
		}
		if tier.warmBlocks == 0 {
			o.WarmSlots = 0
		}
		extra = float64(o.HotSlots)*halfBytes + float64(o.WarmSlots)*warmBytes
	}
	if total := float64(n)*blockBytes + extra; total > maxBytes || n >= math.MaxInt32-2 || o.HotSlots >= math.MaxInt32-2 || o.WarmSlots >= math.MaxInt32-2 {
		return nil, fmt.Errorf("kvcache: %d blocks of %.0f bytes need %.0f bytes, more than the %d allowed",
			n, blockBytes, total, int64(maxBytes))
	}
	o.Blocks = n

	p := &Pool{
		opt:   o,
		n:     n,
		bt:    o.BlockTokens,
		kRow:  o.KVHeads * o.HeadDim,
		vRows: o.KVHeads * o.HeadDimV,
		seed:  maphash.MakeSeed(),
	}
	p.layerK, p.layerV = p.bt*p.kRow, p.vRows*p.bt
	p.blockK, p.blockV = o.Layers*p.layerK, o.Layers*p.layerV
	if tier != nil {
		p.tier = tier
		tier.baseData = make([]byte, n*tier.blockQ)
		tier.half = newArena[uint16](o.HotSlots, int(halfBytes)/2)
		tier.warm = newArena[byte](o.WarmSlots, tier.blockW)
		prefault(tier.baseData)
		prefault(tier.half.data)
		prefault(tier.warm.data)
	} else if o.Type == F16 {
		p.k16 = make([]uint16, n*p.blockK)
		p.v16 = make([]uint16, n*p.blockV)
		prefault(p.k16)
		prefault(p.v16)
	} else {
		p.k32 = make([]float32, n*p.blockK)
		p.v32 = make([]float32, n*p.blockV)
		prefault(p.k32)
		prefault(p.v32)
	}
	p.meta = make([]blockMeta, n)
	for b := range p.meta {
		p.meta[b].half, p.meta[b].warm = -1, -1
	}
	p.tokens = make([]int32, n*p.bt)
	p.prev = make([]int32, n+2)
	p.next = make([]int32, n+2)
	for _, s := range []int32{p.freeHead(), p.lruHead()} {
		p.prev[s], p.next[s] = s, s
	}
	// Block 0 first: a fresh pool hands out blocks in address order.
	for b := n - 1; b >= 0; b-- {
		p.meta[b].bnext = -1
		p.pushFront(onFreeList, int32(b))
	}
	size := 1
	for size < n {
		size <<= 1
	}
	p.buckets = make([]int32, size)
	for i := range p.buckets {
		p.buckets[i] = -1
	}
	p.mask = uint64(size - 1)
	p.hash = p.chainHash
	p.nextID = 1
	st, err := newStoreState(&o)
	if err != nil {
		return nil, err
	}
	p.store = st
	p.opt.Bytes = p.Stats().TotalBytes
	return p, nil
}

// Options returns the options the pool was made with, defaults filled in;
// Blocks is the number of blocks and Bytes their memory.
func (p *Pool) Options() PoolOptions { return p.opt }

// Type is the precision of the cached elements.
func (p *Pool) Type() Precision { return p.opt.Type }

// BlockTokens is the positions of one block.
func (p *Pool) BlockTokens() int { return p.bt }

// Blocks is the number of blocks in the pool.
func (p *Pool) Blocks() int { return p.n }

// BlockBytes is the memory of one block: its keys and values in every
// layer; in a tiered pool, of its static (quantized) form, which every
// block has.
func (p *Pool) BlockBytes() int64 {
	if p.tier != nil {
		return int64(p.tier.blockQ)
	}
	return int64(p.blockK+p.blockV) * int64(p.opt.Type.DType().RowBytes(1))
}

// KeysF16 is the keys of block b in layer, (kv_heads, block_tokens,
// head_dim); nil for an F32 pool.
func (p *Pool) KeysF16(b, layer int) []uint16 { return blockSlice(p.k16, b, p.blockK, layer, p.layerK) }

// KeysF32 is the keys of block b in layer, (kv_heads, block_tokens,
// head_dim); nil for an F16 pool.
func (p *Pool) KeysF32(b, layer int) []float32 {
	return blockSlice(p.k32, b, p.blockK, layer, p.layerK)
}

// ValuesF16 is the values of block b in layer, transposed: (kv_heads,
// head_dim_v, block_tokens); nil for an F32 pool.
func (p *Pool) ValuesF16(b, layer int) []uint16 {
	return blockSlice(p.v16, b, p.blockV, layer, p.layerV)
}

// ValuesF32 is the values of block b in layer, transposed: (kv_heads,
// head_dim_v, block_tokens); nil for an F16 pool.
func (p *Pool) ValuesF32(b, layer int) []float32 {
	return blockSlice(p.v32, b, p.blockV, layer, p.layerV)
}

// ValueStoreF16 is the values of every block, (blocks, layers, kv_heads,
// head_dim_v, block_tokens), so that attention can read the pieces of one
// value row across a table's blocks in place (ValueOffset locates them); nil
// for an F32 pool.
func (p *Pool) ValueStoreF16() []uint16 { return p.v16 }

// ValueStoreF32 is ValueStoreF16 of an F32 pool; nil for an F16 pool.
func (p *Pool) ValueStoreF32() []float32 { return p.v32 }

// ValueOffset is the element at which block b's values of layer start in
// ValueStoreF16 or ValueStoreF32.
func (p *Pool) ValueOffset(b, layer int) int { return b*p.blockV + layer*p.layerV }

func blockSlice[T any](s []T, b, blockLen, layer, layerLen int) []T {
	if s == nil {
		return nil
	}
	i := b*blockLen + layer*layerLen
	return s[i : i+layerLen : i+layerLen]
}

// Stats is the state of a pool, for /metrics. Bytes count keys and values
// only; a block shared by several tables counts once.
type Stats struct {
	BlockTokens int   // positions of one block
	BlockBytes  int64 // memory of one block
	Blocks      int   // blocks in the pool
	UsedBlocks  int   // held by at least one table
	// SharedBlocks are the used blocks held by more than one table.
	SharedBlocks int
	// CachedBlocks are held by no table but kept in the prefix index for a
	// later prompt; the pool evicts them, least recently used first, when it
	// runs out of free blocks.
	CachedBlocks int
	FreeBlocks   int // neither used nor cached

	TotalBytes, UsedBytes, CachedBytes, FreeBytes int64

	// HitTokens are the prompt tokens Match found cached, MissTokens the
	// rest of the tokens it was asked about.
	HitTokens, MissTokens uint64
	// Evictions counts cached blocks dropped from the index to make room.
	Evictions uint64
	// Copies counts copy-on-write copies of shared blocks.
	Copies uint64
	// Dedups counts blocks a Commit found already cached, which the table
	// then shared instead of keeping its own copy.
	Dedups uint64

	// Blocks holding a form of each precision: in an F16 or F32 pool
	// every used or cached block is F16Blocks (or F32Blocks); in a tiered
	// pool a block may hold several forms, and F16Blocks and Q8Blocks
	// count the exact and warm slots in use, Q4Blocks (or Q8Blocks, in a
	// Q8 pool) the full blocks' static forms.
	F32Blocks, F16Blocks, Q8Blocks, Q4Blocks int

	// With a store: blocks queued to it (SpilledBlocks) and restored from
	// it; the prompt tokens restored (StoreHitTokens) and those past what
	// RAM and the store held (StoreMissTokens); restores, their total
	// seconds and a cumulative histogram of their durations (bounds
	// RestoreBuckets); pages whose tokens were not the prompt's; and the
	// store's own state (shared by the pools of one backend).
	SpilledBlocks, RestoredBlocks   uint64
	StoreHitTokens, StoreMissTokens uint64
	Restores                        uint64
	RestoreSeconds                  float64
	RestoreBuckets                  [len(RestoreBuckets)]uint64
	StoreTokenMismatches            uint64
	Store                           neuralfield.Stats
}

// Stats reports the pool's state and its counters since NewPool. In a
// tiered pool, UsedBytes counts the used blocks' static forms and the exact
// and warm forms that holders need (or that blocks being filled hold),
// CachedBytes the cached blocks' static forms and the forms nobody needs
// (kept until the room is wanted), FreeBytes the rest.
func (p *Pool) Stats() Stats {
	bb := p.BlockBytes()
	st := Stats{
		BlockTokens:  p.bt,
		BlockBytes:   bb,
		Blocks:       p.n,
		UsedBlocks:   p.used,
		SharedBlocks: p.shared,
		CachedBlocks: p.cachedN,
		FreeBlocks:   p.freeN,
		TotalBytes:   int64(p.n) * bb,
		UsedBytes:    int64(p.used) * bb,
		CachedBytes:  int64(p.cachedN) * bb,
		FreeBytes:    int64(p.freeN) * bb,
		HitTokens:    p.hits,
		MissTokens:   p.misses,
		Evictions:    p.evictions,
		Copies:       p.copies,
		Dedups:       p.dedups,
	}
	p.storeStats(&st)
	t := p.tier
	switch {
	case t == nil && p.opt.Type == F32:
		st.F32Blocks = p.used + p.cachedN
	case t == nil:
		st.F16Blocks = p.used + p.cachedN
	default:
		hb, wb := int64(t.half.elems)*2, int64(t.blockW)
		hFree, hIdle := int64(t.half.free), int64(t.half.idle)
		wFree, wIdle := int64(t.warm.free), int64(t.warm.idle)
		hBusy := int64(t.half.slots) - hFree - hIdle
		wBusy := int64(t.warm.slots) - wFree - wIdle
		st.UsedBytes += hBusy*hb + wBusy*wb
		st.CachedBytes += hIdle*hb + wIdle*wb
		st.FreeBytes += hFree*hb + wFree*wb
		st.TotalBytes += int64(t.half.slots)*hb + int64(t.warm.slots)*wb
		st.F16Blocks = t.half.slots - t.half.free
		st.Q8Blocks = t.warm.slots - t.warm.free
		if t.base == FormQ8 {
			st.Q8Blocks += p.sealed
		} else {
			st.Q4Blocks = p.sealed
		}
	}
	return st
}

// Available is the number of blocks the pool can still hand out: free ones
// and cached ones it may evict.
func (p *Pool) Available() int { return p.available() }

// available is the number of blocks alloc can hand out: free ones and
// cached ones it may evict.
func (p *Pool) available() int { return p.freeN + p.cachedN }

// HalfAvailable is, in a tiered pool, how many blocks can be written at
// once: every block is written in its exact (F16) form, and the exact slots
// not pinned by blocks being filled are all it has (a pass that fills
// blocks unpins them). It is Available in an F16 or F32 pool.
func (p *Pool) HalfAvailable() int {
	if p.tier == nil {
		return p.available()
	}
	return p.halfAvailable()
}

func (p *Pool) fullError(need int) error {
	if p.tier != nil && need > p.halfAvailable() {
		return fmt.Errorf("%w: %d blocks to write, %d of %d exact slots free or evictable", ErrPoolFull, need, p.halfAvailable(), p.tier.half.slots)
	}
	return fmt.Errorf("%w: %d blocks needed, %d free and %d cached (evictable) of %d, %d in use",
		ErrPoolFull, need, p.freeN, p.cachedN, p.n, p.used)
}

// alloc takes a block for writing: a free one, else the least recently
// used cached one, which leaves the index. The block's reference count is
// 1; when zero is set its values are zeroed, so that positions nobody
// wrote read as zeros (keys are left as they are: attention reads no key
// past a table's Len). It returns -1 when the pool is exhausted;
// callers check available first.
func (p *Pool) alloc(zero bool) int {
	b := p.take()
	if b < 0 {
		return -1
	}
	if p.tier != nil {
		p.attachHalf(b)
	} else if zero && p.meta[b].dirty {
		p.zeroValues(b)
	}
	p.meta[b].dirty = true
	return b
}

// take hands out a free block, else the least recently used cached one,
// with one reference and its memory as it was; -1 when there is none.
func (p *Pool) take() int {
	b := p.next[p.freeHead()]
	if b == p.freeHead() {
		b = p.next[p.lruHead()]
		if b == p.lruHead() {
			return -1
		}
		p.unregister(int(b))
		p.evictions++
		if p.tier != nil {
			p.dropForms(int(b))
		}
	}
	p.unlink(b)
	p.meta[b].ref = 1
	p.used++
	return int(b)
}

// incRef adds a holder to block b, taking it off its list if it had none.
func (p *Pool) incRef(b int) {
	m := &p.meta[b]
	if m.ref == 0 {
		p.unlink(int32(b))
		p.used++
	}
	m.ref++
	if m.ref == 2 {
		p.shared++
	}
}

// decRef drops a holder of block b. Without holders a registered block
// becomes the most recently used cached block, any other a free one.
func (p *Pool) decRef(b int) {
	m := &p.meta[b]
	m.ref--
	switch m.ref {
	case 1:
		p.shared--
	case 0:
		p.used--
		if m.id != 0 {
			p.pushBack(onLRUList, int32(b))
		} else {
			// Front: the next alloc reuses the memory touched last.
			p.pushFront(onFreeList, int32(b))
			if p.tier != nil {
				p.dropForms(b)
			}
		}
	}
}

// writable reports whether a table holding b may write into it in place:
// nobody else holds it, the index does not promise its contents and (in a
// tiered pool) its quantized forms are not made yet.
func (p *Pool) writable(b int) bool {
	m := &p.meta[b]
	return m.ref == 1 && m.id == 0 && !m.sealed
}

func (p *Pool) freeHead() int32 { return int32(p.n) }
func (p *Pool) lruHead() int32  { return int32(p.n + 1) }

// pushFront and pushBack put a block that is on no list on the free list
// (onFreeList) or the LRU list (onLRUList).
func (p *Pool) pushFront(list uint8, b int32) { p.insertAfter(list, p.head(list), b) }
func (p *Pool) pushBack(list uint8, b int32)  { p.insertAfter(list, p.prev[p.head(list)], b) }

func (p *Pool) head(list uint8) int32 {
	if list == onFreeList {
		return p.freeHead()
	}
	return p.lruHead()
}

func (p *Pool) insertAfter(list uint8, at, b int32) {
	n := p.next[at]
	p.prev[b], p.next[b] = at, n
	p.next[at], p.prev[n] = b, b
	p.meta[b].list = list
	if list == onFreeList {
		p.freeN++
	} else {
		p.cachedN++
	}
}

func (p *Pool) unlink(b int32) {
	m := &p.meta[b]
	switch m.list {
	case onNoList:
		return
	case onFreeList:
		p.freeN--
	case onLRUList:
		p.cachedN--
	}
	pr, nx := p.prev[b], p.next[b]
	p.next[pr], p.prev[nx] = nx, pr
	p.prev[b], p.next[b] = b, b
	m.list = onNoList
}

// zeroValues clears every value of block b. A tiered pool's attention
// reads no value past a table's Len, so its blocks need no clearing.
func (p *Pool) zeroValues(b int) {
	if p.tier != nil {
		return
	}
	if p.opt.Type == F16 {
		clear(p.v16[b*p.blockV : (b+1)*p.blockV])
		return
	}
	clear(p.v32[b*p.blockV : (b+1)*p.blockV])
}

// zeroTail clears the values of positions [from, block_tokens) of block b
// in every layer.
func (p *Pool) zeroTail(b, from int) {
	if p.tier != nil {
		return
	}
	if p.opt.Type == F16 {
		zeroTail(p, p.v16, b, from)
		return
	}
	zeroTail(p, p.v32, b, from)
}

func zeroTail[T uint16 | float32](p *Pool, v []T, b, from int) {
	for l := range p.opt.Layers {
		vl := blockSlice(v, b, p.blockV, l, p.layerV)
		for r := 0; r < len(vl); r += p.bt {
			clear(vl[r+from : r+p.bt])
		}
	}
}

// copyBlock copies positions [0, n) of block src into dst, whose other
// positions' values become zeros. In a tiered pool it copies the exact
// form, or dequantizes src's best form where src has lost its exact one.
func (p *Pool) copyBlock(dst, src, n int) {
	if t := p.tier; t != nil {
		d := t.half.slice(p.meta[dst].half)
		if s := p.meta[src].half; s >= 0 {
			copy(d, t.half.slice(s))
			p.meta[dst].lossy = p.meta[src].lossy
		} else {
			p.dequantizeInto(d, src)
			p.meta[dst].lossy = true
		}
		return
	}
	if p.opt.Type == F16 {
		copy(p.k16[dst*p.blockK:(dst+1)*p.blockK], p.k16[src*p.blockK:(src+1)*p.blockK])
		copy(p.v16[dst*p.blockV:(dst+1)*p.blockV], p.v16[src*p.blockV:(src+1)*p.blockV])
	} else {
		copy(p.k32[dst*p.blockK:(dst+1)*p.blockK], p.k32[src*p.blockK:(src+1)*p.blockK])
		copy(p.v32[dst*p.blockV:(dst+1)*p.blockV], p.v32[src*p.blockV:(src+1)*p.blockV])
	}
	if n < p.bt {
		p.zeroTail(dst, n)
	}
}
