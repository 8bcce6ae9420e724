package kvcache

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/ruvllm/ruvllm/kernels"
)

func TestNewPoolRejectsBadOptions(t *testing.T) {
	ok := PoolOptions{Layers: 2, KVHeads: 2, HeadDim: 4, Blocks: 8}
	cases := []struct {
		name string
		edit func(*PoolOptions)
	}{
		{"zero layers", func(o *PoolOptions) { o.Layers = 0 }},
		{"negative heads", func(o *PoolOptions) { o.KVHeads = -1 }},
		{"zero head dim", func(o *PoolOptions) { o.HeadDim = 0 }},
		{"negative value dim", func(o *PoolOptions) { o.HeadDimV = -3 }},
		{"negative block tokens", func(o *PoolOptions) { o.BlockTokens = -16 }},
		{"huge block tokens", func(o *PoolOptions) { o.BlockTokens = 1 << 30 }},
		{"unknown precision", func(o *PoolOptions) { o.Type = 7 }},
		{"no budget", func(o *PoolOptions) { o.Blocks = 0 }},
		{"negative blocks", func(o *PoolOptions) { o.Blocks = -1 }},
		{"negative bytes", func(o *PoolOptions) { o.Blocks, o.Bytes = 0, -1 }},
		{"bytes below one block", func(o *PoolOptions) { o.Blocks, o.Bytes = 0, 2*16*2*8*2-1 }},
		{"huge pool", func(o *PoolOptions) { o.Blocks = math.MaxInt32 }},
		{"huge byte budget", func(o *PoolOptions) { o.Blocks, o.Bytes = 0, math.MaxInt64 }},
		{"overflowing block", func(o *PoolOptions) { o.HeadDim = math.MaxInt / 4; o.Layers = math.MaxInt / 4 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := ok
			c.edit(&o)
			if _, err := NewPool(o); err == nil {
				t.Fatalf("NewPool(%+v) succeeded", o)
			}
		})
	}
}

func TestNewPoolSizing(t *testing.T) {
	// One F16 block of 16 positions: 2 layers × 16 × 2 heads × (4+4) × 2 bytes.
	const block = 2 * 16 * 2 * 8 * 2
	cases := []struct {
		name       string
		o          PoolOptions
		wantBlocks int
		wantBlock  int64
	}{
		{"exact bytes", PoolOptions{Layers: 2, KVHeads: 2, HeadDim: 4, Bytes: 5 * block}, 5, block},
		{"bytes rounded down", PoolOptions{Layers: 2, KVHeads: 2, HeadDim: 4, Bytes: 6*block - 1}, 5, block},
		{"blocks win over bytes", PoolOptions{Layers: 2, KVHeads: 2, HeadDim: 4, Blocks: 3, Bytes: 100 * block}, 3, block},
		{"f32 doubles a block", PoolOptions{Layers: 2, KVHeads: 2, HeadDim: 4, Type: F32, Bytes: 5 * block}, 2, 2 * block},
		{"value dim and block size", PoolOptions{Layers: 1, KVHeads: 3, HeadDim: 8, HeadDimV: 4, BlockTokens: 32, Blocks: 2}, 2, 1 * 32 * 3 * 12 * 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := NewPool(c.o)
			if err != nil {
				t.Fatal(err)
			}
			if p.Blocks() != c.wantBlocks || p.BlockBytes() != c.wantBlock {
				t.Fatalf("%d blocks of %d bytes, want %d of %d", p.Blocks(), p.BlockBytes(), c.wantBlocks, c.wantBlock)
			}
			o := p.Options()
			if o.BlockTokens == 0 || o.HeadDimV == 0 || o.Blocks != c.wantBlocks || o.Bytes != int64(c.wantBlocks)*c.wantBlock {
				t.Fatalf("Options() = %+v: defaults or budget not filled in", o)
			}
			st := p.Stats()
			if st.FreeBlocks != c.wantBlocks || st.TotalBytes != o.Bytes || st.FreeBytes != o.Bytes || st.UsedBytes != 0 {
				t.Fatalf("fresh pool stats %+v", st)
			}
			mustCheck(t, p)
		})
	}
}

// TestPagedLayout writes keys and values across block boundaries and reads
// them back through the raw per-block views, checking the documented shapes
// and the rounding.
func TestPagedLayout(t *testing.T) {
	dims := []PoolOptions{
		{Layers: 2, KVHeads: 3, HeadDim: 4, HeadDimV: 5, BlockTokens: 4},
		// More value rows than Store converts at once.
		{Layers: 2, KVHeads: 2, HeadDim: 3, HeadDimV: 200, BlockTokens: 4},
	}
	for _, d := range dims {
		for _, prec := range []Precision{F16, F32} {
			t.Run(fmt.Sprintf("%s/value_rows=%d", prec, d.KVHeads*d.HeadDimV), func(t *testing.T) {
				o := d
				o.Type = prec
				p := newTestPool(t, o, 4)
				tab := newTestTable(t, p, 16)
				const n = 10
				if _, err := tab.Append(seq(0, n)); err != nil {
					t.Fatal(err)
				}
				random := func(seed uint64, m int) []float32 {
					x := make([]float32, m)
					for i := range x {
						seed = seed*6364136223846793005 + 1442695040888963407
						x[i] = float32(int64(seed>>40)-1<<23) / (1 << 20)
					}
					return x
				}
				kw, vw := o.KVHeads*o.HeadDim, o.KVHeads*o.HeadDimV
				ks, vs := make([][]float32, o.Layers), make([][]float32, o.Layers)
				for l := range o.Layers {
					ks[l], vs[l] = random(uint64(l), n*kw), random(uint64(l+7), n*vw)
					// Positions 0..2, then 3..9: both calls cross a block boundary.
					tab.Store(l, 0, ks[l][:3*kw], vs[l][:3*vw])
					tab.Store(l, 3, ks[l][3*kw:], vs[l][3*vw:])
				}
				round := func(x float32) float32 {
					if prec == F16 {
						return kernels.FP16ToFP32(kernels.FP32ToFP16(x))
					}
					return x
				}
				raw := func(k16 []uint16, k32 []float32, i int) float32 {
					if prec == F16 {
						return kernels.FP16ToFP32(k16[i])
					}
					return k32[i]
				}
				for l := range o.Layers {
					for pos := range n {
						b, off := tab.Locate(pos)
						if b != tab.Blocks()[pos/4] || off != pos%4 {
							t.Fatalf("Locate(%d) = %d, %d", pos, b, off)
						}
						for h := range o.KVHeads {
							for i := range o.HeadDim {
								want := round(ks[l][(pos*o.KVHeads+h)*o.HeadDim+i])
								// keys (block_tokens, kv_heads, head_dim)
								if got := raw(p.KeysF16(b, l), p.KeysF32(b, l), (h*o.BlockTokens+off)*o.HeadDim+i); got != want {
									t.Fatalf("keys of block %d layer %d [%d][%d][%d] = %g, want %g", b, l, off, h, i, got, want)
								}
								if got := tab.KeyAt(l, pos, h, i); got != want {
									t.Fatalf("KeyAt = %g, want %g", got, want)
								}
							}
							for i := range o.HeadDimV {
								want := round(vs[l][(pos*o.KVHeads+h)*o.HeadDimV+i])
								// values (kv_heads, head_dim_v, block_tokens)
								if got := raw(p.ValuesF16(b, l), p.ValuesF32(b, l), (h*o.HeadDimV+i)*4+off); got != want {
									t.Fatalf("values of block %d layer %d [%d][%d][%d] = %g, want %g", b, l, h, i, off, got, want)
								}
								if got := tab.ValueAt(l, pos, h, i); got != want {
									t.Fatalf("ValueAt = %g, want %g", got, want)
								}
							}
						}
					}
				}
				if len(p.KeysF16(0, 1))+len(p.KeysF32(0, 1)) != 4*kw || len(p.ValuesF16(3, 1))+len(p.ValuesF32(3, 1)) != vw*4 {
					t.Fatal("a block's view of one layer has the wrong length")
				}
				if prec == F16 && (p.KeysF32(0, 0) != nil || p.ValuesF32(0, 0) != nil) || prec == F32 && (p.KeysF16(0, 0) != nil || p.ValuesF16(0, 0) != nil) {
					t.Fatal("the views of the other precision are not nil")
				}
				// The values of the two positions past Len in the last
				// block read as zeros.
				if !valuesZeroFrom(p, tab.Blocks()[2], 2) {
					t.Fatal("values past Len are not zero")
				}
			})
		}
	}
}

func TestStorePanicsOutsideWritableBlocks(t *testing.T) {
	p := newTestPool(t, small, 8)
	a := newTestTable(t, p, 16)
	appendStored(t, a, seq(0, 6)...)
	kw, vw := small.KVHeads*small.HeadDim, small.KVHeads*small.HeadDimV
	b := a.Fork()
	cases := []struct {
		name string
		do   func()
	}{
		{"past Len", func() { a.Store(0, 5, make([]float32, 2*kw), make([]float32, 2*vw)) }},
		{"bad layer", func() { a.Store(2, 0, make([]float32, kw), make([]float32, vw)) }},
		{"ragged values", func() { a.Store(0, 0, make([]float32, kw), make([]float32, vw+1)) }},
		{"shared block", func() { b.Store(0, 1, make([]float32, kw), make([]float32, vw)) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			c.do()
		})
	}
	mustCheck(t, p, a, b)
}

// TestRefCounts follows the reference counts of two blocks through forks,
// truncations and releases.
func TestRefCounts(t *testing.T) {
	p := newTestPool(t, small, 16)
	tabs := map[string]*BlockTable{"a": newTestTable(t, p, 32)}
	appendStored(t, tabs["a"], seq(0, 6)...) // blocks: [0 1 2 3] [4 5 . .]
	blk0, blk1 := tabs["a"].Blocks()[0], tabs["a"].Blocks()[1]
	steps := []struct {
		name       string
		do         func()
		want0      int32 // reference count of a's first block
		want1      int32 // and of its second
		wantShared int
	}{
		{"fork b", func() { tabs["b"] = tabs["a"].Fork() }, 2, 2, 2},
		{"fork c from b", func() { tabs["c"] = tabs["b"].Fork() }, 3, 3, 2},
		{"truncate b to one block", func() { _ = tabs["b"].Truncate(4) }, 3, 2, 2},
		{"truncate c into the first block", func() { _ = tabs["c"].Truncate(2) }, 3, 1, 1},
		{"c writes: copies the first block", func() { appendStored(t, tabs["c"], 9) }, 2, 1, 1},
		{"release b", func() { tabs["b"].Release() }, 1, 1, 0},
		{"fork d, release a", func() { tabs["d"] = tabs["a"].Fork(); tabs["a"].Release() }, 1, 1, 0},
		{"release d", func() { tabs["d"].Release() }, 0, 0, 0},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			s.do()
			if got0, got1 := p.meta[blk0].ref, p.meta[blk1].ref; got0 != s.want0 || got1 != s.want1 {
				t.Fatalf("reference counts %d, %d, want %d, %d", got0, got1, s.want0, s.want1)
			}
			if p.Stats().SharedBlocks != s.wantShared {
				t.Fatalf("%d shared blocks, want %d", p.Stats().SharedBlocks, s.wantShared)
			}
			var all []*BlockTable
			for _, tab := range tabs {
				all = append(all, tab)
			}
			mustCheck(t, p, all...)
		})
	}
	if st := p.Stats(); st.UsedBlocks != 1 || st.Copies != 1 {
		t.Fatalf("after all: %+v, want c's one block used and one copy", st)
	}
}

// TestCopyOnWrite writes into tables that share blocks and checks that the
// other holders keep their keys and values.
func TestCopyOnWrite(t *testing.T) {
	cases := []struct {
		name       string
		blocks     int
		setup      func(t *testing.T, a *BlockTable) *BlockTable // returns the other holder, or nil
		write      []int32                                       // tokens a appends afterwards
		wantCopies uint64
		wantCached bool // a's old block stays cached (matchable)
	}{
		{"fork, parent writes", 8, func(t *testing.T, a *BlockTable) *BlockTable { return a.Fork() }, []int32{100, 101}, 1, false},
		{"fork, parent writes past the block", 8, func(t *testing.T, a *BlockTable) *BlockTable { return a.Fork() }, seq(100, 7), 1, false},
		{"truncate into a shared block", 8, func(t *testing.T, a *BlockTable) *BlockTable {
			b := a.Fork()
			_ = a.Truncate(3)
			return b
		}, []int32{100}, 1, false},
		{"truncate into a committed block", 8, func(t *testing.T, a *BlockTable) *BlockTable {
			_ = a.Truncate(4)
			a.Commit()
			_ = a.Truncate(2)
			return nil
		}, []int32{100, 101, 102}, 1, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newTestPool(t, small, c.blocks)
			a := newTestTable(t, p, 16)
			appendStored(t, a, 1, 2, 3, 4, 5, 6)
			b := c.setup(t, a)
			var before []int
			if b != nil {
				before = slices.Clone(b.Blocks())
			}
			appendStored(t, a, c.write...)
			tables := []*BlockTable{a}
			if b != nil {
				tables = append(tables, b)
				if !slices.Equal(b.Blocks(), before) {
					t.Fatalf("the other table's blocks changed: %v, was %v", b.Blocks(), before)
				}
				// b, the only holder now of the blocks a copied, writes
				// them in place.
				appendStored(t, b, 50, 51, 52)
			}
			mustCheck(t, p, tables...)
			if got := p.Stats().Copies; got != c.wantCopies {
				t.Fatalf("%d copies, want %d", got, c.wantCopies)
			}
			m := newTestTable(t, p, 16)
			if n := m.Match([]int32{1, 2, 3, 4, 9}); (n == 4) != c.wantCached {
				t.Fatalf("Match of the committed block gives %d tokens, want it cached: %v", n, c.wantCached)
			}
			mustCheck(t, p, append(tables, m)...)
		})
	}
	// A committed block the table has alone, with no block free for the
	// copy: the table takes it out of the index and writes in place.
	t.Run("truncate into a committed block, pool full", func(t *testing.T) {
		p := newTestPool(t, small, 2)
		a, other := newTestTable(t, p, 8), newTestTable(t, p, 8)
		appendStored(t, a, 1, 2, 3, 4)
		a.Commit()
		appendStored(t, other, 5, 6, 7, 8)
		if err := a.Truncate(2); err != nil {
			t.Fatal(err)
		}
		appendStored(t, a, 100)
		mustCheck(t, p, a, other)
		if st := p.Stats(); st.Copies != 0 || st.CachedBlocks != 0 || a.Committed() != 0 {
			t.Fatalf("stats %+v, committed %d", st, a.Committed())
		}
		m := newTestTable(t, p, 8)
		if n := m.Match([]int32{1, 2, 3, 4, 9}); n != 0 {
			t.Fatalf("the overwritten block still matches %d tokens", n)
		}
	})
}

func TestMatch(t *testing.T) {
	type op struct {
		prompt    []int32
		maxLen    int // of the matching table; 0: 64
		wantN     int
		keep      bool // the matching table keeps its blocks, appends the rest and commits
		wantDedup uint64
	}
	// Cached: the 10-token prompt 0..9, committed as blocks [0..3] [4..7];
	// [8 9] is partial and not cached.
	cases := []struct {
		name string
		ops  []op
	}{
		{"same prompt", []op{{prompt: seq(0, 10), wantN: 8}}},
		{"longer prompt", []op{{prompt: seq(0, 30), wantN: 8}}},
		{"one full block", []op{{prompt: seq(0, 4), wantN: 4}}},
		{"partial block is not shared", []op{{prompt: seq(0, 7), wantN: 4}}},
		{"differs in the second block", []op{{prompt: append(seq(0, 5), 99, 6, 7, 8), wantN: 4}}},
		{"differs in the first token", []op{{prompt: append([]int32{99}, seq(1, 9)...), wantN: 0}}},
		{"same block after another first block", []op{{prompt: append([]int32{99, 1, 2, 3}, seq(4, 6)...), wantN: 0}}},
		{"limited by MaxLen", []op{{prompt: seq(0, 10), maxLen: 7, wantN: 4}}},
		{"empty prompt", []op{{prompt: nil, wantN: 0}}},
		{"extending the chain", []op{
			{prompt: seq(0, 13), wantN: 8, keep: true},
			{prompt: seq(0, 16), wantN: 12},
		}},
		{"a second writer of the same blocks shares the cached ones", []op{
			{prompt: append([]int32{99}, seq(1, 9)...), wantN: 0, keep: true},
			{prompt: append([]int32{99}, seq(1, 9)...), wantN: 8, keep: true, wantDedup: 0},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newTestPool(t, small, 16)
			first := newTestTable(t, p, 64)
			appendStored(t, first, seq(0, 10)...)
			first.Commit()
			if first.Committed() != 8 {
				t.Fatalf("Committed() = %d, want 8", first.Committed())
			}
			tables := []*BlockTable{first}
			var hits, misses uint64
			for _, o := range c.ops {
				maxLen := o.maxLen
				if maxLen == 0 {
					maxLen = 64
				}
				m, n, err := p.Match(o.prompt, maxLen)
				if err != nil {
					t.Fatal(err)
				}
				hits, misses = hits+uint64(n), misses+uint64(len(o.prompt)-n)
				if n != o.wantN || m.Len() != n || m.Committed() != n || !slices.Equal(m.Tokens(), o.prompt[:n]) {
					t.Fatalf("Match(%v) = %d tokens (table len %d, committed %d), want %d", o.prompt, n, m.Len(), m.Committed(), o.wantN)
				}
				for i, b := range m.Blocks() {
					if i < len(first.Blocks()) && first.Committed() > i*4 && slices.Equal(o.prompt[:(i+1)*4], first.Tokens()[:min((i+1)*4, first.Len())]) && b != first.Blocks()[i] {
						t.Fatalf("matched block %d is %d, not the cached %d", i, b, first.Blocks()[i])
					}
				}
				tables = append(tables, m)
				if o.keep {
					appendStored(t, m, o.prompt[n:]...)
					m.Commit()
				}
				mustCheck(t, p, tables...)
				if d := p.Stats().Dedups; d != o.wantDedup {
					t.Fatalf("%d dedups, want %d", d, o.wantDedup)
				}
			}
			if st := p.Stats(); st.HitTokens != hits || st.MissTokens != misses {
				t.Fatalf("hits %d, misses %d; want %d, %d", st.HitTokens, st.MissTokens, hits, misses)
			}
			// With every table gone the committed blocks stay cached and the
			// first prompt still matches.
			for _, tab := range tables {
				tab.Release()
			}
			mustCheck(t, p)
			m, n, _ := p.Match(seq(0, 10), 64)
			if n != 8 {
				t.Fatalf("after release, Match = %d, want 8", n)
			}
			mustCheck(t, p, m)
		})
	}
}

// TestCommitDedups has two tables compute the same prompt side by side: the
// second to commit shares the first one's blocks and frees its own.
func TestCommitDedups(t *testing.T) {
	p := newTestPool(t, small, 16)
	a, b := newTestTable(t, p, 32), newTestTable(t, p, 32)
	appendStored(t, a, seq(0, 9)...)
	appendStored(t, b, seq(0, 9)...)
	if st := p.Stats(); st.UsedBlocks != 6 {
		t.Fatalf("%d used blocks, want 6", st.UsedBlocks)
	}
	a.Commit()
	b.Commit()
	if !slices.Equal(a.Blocks()[:2], b.Blocks()[:2]) || a.Blocks()[2] == b.Blocks()[2] {
		t.Fatalf("blocks %v and %v: want the two full ones shared, the partial ones not", a.Blocks(), b.Blocks())
	}
	if st := p.Stats(); st.UsedBlocks != 4 || st.Dedups != 2 || st.SharedBlocks != 2 || st.FreeBlocks != 12 {
		t.Fatalf("stats %+v", st)
	}
	mustCheck(t, p, a, b)
	// Both write on; their blocks diverge without touching the shared ones.
	appendStored(t, a, 1, 1, 1, 1)
	appendStored(t, b, 2, 2, 2)
	a.Commit()
	b.Commit()
	mustCheck(t, p, a, b)
}

// TestLRUEviction fills the cache with released prompts and checks which
// blocks the pool evicts: free blocks go before cached ones, cached ones
// least recently used first, and within one released table the last block
// first.
func TestLRUEviction(t *testing.T) {
	p := newTestPool(t, small, 8)
	prompts := [][]int32{seq(0, 8), seq(100, 8), seq(200, 8)} // two blocks each
	for _, pr := range prompts {
		tab := newTestTable(t, p, 32)
		appendStored(t, tab, pr...)
		tab.Commit()
		tab.Release()
	}
	// Touch prompt 0: it becomes the most recently used.
	m, n, _ := p.Match(prompts[0], 32)
	if n != 8 {
		t.Fatalf("Match = %d", n)
	}
	m.Release()
	if st := p.Stats(); st.CachedBlocks != 6 || st.FreeBlocks != 2 {
		t.Fatalf("stats %+v", st)
	}
	// The order of eviction is now: prompt 1's second block, its first,
	// prompt 2's second, its first, prompt 0's second, its first.
	// cachedLen walks the index as Match does, without taking the blocks
	// (which would change the order under test).
	cachedLen := func(pr []int32) int {
		var parentHash, parentID uint64
		n := 0
		for ; n+4 <= len(pr); n += 4 {
			h := p.hash(parentHash, pr[n:n+4])
			b := p.lookup(h, parentID, n == 0, pr[n:n+4])
			if b < 0 {
				break
			}
			parentHash, parentID = h, p.meta[b].id
		}
		return n
	}
	steps := []struct {
		name string
		take int   // tokens a fresh table appends
		want []int // cached tokens of prompts 0, 1, 2 afterwards
	}{
		{"free blocks first", 8, []int{8, 8, 8}},
		{"least recently used, last block first", 4, []int{8, 4, 8}},
		{"rest of prompt 1", 4, []int{8, 0, 8}},
		{"then prompt 2", 8, []int{8, 0, 0}},
		{"the most recent last", 4, []int{4, 0, 0}},
	}
	var hold []*BlockTable
	evictions := uint64(0)
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			tab := newTestTable(t, p, 32)
			appendStored(t, tab, seq(1000+len(hold)*10, s.take)...)
			hold = append(hold, tab)
			var got []int
			for _, pr := range prompts {
				got = append(got, cachedLen(pr))
			}
			if !slices.Equal(got, s.want) {
				t.Fatalf("cached tokens %v, want %v", got, s.want)
			}
			mustCheck(t, p, hold...)
		})
		evictions = p.Stats().Evictions
	}
	if evictions != 5 {
		t.Fatalf("%d evictions, want 5", evictions)
	}
}

// TestHashCollision runs the same prompts under hash functions that
// collide: every lookup must still find only blocks with the right tokens
// after the right parent.
func TestHashCollision(t *testing.T) {
	hashes := []struct {
		name string
		hash func(parent uint64, tokens []int32) uint64
	}{
		{"constant", func(uint64, []int32) uint64 { return 42 }},
		{"parent only", func(parent uint64, _ []int32) uint64 { return parent + 1 }},
		{"tokens only", func(_ uint64, tokens []int32) uint64 { return uint64(tokens[0]) }},
		{"sum of tokens", func(parent uint64, tokens []int32) uint64 {
			s := parent
			for _, x := range tokens {
				s += uint64(x)
			}
			return s
		}},
	}
	// Prompts whose blocks are equal after different parents, and
	// different with the same token sums.
	prompts := [][]int32{
		{1, 2, 3, 4, 5, 6, 7, 8},
		{2, 1, 3, 4, 5, 6, 7, 8},
		{1, 2, 3, 4, 8, 7, 6, 5},
		{5, 6, 7, 8, 1, 2, 3, 4},
		{1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4},
	}
	for _, h := range hashes {
		t.Run(h.name, func(t *testing.T) {
			p := newTestPool(t, small, 32)
			p.hash = h.hash
			var tables []*BlockTable
			for i, pr := range prompts {
				// Each prompt matches what the earlier ones cached and
				// computes the rest.
				m, n, err := p.Match(pr, 32)
				if err != nil {
					t.Fatal(err)
				}
				want := []int{0, 0, 4, 0, 8}[i]
				if n != want {
					t.Fatalf("prompt %v matched %d tokens, want %d", pr, n, want)
				}
				appendStored(t, m, pr[n:]...)
				m.Commit()
				tables = append(tables, m)
				mustCheck(t, p, tables...)
			}
			for _, tab := range tables {
				tab.Release()
			}
			for _, pr := range prompts {
				m, n, _ := p.Match(append(slices.Clone(pr), 9, 9, 9, 9), 32)
				if n != len(pr) {
					t.Fatalf("prompt %v matched %d tokens after release, want %d", pr, n, len(pr))
				}
				if err := checkData(m); err != nil {
					t.Fatal(err)
				}
				m.Release()
			}
			mustCheck(t, p)
		})
	}
}

// TestPoolFull exhausts the pool: Append fails with the numbers and changes
// nothing, and works again once blocks are released.
func TestPoolFull(t *testing.T) {
	p := newTestPool(t, small, 4)
	a, b := newTestTable(t, p, 16), newTestTable(t, p, 16)
	appendStored(t, a, seq(0, 10)...) // 3 blocks
	c := a.Fork()
	steps := []struct {
		name    string
		tab     *BlockTable
		tokens  []int32
		wantErr error
		wantMsg string
	}{
		{"b takes the last block", b, seq(50, 4), nil, ""},
		{"b needs a fifth", b, []int32{1}, ErrPoolFull, "1 blocks needed, 0 free and 0 cached (evictable) of 4, 4 in use"},
		{"a must copy its shared last block", a, []int32{1}, ErrPoolFull, "1 blocks needed"},
		{"past MaxLen", a, seq(0, 7), ErrTableFull, "7 tokens after 10 of 16"},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			before, blocks := s.tab.Len(), slices.Clone(s.tab.Blocks())
			_, err := s.tab.Append(s.tokens)
			if s.wantErr == nil {
				if err != nil {
					t.Fatal(err)
				}
				store(s.tab, before, s.tab.Len())
			} else {
				if !errors.Is(err, s.wantErr) || !strings.Contains(err.Error(), s.wantMsg) {
					t.Fatalf("err = %v, want %v with %q", err, s.wantErr, s.wantMsg)
				}
				if s.tab.Len() != before || !slices.Equal(s.tab.Blocks(), blocks) {
					t.Fatal("a failed Append changed the table")
				}
			}
			mustCheck(t, p, a, b, c)
		})
	}
	// Recovery: c lets go, so a's last block is its own again.
	c.Release()
	appendStored(t, a, 1)
	b.Release()
	appendStored(t, a, seq(60, 5)...)
	mustCheck(t, p, a)
	if st := p.Stats(); st.UsedBlocks != 4 || st.Copies != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestStatsBytes checks the byte accounting after each step against counts
// made by hand.
func TestStatsBytes(t *testing.T) {
	o := PoolOptions{Layers: 3, KVHeads: 2, HeadDim: 8, HeadDimV: 4, BlockTokens: 4, Type: F16}
	const bb = 3 * 4 * 2 * (8 + 4) * 2 // bytes of one block
	p := newTestPool(t, o, 10)
	a := newTestTable(t, p, 40)
	var b *BlockTable
	steps := []struct {
		name                     string
		do                       func()
		used, cached, free, shrd int
		aBytes                   int64
	}{
		{"empty", func() {}, 0, 0, 10, 0, 0},
		{"a appends 9", func() { appendStored(t, a, seq(0, 9)...) }, 3, 0, 7, 0, 3 * bb},
		{"a commits", func() { a.Commit() }, 3, 0, 7, 0, 3 * bb},
		{"fork b", func() { b = a.Fork() }, 3, 0, 7, 3, 3 * bb},
		{"b appends 4", func() { appendStored(t, b, seq(20, 4)...) }, 5, 0, 5, 2, 3 * bb},
		{"release a", func() { a.Release() }, 4, 0, 6, 0, 0},
		{"release b", func() { b.Release() }, 0, 2, 8, 0, 0},
		{"a matches", func() { a.Match(seq(0, 9)) }, 2, 0, 8, 0, 2 * bb},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			s.do()
			st := p.Stats()
			if st.UsedBytes != int64(s.used)*bb || st.CachedBytes != int64(s.cached)*bb || st.FreeBytes != int64(s.free)*bb ||
				st.TotalBytes != 10*bb || st.SharedBlocks != s.shrd || st.BlockBytes != bb || a.Bytes() != s.aBytes {
				t.Fatalf("stats %+v, table a %d bytes; want used %d, cached %d, free %d blocks, %d shared, a %d bytes",
					st, a.Bytes(), s.used, s.cached, s.free, s.shrd, s.aBytes)
			}
		})
	}
}

// TestAppendAllocs checks that the decode path, Append of one token and
// Commit, allocates nothing: within a block, with a new block from the free
// list, and with a new block evicted from the cache.
func TestAppendAllocs(t *testing.T) {
	tok := []int32{7}
	t.Run("within a block", func(t *testing.T) {
		p := newTestPool(t, small, 8)
		tab := newTestTable(t, p, 32)
		appendStored(t, tab, 1, 2)
		allocs := testing.AllocsPerRun(100, func() {
			if _, err := tab.Append(tok); err != nil {
				t.Fatal(err)
			}
			tab.Commit()
			_ = tab.Truncate(2)
		})
		if allocs != 0 {
			t.Fatalf("%g allocations per token", allocs)
		}
	})
	t.Run("new block from the free list", func(t *testing.T) {
		p := newTestPool(t, small, 8)
		tab := newTestTable(t, p, 32)
		appendStored(t, tab, 1, 2, 3, 4)
		tab.Commit()
		allocs := testing.AllocsPerRun(100, func() {
			if _, err := tab.Append(tok); err != nil {
				t.Fatal(err)
			}
			tab.Commit()
			_ = tab.Truncate(4)
		})
		if allocs != 0 {
			t.Fatalf("%g allocations per token", allocs)
		}
	})
	t.Run("new block evicted from the cache", func(t *testing.T) {
		const blocks = 40
		p := newTestPool(t, small, blocks)
		filler := newTestTable(t, p, blocks*4)
		appendStored(t, filler, seq(0, (blocks-1)*4)...)
		filler.Commit()
		filler.Release()
		tab := newTestTable(t, p, blocks*4)
		appendStored(t, tab, 1000, 1001, 1002, 1003) // takes the one free block
		if p.freeN != 0 {
			t.Fatalf("%d free blocks", p.freeN)
		}
		// Each run fills a block with single decode tokens, the first of
		// which needs a block from the cache.
		allocs := testing.AllocsPerRun(blocks-3, func() {
			for range 4 {
				if _, err := tab.Append(tok); err != nil {
					t.Fatal(err)
				}
				tab.Commit()
			}
		})
		if allocs != 0 {
			t.Fatalf("%g allocations per block", allocs)
		}
		if p.Stats().Evictions != blocks-2 {
			t.Fatalf("%d evictions", p.Stats().Evictions)
		}
	})
}

func TestTruncateAndNewTableErrors(t *testing.T) {
	p := newTestPool(t, small, 4)
	if _, err := p.NewTable(0); err == nil {
		t.Fatal("NewTable(0) succeeded")
	}
	if _, err := p.NewTable(17); err == nil {
		t.Fatal("a table larger than the pool was made")
	}
	if _, _, err := p.Match(nil, -1); err == nil {
		t.Fatal("Match with a negative MaxLen succeeded")
	}
	tab := newTestTable(t, p, 16)
	appendStored(t, tab, 1, 2, 3)
	for _, n := range []int{-1, 4} {
		if err := tab.Truncate(n); err == nil {
			t.Fatalf("Truncate(%d) of 3 tokens succeeded", n)
		}
	}
	if pos, err := tab.Append(nil); err != nil || pos != 3 {
		t.Fatalf("Append(nil) = %d, %v", pos, err)
	}
	mustCheck(t, p, tab)
}

// TestStaleTailZeroed truncates into a shared block, lets the other holder
// go, and appends: the values past Len the truncation left must read as
// zeros again once the table writes the block alone.
func TestStaleTailZeroed(t *testing.T) {
	for _, other := range []string{"releases", "copies away"} {
		t.Run(other, func(t *testing.T) {
			p := newTestPool(t, small, 8)
			a := newTestTable(t, p, 16)
			appendStored(t, a, 1, 2, 3, 4, 5, 6, 7)
			b := a.Fork()
			if err := a.Truncate(5); err != nil {
				t.Fatal(err)
			}
			if other == "releases" {
				b.Release()
			} else {
				appendStored(t, b, 9)
			}
			last := a.Blocks()[1]
			if !p.writable(last) || valuesZeroFrom(p, last, 1) {
				t.Fatal("the setup did not leave a block of a's own with old keys past Len")
			}
			appendStored(t, a, 8)
			if a.Blocks()[1] != last || !valuesZeroFrom(p, last, 2) {
				t.Fatal("values past Len are not zero after Append")
			}
			mustCheck(t, p, a, b)
		})
	}
}

// TestNamespaces checks that blocks committed in one namespace (one LoRA
// adapter) are never matched in another, even when the namespace equals a
// block id or the hash collides.
func TestNamespaces(t *testing.T) {
	for _, colliding := range []bool{false, true} {
		t.Run(map[bool]string{false: "maphash", true: "colliding"}[colliding], func(t *testing.T) {
			p := newTestPool(t, small, 16)
			if colliding {
				p.hash = func(uint64, []int32) uint64 { return 0 }
			}
			a := newTestTable(t, p, 16)
			appendStored(t, a, seq(0, 8)...)
			a.Commit()
			// Namespace 1 is also the id of a's first block: the second
			// block [4 5 6 7] after it must not match as a first block.
			if id := p.meta[a.Blocks()[0]].id; id != 1 {
				t.Fatalf("first id %d", id)
			}
			cases := []struct {
				ns     uint64
				prompt []int32
				want   int
			}{
				{0, seq(0, 8), 8},
				{1, seq(0, 8), 0},
				{1, seq(4, 4), 0},
				{7, seq(0, 8), 0},
			}
			tables := []*BlockTable{a}
			for _, c := range cases {
				m := newTestTable(t, p, 16)
				m.SetNamespace(c.ns)
				if n := m.Match(c.prompt); n != c.want {
					t.Fatalf("namespace %d: Match(%v) = %d, want %d", c.ns, c.prompt, n, c.want)
				}
				tables = append(tables, m)
			}
			// Namespace 7 computes the same tokens; it matches its own blocks
			// only, and a fork keeps the namespace.
			b := newTestTable(t, p, 16)
			b.SetNamespace(7)
			appendStored(t, b, seq(0, 8)...)
			b.Commit()
			f := b.Fork()
			appendStored(t, f, 1, 2, 3, 4)
			f.Commit()
			tables = append(tables, b, f)
			mustCheck(t, p, tables...)
			if st := p.Stats(); st.Dedups != 0 || st.UsedBlocks != 5 {
				t.Fatalf("stats %+v: want a's and b's 2 blocks each and f's one, no dedup", st)
			}
			m := newTestTable(t, p, 16)
			m.SetNamespace(7)
			if n := m.Match(seq(0, 12)); n != 8 || m.Blocks()[0] != b.Blocks()[0] {
				t.Fatalf("namespace 7 matched %d tokens in blocks %v, want b's %v", n, m.Blocks(), b.Blocks())
			}
			mustCheck(t, p, append(tables, m)...)
		})
	}
}

// TestCommitAfterEvictedParent builds the one case in which a table commits
// a block already registered after another parent: its fork swapped the
// parent for an equal cached block, which was evicted since. The block is
// entered again after this table's chain, so that Match finds it.
func TestCommitAfterEvictedParent(t *testing.T) {
	p := newTestPool(t, small, 8)
	z := newTestTable(t, p, 16)
	appendStored(t, z, 1, 2, 3, 4)
	z.Commit()
	z.Release() // [1 2 3 4] is cached
	x := newTestTable(t, p, 16)
	appendStored(t, x, seq(1, 8)...) // computed again, not matched
	y := x.Fork()
	x.Commit() // x swaps its first block for the cached one, registers its second after it
	if x.Blocks()[0] == y.Blocks()[0] || x.Blocks()[1] != y.Blocks()[1] {
		t.Fatalf("blocks %v and %v", x.Blocks(), y.Blocks())
	}
	x.Release()
	filler := newTestTable(t, p, 32)
	appendStored(t, filler, seq(100, 24)...) // 6 blocks: 5 free and the cached first block
	if p.Stats().Evictions != 1 {
		t.Fatalf("stats %+v", p.Stats())
	}
	y.Commit()
	if y.Committed() != 8 {
		t.Fatalf("y committed %d tokens, want 8", y.Committed())
	}
	mustCheck(t, p, y, filler)
	y.Release()
	m, n, _ := p.Match(seq(1, 8), 16)
	if n != 8 {
		t.Fatalf("Match = %d, want 8", n)
	}
	mustCheck(t, p, m, filler)
}
