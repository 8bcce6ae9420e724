package kvcache

import (
	"slices"
	"testing"
)

// TestReuse: a table keeps its own prefix or takes the index's chain,
// whichever is longer, cut at limit; what it then appends is written into
// blocks of its own, and the cached blocks keep their data.
func TestReuse(t *testing.T) {
	// Cached by another table: 0..9 as blocks [0..3] [4..7] committed.
	cases := []struct {
		name   string
		own    []int32 // the reusing table's tokens before
		prompt []int32
		limit  int
		want   int
	}{
		{"index only", nil, seq(0, 12), 11, 8},
		{"index cut at limit", nil, seq(0, 8), 7, 7},
		{"own longer than index", seq(0, 11), seq(0, 20), 19, 11},
		{"index longer than own", seq(0, 3), seq(0, 12), 11, 8},
		{"own diverges", append(seq(0, 6), 50, 51), seq(0, 12), 11, 8},
		{"nothing cached", []int32{70, 71}, []int32{80, 81, 82}, 2, 0},
		{"limit 0", seq(0, 11), seq(0, 11), 0, 0},
		{"own equal to prompt, limit len-1", seq(0, 10), seq(0, 10), 9, 9},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newTestPool(t, small, 24)
			first := newTestTable(t, p, 64)
			appendStored(t, first, seq(0, 10)...)
			first.Commit()
			tab := newTestTable(t, p, 64)
			if c.own != nil {
				appendStored(t, tab, c.own...)
			}
			got := tab.Reuse(c.prompt, c.limit)
			if got != c.want || tab.Len() != got || !slices.Equal(tab.Tokens(), c.prompt[:got]) {
				t.Fatalf("Reuse = %d (table %v), want %d", got, tab.Tokens(), c.want)
			}
			mustCheck(t, p, first, tab)
			appendStored(t, tab, c.prompt[got:]...)
			tab.Commit()
			mustCheck(t, p, first, tab)
			if err := checkData(first); err != nil {
				t.Fatalf("the cached table changed: %v", err)
			}
		})
	}
}

// TestNeed: the blocks Need reports are what Append takes (for an unshared
// tail) or at least that (the optional copy of a cached tail), and Need
// counts the copy of a shared tail.
func TestNeed(t *testing.T) {
	p := newTestPool(t, small, 32)
	a := newTestTable(t, p, 64)
	if n := a.Need(0); n != 0 {
		t.Fatalf("Need(0) = %d", n)
	}
	for _, n := range []int{1, 3, 4, 5, 9} {
		before := p.Available()
		need := a.Need(n)
		appendStored(t, a, seq(100*n, n)...)
		if took := before - p.Available(); took != need {
			t.Fatalf("append of %d took %d blocks, Need said %d", n, took, need)
		}
	}
	b := a.Fork() // the last block, partial, is now shared
	if need := b.Need(1); need != 1 {
		t.Fatalf("Need(1) of a fork with a shared partial tail = %d, want 1 (the copy)", need)
	}
	before := p.Available()
	appendStored(t, b, 7)
	if took := before - p.Available(); took != 1 {
		t.Fatalf("the copy-on-write append took %d blocks", took)
	}
	mustCheck(t, p, a, b)
}

// TestShare: a table sharing another's blocks reads the same data, writes
// into copies, and gives its references back on Release.
func TestShare(t *testing.T) {
	p := newTestPool(t, small, 32)
	a := newTestTable(t, p, 64)
	appendStored(t, a, seq(0, 10)...)
	a.Commit()
	b := newTestTable(t, p, 64)
	appendStored(t, b, 90, 91)
	b.Share(a)
	if !slices.Equal(b.Tokens(), a.Tokens()) || !slices.Equal(b.Blocks(), a.Blocks()) || b.Committed() != a.Committed() {
		t.Fatalf("shared table holds %v in %v, want %v in %v", b.Tokens(), b.Blocks(), a.Tokens(), a.Blocks())
	}
	mustCheck(t, p, a, b)
	appendStored(t, b, 11, 12)
	appendStored(t, a, 13)
	mustCheck(t, p, a, b)
	b.Release()
	mustCheck(t, p, a)
	t.Run("panics on a table too short", func(t *testing.T) {
		defer func() {
			if recover() == nil {
				t.Fatal("no panic")
			}
		}()
		newTestTable(t, p, 4).Share(a)
	})
}
