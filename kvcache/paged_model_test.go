package kvcache

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestPagedRandomOps runs random sequences of table operations on a small
// pool and after each checks the pool against a simple model: every table's
// keys and values equal kvOf of its own tokens (so sharing, copy-on-write,
// matching and eviction never hand a table wrong data), reference counts
// equal the number of holders, the lists, counters and index agree, a
// failed Append changes nothing, and Match finds at least the blocks any
// live table has committed for the prompt.
func TestPagedRandomOps(t *testing.T) {
	hashes := []struct {
		name string
		hash func(parent uint64, tokens []int32) uint64
	}{
		{"maphash", nil},
		{"colliding", func(parent uint64, tokens []int32) uint64 { return (parent + uint64(tokens[0])) % 3 }},
	}
	const ops = 4000 // 0.1 s each
	for hi, hc := range hashes {
		for _, prec := range []Precision{F32, F16, Q8, Q4, Tiered} {
			t.Run(fmt.Sprintf("%s/%s", hc.name, prec), func(t *testing.T) {
				o := small
				o.Type = prec
				// Few exact and warm slots, so that forms are taken back
				// under pressure, and one hot and one warm block.
				o.HotTokens, o.WarmTokens, o.HotSlots, o.WarmSlots = 4, 4, 6, 3
				p := newTestPool(t, o, 16)
				if hc.hash != nil {
					p.hash = hc.hash
				}
				r := rand.New(rand.NewPCG(uint64(hi), uint64(prec)))
				runRandomOps(t, p, r, ops)
			})
		}
	}
}

func runRandomOps(t *testing.T, p *Pool, r *rand.Rand, ops int) {
	const maxTables = 6
	bt := p.BlockTokens()
	var tables []*BlockTable
	var counts [10]int
	poolFull := 0
	appendCounted := func(tab *BlockTable, tokens []int32) {
		if errors.Is(appendChecked(t, p, tab, tokens), ErrPoolFull) {
			poolFull++
		}
	}
	// Tokens from a small alphabet, so that prefixes repeat often.
	randTokens := func(n int) []int32 {
		s := make([]int32, n)
		for i := range s {
			s[i] = int32(r.IntN(3))
		}
		return s
	}
	// prompt is a new prompt: often a live table's prefix plus some more.
	prompt := func() []int32 {
		var pr []int32
		if len(tables) > 0 && r.IntN(4) != 0 {
			src := tables[r.IntN(len(tables))].Tokens()
			pr = slices.Clone(src[:r.IntN(len(src)+1)])
		}
		return append(pr, randTokens(r.IntN(2*bt+2))...)
	}
	pick := func() *BlockTable { return tables[r.IntN(len(tables))] }
	for step := range ops {
		op := r.IntN(10)
		if len(tables) == 0 {
			op = 0
		}
		counts[op]++
		var desc string
		switch op {
		case 0: // a new table, usually from Match
			if len(tables) == maxTables {
				i := r.IntN(len(tables))
				tables[i].Release()
				tables = slices.Delete(tables, i, i+1)
			}
			tab, err := p.NewTable(1 + r.IntN(p.Blocks()*bt/2))
			if err != nil {
				t.Fatal(err)
			}
			// Two namespaces: a block must never cross from one to the other.
			tab.SetNamespace(uint64(r.IntN(2)))
			pr := prompt()
			desc = fmt.Sprintf("new table of %d in namespace %d for a prompt of %d", tab.MaxLen(), tab.Namespace(), len(pr))
			if r.IntN(4) != 0 {
				// Every block a live table committed for this prompt is
				// held, so it cannot have been evicted: Match finds at
				// least that much.
				least := 0
				for _, u := range tables {
					if u.Namespace() != tab.Namespace() {
						continue
					}
					k := 0
					for k < min(len(pr), u.Len(), tab.MaxLen())/bt && k < u.committed &&
						slices.Equal(pr[k*bt:(k+1)*bt], u.Tokens()[k*bt:(k+1)*bt]) {
						k++
					}
					least = max(least, k*bt)
				}
				n := tab.Match(pr)
				desc += fmt.Sprintf(", matched %d (at least %d)", n, least)
				if n < least || n%bt != 0 || n > len(pr) || tab.Len() != n || !slices.Equal(tab.Tokens(), pr[:n]) {
					t.Fatalf("step %d: %s: wrong match", step, desc)
				}
				pr = pr[n:]
			}
			tables = append(tables, tab)
			if len(pr) > 0 {
				appendCounted(tab, pr[:min(len(pr), tab.MaxLen()-tab.Len())])
			}
		case 1, 2: // append and write, often commit
			tab := pick()
			toks := randTokens(1 + r.IntN(2*bt+1))
			desc = fmt.Sprintf("append %d to a table of %d/%d", len(toks), tab.Len(), tab.MaxLen())
			appendCounted(tab, toks)
			if r.IntN(2) == 0 {
				tab.Commit()
			}
		case 3: // a single decode token
			tab := pick()
			desc = fmt.Sprintf("decode a token in a table of %d", tab.Len())
			appendCounted(tab, randTokens(1))
			tab.Commit()
		case 4:
			tab := pick()
			tab.Commit()
			desc = "commit"
		case 5:
			tab := pick()
			n := r.IntN(tab.Len() + 1)
			desc = fmt.Sprintf("truncate %d to %d", tab.Len(), n)
			if err := tab.Truncate(n); err != nil {
				t.Fatal(err)
			}
		case 6:
			if len(tables) == maxTables {
				continue
			}
			desc = "fork"
			tables = append(tables, pick().Fork())
		case 8: // reuse the cached prefix of a prompt, as the engine does
			tab := pick()
			pr := prompt()
			limit := r.IntN(len(pr) + 1)
			own := 0
			for own < min(tab.Len(), limit) && tab.Tokens()[own] == pr[own] {
				own++
			}
			if p.tier != nil && own%bt != 0 && p.meta[tab.Blocks()[own/bt]].half < 0 {
				// The table's partial block would be rebuilt from a
				// quantized form: Reuse recomputes the block instead.
				own = own / bt * bt
			}
			n := tab.Reuse(pr, limit)
			desc = fmt.Sprintf("reuse %d of a prompt of %d (limit %d, own prefix %d)", n, len(pr), limit, own)
			if n < own || n > limit || tab.Len() != n || !slices.Equal(tab.Tokens(), pr[:n]) {
				t.Fatalf("step %d: %s: wrong reuse", step, desc)
			}
		case 9: // share another table's tokens, as n choices do
			dst, src := pick(), pick()
			if src.Len() > dst.MaxLen() || src == dst {
				continue
			}
			desc = fmt.Sprintf("share %d tokens into a table of %d", src.Len(), dst.Len())
			dst.Share(src)
			if !slices.Equal(dst.Tokens(), src.Tokens()) || !slices.Equal(dst.Blocks(), src.Blocks()) {
				t.Fatalf("step %d: %s: the tables differ", step, desc)
			}
		case 7:
			i := r.IntN(len(tables))
			desc = "release"
			tables[i].Release()
			if r.IntN(2) == 0 {
				tables = slices.Delete(tables, i, i+1)
			}
		}
		if err := checkPool(p, tables); err != nil {
			t.Fatalf("step %d (%s): %v", step, desc, err)
		}
	}
	st := p.Stats()
	t.Logf("ops %v, %d appends found the pool full; stats %+v", counts, poolFull, st)
	// The run must have exercised what it claims to.
	if st.HitTokens == 0 || st.Evictions == 0 || st.Copies == 0 || st.Dedups == 0 || poolFull == 0 {
		t.Fatalf("the random run did not hit, evict, copy, dedup and fill the pool: %+v, %d full", st, poolFull)
	}
}

// appendChecked appends tokens and writes them. The model of when Append
// fails: past MaxLen, or when the new blocks (plus a copy of the last block
// if another table shares it) outnumber the free and cached ones; a block
// the table has alone but the index caches is copied only when there is
// room, so it never makes Append fail. A failed Append changes nothing.
func appendChecked(t *testing.T, p *Pool, tab *BlockTable, tokens []int32) error {
	t.Helper()
	n, blocks := tab.Len(), slices.Clone(tab.Blocks())
	need := (n+len(tokens)+p.bt-1)/p.bt - len(blocks)
	if n%p.bt != 0 {
		// A shared last block is copied; in a tiered pool so is one that is
		// cached or full.
		if m := &p.meta[blocks[len(blocks)-1]]; m.ref > 1 || p.tier != nil && (m.id != 0 || m.sealed) {
			need++
		}
	}
	if got := tab.Need(len(tokens)); got != need {
		t.Fatalf("Need(%d) after %d = %d, want %d", len(tokens), n, got, need)
	}
	var wantErr error
	switch {
	case n+len(tokens) > tab.MaxLen():
		wantErr = ErrTableFull
	case need > p.available() || need > p.HalfAvailable():
		wantErr = ErrPoolFull
	}
	pos, err := tab.Append(tokens)
	if !errors.Is(err, wantErr) || (err == nil) != (wantErr == nil) {
		t.Fatalf("Append of %d after %d (needing %d of %d blocks, %d exact) = %v, want %v", len(tokens), n, need, p.available(), p.HalfAvailable(), err, wantErr)
	}
	if err != nil {
		if tab.Len() != n || !slices.Equal(tab.Blocks(), blocks) {
			t.Fatalf("a failed Append (%v) changed the table", err)
		}
		return err
	}
	store(tab, pos, tab.Len())
	return nil
}
