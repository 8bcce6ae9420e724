package kvcache

import (
	"fmt"
	"slices"
	"testing"
)

// Helpers shared by the paged cache's tests. Keys and values are a function
// of the whole prefix up to and including a position, as a real model's
// are, so a block shared or copied wrongly shows as wrong data; they are
// multiples of 1/4 in [-250, 250), exact in F16 and F32.

// small are the dimensions most tests use: blocks of 4 positions.
var small = PoolOptions{Layers: 2, KVHeads: 2, HeadDim: 3, HeadDimV: 2, BlockTokens: 4, Type: F32}

func newTestPool(t testing.TB, o PoolOptions, blocks int) *Pool {
	t.Helper()
	o.Blocks = blocks
	p, err := NewPool(o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func newTestTable(t testing.TB, p *Pool, maxLen int) *BlockTable {
	t.Helper()
	tab, err := p.NewTable(maxLen)
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

func prefixHash(prefix []int32) uint64 {
	h := uint64(14695981039346656037)
	for _, x := range prefix {
		h ^= uint64(x) + 0x9e3779b97f4a7c15
		h *= 1099511628211
		h ^= h >> 29
	}
	return h
}

// kvOf is the keys (kv_heads*head_dim) and values (kv_heads*head_dim_v) of
// the last token of prefix in layer, computed in namespace ns (as with
// another adapter).
func kvOf(o PoolOptions, layer int, ns uint64, prefix []int32) (k, v []float32) {
	h := prefixHash(prefix) ^ ns*0x9e3779b97f4a7c15
	k = make([]float32, o.KVHeads*o.HeadDim)
	v = make([]float32, o.KVHeads*o.HeadDimV)
	for j := range k {
		k[j] = float32(int64((h>>8+uint64(layer*1009+j*7))%2000)-1000) / 4
	}
	for j := range v {
		v[j] = float32(int64((h>>20+uint64(layer*31+j*13+5))%2000)-1000) / 4
	}
	return k, v
}

// store writes the keys and values of positions [from, to) of tab, one
// Store call per layer, so that a call crosses block boundaries.
func store(tab *BlockTable, from, to int) {
	o := tab.Pool().Options()
	for l := range o.Layers {
		var ks, vs []float32
		for pos := from; pos < to; pos++ {
			k, v := kvOf(o, l, tab.Namespace(), tab.Tokens()[:pos+1])
			ks, vs = append(ks, k...), append(vs, v...)
		}
		tab.Store(l, from, ks, vs)
	}
}

// appendStored appends tokens to tab and writes their keys and values.
func appendStored(t testing.TB, tab *BlockTable, tokens ...int32) {
	t.Helper()
	pos, err := tab.Append(tokens)
	if err != nil {
		t.Fatal(err)
	}
	store(tab, pos, tab.Len())
}

// checkData compares every key and value of tab with kvOf.
func checkData(tab *BlockTable) error {
	o := tab.Pool().Options()
	for pos := range tab.Len() {
		for l := range o.Layers {
			k, v := kvOf(o, l, tab.Namespace(), tab.Tokens()[:pos+1])
			for h := range o.KVHeads {
				for i := range o.HeadDim {
					if got, want := tab.KeyAt(l, pos, h, i), k[h*o.HeadDim+i]; got != want {
						return fmt.Errorf("key of layer %d, pos %d, head %d [%d] = %g, want %g", l, pos, h, i, got, want)
					}
				}
				for i := range o.HeadDimV {
					if got, want := tab.ValueAt(l, pos, h, i), v[h*o.HeadDimV+i]; got != want {
						return fmt.Errorf("value of layer %d, pos %d, head %d [%d] = %g, want %g", l, pos, h, i, got, want)
					}
				}
			}
		}
	}
	return nil
}

// valuesZeroFrom reports whether the values of positions [from,
// block_tokens) of block b are zeros in every layer.
func valuesZeroFrom(p *Pool, b, from int) bool {
	for l := range p.opt.Layers {
		if p.opt.Type == F16 {
			if !zeroFrom(p.ValuesF16(b, l), p.bt, from) {
				return false
			}
		} else if !zeroFrom(p.ValuesF32(b, l), p.bt, from) {
			return false
		}
	}
	return true
}

// zeroFrom reports whether every row of bt elements of v is zero from
// column from on.
func zeroFrom[T uint16 | float32](v []T, bt, from int) bool {
	for r := 0; r < len(v); r += bt {
		if slices.ContainsFunc(v[r+from:r+bt], func(x T) bool { return x != 0 }) {
			return false
		}
	}
	return true
}

// checkPool verifies the pool's bookkeeping against the tables that hold
// its blocks: reference counts, the lists, the counters, the index, and
// each table's data and committed chain.
func checkPool(p *Pool, tables []*BlockTable) error {
	refs := make([]int32, p.n)
	for _, tab := range tables {
		for _, b := range tab.Blocks() {
			refs[b]++
		}
	}
	var used, shared, free, cached, registered int
	for b := range p.n {
		m := &p.meta[b]
		if m.ref != refs[b] {
			return fmt.Errorf("block %d: reference count %d, held %d times", b, m.ref, refs[b])
		}
		switch {
		case m.ref > 0 && m.list != onNoList:
			return fmt.Errorf("block %d is used and on list %d", b, m.list)
		case m.ref == 0 && m.id == 0 && m.list != onFreeList:
			return fmt.Errorf("block %d is free but on list %d", b, m.list)
		case m.ref == 0 && m.id != 0 && m.list != onLRUList:
			return fmt.Errorf("block %d is cached but on list %d", b, m.list)
		}
		if m.ref > 0 {
			used++
		}
		if m.ref > 1 {
			shared++
		}
		if m.ref == 0 && m.id == 0 {
			free++
		}
		if m.ref == 0 && m.id != 0 {
			cached++
		}
		if m.id != 0 {
			registered++
		}
	}
	if used != p.used || shared != p.shared || free != p.freeN || cached != p.cachedN {
		return fmt.Errorf("counted used %d, shared %d, free %d, cached %d; pool says %d, %d, %d, %d",
			used, shared, free, cached, p.used, p.shared, p.freeN, p.cachedN)
	}
	for _, list := range []uint8{onFreeList, onLRUList} {
		n, head := 0, p.head(list)
		for b := p.next[head]; b != head; b = p.next[b] {
			if p.prev[p.next[b]] != b {
				return fmt.Errorf("list %d is not doubly linked at block %d", list, b)
			}
			n++
		}
		if want := map[uint8]int{onFreeList: free, onLRUList: cached}[list]; n != want {
			return fmt.Errorf("list %d has %d blocks, want %d", list, n, want)
		}
	}
	inIndex := 0
	for i, head := range p.buckets {
		for b := head; b >= 0; b = p.meta[b].bnext {
			if p.meta[b].id == 0 || p.meta[b].hash&p.mask != uint64(i) {
				return fmt.Errorf("block %d is in bucket %d but not registered there", b, i)
			}
			inIndex++
		}
	}
	if inIndex != registered {
		return fmt.Errorf("index holds %d blocks, %d are registered", inIndex, registered)
	}
	st := p.Stats()
	bb := p.BlockBytes()
	if p.tier == nil && (st.UsedBytes != int64(used)*bb || st.CachedBytes != int64(cached)*bb || st.FreeBytes != int64(free)*bb) ||
		st.UsedBytes+st.CachedBytes+st.FreeBytes != st.TotalBytes || used+cached+free != p.n {
		return fmt.Errorf("stats %+v do not add up", st)
	}
	if p.tier != nil {
		if err := checkTiers(p, tables); err != nil {
			return err
		}
	}
	for ti, tab := range tables {
		if want := (tab.Len() + p.bt - 1) / p.bt; len(tab.Blocks()) != want {
			return fmt.Errorf("table %d holds %d tokens in %d blocks, want %d", ti, tab.Len(), len(tab.Blocks()), want)
		}
		if p.tier == nil {
			if err := checkData(tab); err != nil {
				return fmt.Errorf("table %d: %v", ti, err)
			}
		}
		// The committed blocks are registered and reachable as a chain.
		parentHash, parentID := tab.namespace, tab.namespace
		for i := range tab.committed {
			toks := tab.Tokens()[i*p.bt : (i+1)*p.bt]
			h := p.hash(parentHash, toks)
			if b := p.lookup(h, parentID, i == 0, toks); b != tab.Blocks()[i] {
				return fmt.Errorf("table %d: committed block %d (id %d) is not in the index (lookup gives %d)",
					ti, i, tab.Blocks()[i], b)
			}
			parentHash, parentID = h, p.meta[tab.Blocks()[i]].id
		}
		if off := tab.Len() % p.bt; off != 0 && !tab.staleTail && p.tier == nil {
			if b := tab.Blocks()[len(tab.Blocks())-1]; p.writable(b) && !valuesZeroFrom(p, b, off) {
				return fmt.Errorf("table %d: its own block %d has values that are not zero past position %d", ti, b, tab.Len())
			}
		}
	}
	return nil
}

func mustCheck(t testing.TB, p *Pool, tables ...*BlockTable) {
	t.Helper()
	if err := checkPool(p, tables); err != nil {
		t.Fatal(err)
	}
}

// seq is the tokens 0, 1, ..., n-1 shifted by base: distinct prompts.
func seq(base, n int) []int32 {
	s := make([]int32, n)
	for i := range s {
		s[i] = int32(base + i)
	}
	return s
}
