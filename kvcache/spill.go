package kvcache

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"time"
	"unsafe"

	"github.com/ruvllm/ruvllm/neuralfield"
)

// A pool with a Store (PoolOptions.Store) writes every full block to it
// when a table commits the block: a page of the block's tokens and its
// exact keys and values (the F16 form, what the block held when it
// filled), so that a block restored from the store is bit for bit the block
// that was committed, in every precision; a tiered pool quantizes it again
// as it did when the block filled. The page is keyed by a SHA-256 chain:
// a block's key hashes its parent's key and its tokens, and a table's first
// block's parent is the table's store namespace, which hashes the model
// file, the precision and tiers, and the adapter and its scale (StoreKey,
// SetStoreNamespace). So a page is only found by a prompt that starts with
// the same tokens under the same model, adapter and precision, whatever
// process wrote it. The page's tokens are compared with the prompt's before
// a block is restored, too.
//
// Writing is behind the decode path: the page is copied into the store's
// queue, which its own goroutine writes. Match and Reuse continue a chain
// that RAM lacks from the store: they find how far the store goes, ask the
// kernel to read those pages ahead, and restore them block after block
// into the pool, registered in the prefix index as committed blocks.

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
	if need := StorePageBytes(*o); need > o.Store.PageBytes() {
		return nil, fmt.Errorf("kvcache: a block's page of %d bytes does not fit the store's pages of %d", need, o.Store.PageBytes())
	}
	return &storeState{
		store:  o.Store,
		key:    o.StoreKey,
		hasher: sha256.New(),
		buf:    make([]byte, 4*o.BlockTokens),
	}, nil
}

// StorePageBytes is the page a block of pools of these options spills:
// its tokens and its exact keys and values, as PoolOptions.StorePageBytes
// must allow.
func StorePageBytes(o PoolOptions) int {
	if o.HeadDimV == 0 {
		o.HeadDimV = o.HeadDim
	}
	if o.BlockTokens == 0 {
		o.BlockTokens = DefaultBlockTokens
	}
	return 4*o.BlockTokens + 2*o.Layers*o.KVHeads*o.BlockTokens*(o.HeadDim+o.HeadDimV)
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
		ok = s.store.Put(m.skey, s.buf, halfBytes(p.tier.half.slice(m.half)))
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
	n := 0
	for _, k := range s.keys {
		j := len(t.blocks)
		blk := tokens[j*p.bt : (j+1)*p.bt]
		if p.available() < 1 || p.tier != nil && p.halfAvailable() < 1 {
			break
		}
		b := p.alloc(false)
		err := s.store.Get(k, func(page []byte) error { return p.fillBlock(b, page, blk) })
		if err != nil {
			p.decRef(b)
			break
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
		n++
	}
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

// fillBlock writes a page's keys and values into block b, after checking
// that the page is a block's and holds tokens; a tiered block is then
// quantized and sealed, as when it filled.
func (p *Pool) fillBlock(b int, page []byte, tokens []int32) error {
	s := p.store
	if len(page) != StorePageBytes(p.opt) {
		return fmt.Errorf("kvcache: a stored page of %d bytes, want %d", len(page), StorePageBytes(p.opt))
	}
	for i, t := range tokens {
		if int32(binary.LittleEndian.Uint32(page[4*i:])) != t {
			s.tokenMismatches++
			return errors.New("kvcache: a stored page holds other tokens")
		}
	}
	data := page[4*p.bt:]
	if p.tier != nil {
		copy(halfBytes(p.tier.half.slice(p.meta[b].half)), data)
		if p.tier.warmBlocks > 0 {
			p.attachWarm(b)
		}
		for l := range p.opt.Layers {
			p.quantizeLayer(b, l)
		}
		p.seal(b)
		return nil
	}
	k := halfBytes(p.k16[b*p.blockK : (b+1)*p.blockK])
	copy(k, data)
	copy(halfBytes(p.v16[b*p.blockV:(b+1)*p.blockV]), data[len(k):])
	return nil
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
