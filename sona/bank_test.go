package sona

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// randomText is a text of n words from a vocabulary of v words, so that
// texts share some words and not others.
func randomText(rng *rand.Rand, n, v int) string {
	b := []byte{}
	for i := range n {
		if i > 0 {
			b = append(b, ' ')
		}
		w := rng.IntN(v)
		b = append(b, byte('a'+w%26), byte('a'+w/26%26), byte('a'+w/676%26))
	}
	return string(b)
}

// bruteNearest is the k most similar slots by exact cosine, best first.
func bruteNearest(b *bank, q []term, k int, minSim float32) []neighbour {
	var all []neighbour
	for i := range b.used {
		if sim := cosine(q, b.slots[i].f.text); sim >= minSim && sim > 0 {
			all = append(all, neighbour{slot: i, sim: sim})
		}
	}
	slices.SortStableFunc(all, func(a, b neighbour) int {
		switch {
		case a.sim > b.sim:
			return -1
		case a.sim < b.sim:
			return 1
		}
		return 0
	})
	return all[:min(k, len(all))]
}

func TestBankNearestIsExactWhileListsAreShort(t *testing.T) {
	x := newExtractor(14)
	rng := rand.New(rand.NewPCG(1, 2))
	b := newBank(200, x.buckets())
	for i := range 200 {
		b.add(trajectory{id: fmt.Sprint(i), f: x.extract(Request{Text: randomText(rng, 8, 400)})})
	}
	s := b.newScratch()
	for i := range 50 {
		q := x.extract(Request{Text: randomText(rng, 6, 400)})
		got := slices.Clone(b.nearest(q.text, 10, 0.05, s))
		want := bruteNearest(b, q.text, 10, 0.05)
		if len(got) != len(want) {
			t.Fatalf("query %d: %d neighbours, want %d", i, len(got), len(want))
		}
		for j := range got {
			// Ties may come in either order; the similarities must match.
			if math.Abs(float64(got[j].sim-want[j].sim)) > 1e-5 {
				t.Fatalf("query %d, neighbour %d: similarity %g, want %g", i, j, got[j].sim, want[j].sim)
			}
		}
	}
}

func TestBankRingOverwritesTheOldest(t *testing.T) {
	x := newExtractor(10)
	b := newBank(4, x.buckets())
	texts := []string{"alpha beta", "gamma delta", "epsilon zeta", "eta theta", "iota kappa", "lambda mu"}
	for i, text := range texts {
		b.add(trajectory{id: fmt.Sprint("t", i), f: x.extract(Request{Text: text})})
	}
	s := b.newScratch()
	for i, text := range texts {
		_, found := b.find(fmt.Sprint("t", i))
		nb := b.nearest(x.extract(Request{Text: text}).text, 1, 0.99, s)
		kept := i >= 2
		if found != kept || (len(nb) == 1) != kept {
			t.Fatalf("trajectory %d: found %v, neighbour %v; want both %v", i, found, nb, kept)
		}
	}
	if b.stale != 0 && b.stale > b.live {
		t.Fatalf("%d stale postings against %d live: the index should have been rebuilt", b.stale, b.live)
	}
	// Many more overwrites keep the index bounded.
	for i := range 1000 {
		b.add(trajectory{id: fmt.Sprint("u", i), f: x.extract(Request{Text: texts[i%len(texts)]})})
	}
	total := 0
	for _, ps := range b.postings {
		total += len(ps)
	}
	if total > 2*b.live+16 {
		t.Fatalf("%d postings for %d live ones", total, b.live)
	}
}
