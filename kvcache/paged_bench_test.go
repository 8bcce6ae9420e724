package kvcache

import (
	"fmt"
	"testing"
)

// benchOptions are a small real model's cache: stories-sized layers, but
// GQA heads of a 7B model's width.
var benchOptions = PoolOptions{Layers: 4, KVHeads: 4, HeadDim: 64, Type: F16}

// warm touches every block once, so that the benchmarks do not time the
// page faults of the pool's first use.
func warm(b *testing.B, p *Pool) {
	tab := newTestTable(b, p, p.Blocks()*p.BlockTokens())
	if _, err := tab.Append(make([]int32, tab.MaxLen())); err != nil {
		b.Fatal(err)
	}
	tab.Release()
}

// BenchmarkAppendDecode appends single decode tokens and commits after
// each, as the engine does per step; a new block every BlockTokens tokens.
// Keys and values are not written: this is the bookkeeping alone.
func BenchmarkAppendDecode(b *testing.B) {
	for _, bt := range []int{16, 32} {
		b.Run(fmt.Sprintf("block=%d", bt), func(b *testing.B) {
			o := benchOptions
			o.BlockTokens = bt
			p := newTestPool(b, o, 4096/bt+1)
			warm(b, p)
			tab := newTestTable(b, p, 4096)
			tok := []int32{1}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if tab.Len() == tab.MaxLen() {
					tab.Release()
				}
				tok[0] = int32(i & 511)
				if _, err := tab.Append(tok); err != nil {
					b.Fatal(err)
				}
				tab.Commit()
			}
		})
	}
}

// BenchmarkAppendStoreDecode adds writing the token's keys and values in
// every layer.
func BenchmarkAppendStoreDecode(b *testing.B) {
	p := newTestPool(b, benchOptions, 4096/16+1)
	warm(b, p)
	tab := newTestTable(b, p, 4096)
	k := make([]float32, benchOptions.KVHeads*benchOptions.HeadDim)
	v := make([]float32, len(k))
	for i := range k {
		k[i], v[i] = float32(i)/100, -float32(i)/100
	}
	tok := []int32{1}
	b.ReportAllocs()
	for b.Loop() {
		if tab.Len() == tab.MaxLen() {
			tab.Release()
		}
		pos, err := tab.Append(tok)
		if err != nil {
			b.Fatal(err)
		}
		for l := range benchOptions.Layers {
			tab.Store(l, pos, k, v)
		}
		tab.Commit()
	}
}

// BenchmarkMatch matches a cached prompt into a reused table: the cost of a
// prefix hit before prefill.
func BenchmarkMatch(b *testing.B) {
	for _, n := range []int{256, 4096} {
		b.Run(fmt.Sprintf("tokens=%d", n), func(b *testing.B) {
			p := newTestPool(b, benchOptions, n/16+1)
			prompt := seq(0, n)
			src := newTestTable(b, p, n)
			if _, err := src.Append(prompt); err != nil {
				b.Fatal(err)
			}
			src.Commit()
			src.Release()
			tab := newTestTable(b, p, n)
			b.ReportAllocs()
			for b.Loop() {
				if got := tab.Match(prompt); got != n {
					b.Fatalf("matched %d of %d", got, n)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/token")
		})
	}
}
