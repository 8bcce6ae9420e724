package sona

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// trainedRouter is a router that has learnt the second trace's train split
// and replayed half its eval split, as a server would be after a while.
func trainedRouter(tb testing.TB, o Options) (*Router, []TraceQuery, []Arm) {
	tb.Helper()
	g := otherTrace()
	train, eval := g.train, g.eval
	r, err := New(o)
	if err != nil {
		tb.Fatal(err)
	}
	models := Models(train)
	for _, q := range train {
		outs := map[string]Outcome{}
		for _, m := range models {
			outs[m] = Outcome{Quality: q.Quality[m], Rated: true, Cost: q.Cost[m]}
		}
		if err := r.Learn(Request{Text: q.Prompt}, outs); err != nil {
			tb.Fatal(err)
		}
	}
	arms := make([]Arm, len(models))
	for i, m := range models {
		arms[i] = Arm{Name: m}
	}
	for i, q := range eval[:len(eval)/2] {
		id := fmt.Sprint("warm-", i)
		d, err := r.Decide(Request{ID: id, Text: q.Prompt}, arms)
		if err != nil {
			tb.Fatal(err)
		}
		r.Observe(id, Outcome{Quality: q.Quality[d.Arm], Rated: true, Cost: q.Cost[d.Arm]})
	}
	return r, eval[len(eval)/2:], arms
}

// BenchmarkDecide measures one routing decision of a router that holds
// 3,500 trajectories over five arms.
func BenchmarkDecide(b *testing.B) {
	r, eval, arms := trainedRouter(b, Options{CostWeight: 0.2, Seed: 1})
	rng := rand.New(rand.NewPCG(1, 1))
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		q := eval[rng.IntN(len(eval))]
		if _, err := r.Decide(Request{Text: q.Prompt}, arms); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	// On a shared machine the wall time per decision includes the time
	// others held the CPU; the process's CPU time does not.
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}
