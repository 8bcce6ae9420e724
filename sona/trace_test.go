package sona

import (
	"strings"
	"testing"

	"github.com/ruvllm/ruvllm/internal/shared"
)

func TestReadTrace(t *testing.T) {
	good := `{"id":"a","prompt":"p","quality":{"x":1,"y":0},"cost":{"x":0.1,"y":0.01}}`
	tests := []struct {
		name, text, err string
		n               int
	}{
		{"two lines and a blank one", good + "\n\n" + good + "\n", "", 2},
		{"fractional quality", `{"prompt":"p","quality":{"x":0.5},"cost":{"x":1}}`, "", 1},
		{"not JSON", "{nope", "line 1", 0},
		{"other models", good + "\n" + `{"prompt":"p","quality":{"x":1,"z":0},"cost":{"x":1,"z":1}}`, "line 2: the models", 0},
		{"a model without a cost", `{"prompt":"p","quality":{"x":1,"y":0},"cost":{"x":1}}`, "has no cost", 0},
		{"a cost without a quality", `{"prompt":"p","quality":{"x":1},"cost":{"x":1,"y":2}}`, "without a quality", 0},
		{"quality above 1", `{"prompt":"p","quality":{"x":2},"cost":{"x":1}}`, "outside [0, 1]", 0},
		{"negative cost", `{"prompt":"p","quality":{"x":1},"cost":{"x":-1}}`, "not a finite cost", 0},
		{"no model", `{"prompt":"p","quality":{},"cost":{}}`, "no model", 0},
		{"empty", "", "no query", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			qs, err := ReadTrace(strings.NewReader(tt.text))
			switch {
			case tt.err == "" && (err != nil || len(qs) != tt.n):
				t.Fatalf("ReadTrace = %d queries, %v; want %d", len(qs), err, tt.n)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Fatalf("ReadTrace error %v, want one with %q", err, tt.err)
			}
		})
	}
}

// objective is mean quality − w × mean cost.
func objective(p Point, w float64) float64 { return p.Quality - w*p.Cost }

// ideal is the router that knows each eval query's hidden kind (task and
// difficulty) and takes, per kind, the model of the best mean quality −
// w × mean cost on the train split: what a router that reads the text
// perfectly could reach.
func ideal(g generated, w float64) Point {
	type sums struct{ q, c map[string]float64 }
	kinds := map[string]*sums{}
	models := Models(g.train)
	for i, q := range g.train {
		k := kinds[g.trainKinds[i]]
		if k == nil {
			k = &sums{q: map[string]float64{}, c: map[string]float64{}}
			kinds[g.trainKinds[i]] = k
		}
		for _, m := range models {
			k.q[m] += q.Quality[m]
			k.c[m] += q.Cost[m]
		}
	}
	var p Point
	for i, q := range g.eval {
		k := kinds[g.evalKinds[i]]
		best := models[0]
		if k != nil {
			for _, m := range models {
				if k.q[m]-w*k.c[m] > k.q[best]-w*k.c[best] {
					best = m
				}
			}
		}
		p.Quality += q.Quality[best]
		p.Cost += q.Cost[best]
	}
	n := float64(len(g.eval))
	return Point{Quality: p.Quality / n, Cost: p.Cost / n}
}

// bestSingle is the single model of the best quality.
func bestSingle(ev Evaluation) Point {
	var best Point
	for _, p := range ev.Single {
		if p.Quality > best.Quality {
			best = p
		}
	}
	return best
}

// TestRouterLearnsOtherTraces replays traces that share nothing with
// style-a but the format (other models, prices, tasks, wording, difficulty
// words, mixes): at every cost weight the router must come close to the
// router that knows each query's kind, and beat every single model at the
// objective it maximises.
func TestRouterLearnsOtherTraces(t *testing.T) {
	for _, tr := range []struct {
		name string
		g    generated
	}{{"second", otherTrace()}, {"third", thirdTrace()}} {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			var scale float64
			for _, q := range tr.g.eval {
				for _, c := range q.Cost {
					scale = max(scale, c)
				}
			}
			for _, k := range []float64{0.02, 0.1, 0.5} {
				// Cost weights that make the dearest answers cost from a
				// fiftieth of a correct answer to half of one.
				w := k / scale * 10
				ev, err := Evaluate(tr.g.train, tr.g.eval, Options{CostWeight: w, Seed: 1})
				if err != nil {
					t.Fatal(err)
				}
				router := Point{Quality: ev.Quality, Cost: ev.Cost}
				id := ideal(tr.g, w)
				singles := 0.0
				for _, p := range ev.Single {
					singles = max(singles, objective(p, w))
				}
				best := bestSingle(ev)
				t.Logf("W=%.4g router %.3f@%.4f (%.1f%% of the best single's quality at %.1f%% of its cost), ideal %.3f@%.4f, objective %.4f, ideal's %.4f, best single's %.4f, explored %.1f%%",
					w, router.Quality, router.Cost, 100*router.Quality/best.Quality, 100*router.Cost/best.Cost, id.Quality, id.Cost,
					objective(router, w), objective(id, w), singles, 100*ev.Explored)
				if objective(router, w) < objective(id, w)-0.03 {
					t.Errorf("W=%g: the router's objective %.4f is more than 0.03 below the ideal's %.4f", w, objective(router, w), objective(id, w))
				}
				if objective(router, w) <= singles {
					t.Errorf("W=%g: the router's objective %.4f does not beat the best single model's %.4f", w, objective(router, w), singles)
				}
			}
		})
	}
}

// TestStyleATargets checks issue 15's targets on ../shared/routing/style-a:
// at one cost weight ≥ 95% of the best single model's quality at ≤ 75% of
// its cost, at another ≥ 85% at ≤ 35%.
func TestStyleATargets(t *testing.T) {
	prefix := shared.Path(t, "routing", "style-a.train.jsonl")
	prefix = strings.TrimSuffix(prefix, ".train.jsonl")
	train, err := ReadTraceFile(prefix + ".train.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	eval, err := ReadTraceFile(prefix + ".eval.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		w, quality, cost float64
	}{{0.13, 0.95, 0.75}, {0.31, 0.85, 0.35}} {
		ev, err := Evaluate(train, eval, Options{CostWeight: tt.w, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		best := bestSingle(ev)
		q, c := ev.Quality/best.Quality, ev.Cost/best.Cost
		t.Logf("W=%g: %.1f%% of the best single model's quality at %.1f%% of its cost", tt.w, 100*q, 100*c)
		if q < tt.quality || c > tt.cost {
			t.Errorf("W=%g: %.1f%% of the quality at %.1f%% of the cost; want ≥ %.0f%% at ≤ %.0f%%", tt.w, 100*q, 100*c, 100*tt.quality, 100*tt.cost)
		}
	}
}
