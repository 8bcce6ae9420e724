package sona

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
)

// prompts makes requests of two kinds: code (which one arm answers badly)
// and small talk, in varied words.
type prompts struct{ rng *rand.Rand }

func (p prompts) pick(words ...string) string { return words[p.rng.IntN(len(words))] }

func (p prompts) code() string {
	return fmt.Sprintf("Write a %s function that %s %s.", p.pick("Go", "Python", "Rust", "C"),
		p.pick("sorts", "reverses", "merges", "deduplicates", "parses"), p.pick("a list", "two arrays", "a CSV file", "the input lines"))
}

func (p prompts) chat() string {
	return fmt.Sprintf("%s %s, %s", p.pick("Say hello to", "Greet", "Wish good morning to"), p.pick("Ana", "Bo", "Kai", "Lea", "Ola"),
		p.pick("please.", "warmly.", "from me."))
}

func twoArms() []Arm { return []Arm{{Name: "coder"}, {Name: "chatter"}} }

// truth is how the two arms do: the coder answers everything well at cost
// 1; the chatter answers small talk well and code badly, at cost 0.1.
func truth(arm string, code bool) Outcome {
	if arm == "coder" {
		return Outcome{Quality: 1, Rated: true, Cost: 1}
	}
	q := 1.0
	if code {
		q = 0
	}
	return Outcome{Quality: q, Rated: true, Cost: 0.1}
}

func TestDecideRefuses(t *testing.T) {
	r, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	neg, nan := -1.0, math.NaN()
	many := make([]Arm, MaxArms+1)
	for i := range many {
		many[i] = Arm{Name: fmt.Sprint("m", i)}
	}
	tests := []struct {
		name string
		req  Request
		arms []Arm
		want error
	}{
		{"no arms", Request{Text: "hi"}, nil, ErrNoArms},
		{"an arm twice", Request{Text: "hi"}, []Arm{{Name: "a"}, {Name: "a"}}, nil},
		{"an arm without a name", Request{Text: "hi"}, []Arm{{Name: ""}}, nil},
		{"a negative cost weight", Request{Text: "hi", CostWeight: &neg}, twoArms(), nil},
		{"a cost weight that is not a number", Request{Text: "hi", CostWeight: &nan}, twoArms(), nil},
		{"too many arms", Request{Text: "hi"}, many, ErrTooManyArms},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := r.Decide(tt.req, tt.arms)
			if err == nil || (tt.want != nil && !errors.Is(err, tt.want)) {
				t.Fatalf("Decide = %v, want an error (%v)", err, tt.want)
			}
		})
	}
	for _, o := range []Options{{CostWeight: -1}, {FeatureBits: 40}, {ExploreRate: 2}, {Neighbours: -1}, {PriorStrength: math.Inf(1)}} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) accepted bad options", o)
		}
	}
}

// train teaches r n requests with bandit feedback from truth, and returns
// the share of decisions that explored.
func train(t *testing.T, r *Router, p prompts, n int) float64 {
	t.Helper()
	explored := 0
	for i := range n {
		code := i%2 == 0
		text := p.chat()
		if code {
			text = p.code()
		}
		id := fmt.Sprint("req-", i)
		d, err := r.Decide(Request{ID: id, Text: text}, twoArms())
		if err != nil {
			t.Fatal(err)
		}
		if d.Explore {
			explored++
		}
		if !r.Observe(id, truth(d.Arm, code)) {
			t.Fatalf("the decision %s was not known", id)
		}
	}
	return float64(explored) / float64(n)
}

// routed counts, over n new requests of each kind, those sent to arm.
func routed(t *testing.T, r *Router, p prompts, n int, arm string) (code, chat int) {
	t.Helper()
	for range n {
		if d, _ := r.Decide(Request{Text: p.code()}, twoArms()); d.Arm == arm {
			code++
		}
		if d, _ := r.Decide(Request{Text: p.chat()}, twoArms()); d.Arm == arm {
			chat++
		}
	}
	return code, chat
}

func TestRouterLearnsFromBanditFeedback(t *testing.T) {
	r, err := New(Options{CostWeight: 0.3, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	p := prompts{rand.New(rand.NewPCG(7, 7))}
	explored := train(t, r, p, 400)
	code, chat := routed(t, r, p, 100, "chatter")
	// Code needs the coder; small talk is as good from the chatter, at a
	// tenth of the cost.
	if code > 5 || chat < 95 {
		t.Fatalf("the chatter got %d of 100 code requests and %d of 100 small talk; want ≤ 5 and ≥ 95", code, chat)
	}
	if explored > 2*DefaultExploreRate {
		t.Fatalf("%.1f%% of decisions explored; at most %.0f%% may", 100*explored, 100*DefaultExploreRate)
	}
	// With cost weight 0 quality alone counts: the coder is never worse.
	zero := 0.0
	d, _ := r.Decide(Request{Text: p.code(), CostWeight: &zero}, twoArms())
	if d.Arm != "coder" || d.CostWeight != 0 {
		t.Fatalf("quality alone: %+v", d)
	}
}

func TestRatingsRouteAway(t *testing.T) {
	// Without ratings both arms finish every answer ("stop"): the outcome
	// alone cannot tell them apart, and the cheaper chatter wins. Users
	// then rate the chatter's code answers bad (and everything else good):
	// code requests must go to the coder.
	r, err := New(Options{CostWeight: 0.1, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	p := prompts{rand.New(rand.NewPCG(3, 3))}
	serve := func(i int, rate bool) {
		code := i%2 == 0
		text := p.chat()
		if code {
			text = p.code()
		}
		id := fmt.Sprint("c-", i, rate)
		d, err := r.Decide(Request{ID: id, Text: text}, twoArms())
		if err != nil {
			t.Fatal(err)
		}
		cost := 1.0
		if d.Arm == "chatter" {
			cost = 0.1
		}
		r.Observe(id, Outcome{Finish: "stop", Cost: cost})
		if rate {
			rating := 1.0
			if code && d.Arm == "chatter" {
				rating = -1
			}
			if err := r.Feedback(id, rating); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range 100 {
		serve(i, false)
	}
	if code, _ := routed(t, r, p, 50, "chatter"); code < 45 {
		t.Fatalf("before ratings the chatter got %d of 50 code requests; want most", code)
	}
	for i := range 200 {
		serve(i, true)
	}
	code, chat := routed(t, r, p, 100, "chatter")
	if code > 5 || chat < 90 {
		t.Fatalf("after ratings the chatter got %d of 100 code requests and %d of 100 small talk; want ≤ 5 and ≥ 90", code, chat)
	}
}

func TestExplorationIsSafe(t *testing.T) {
	// Arm "bad" never answers well; "good" and "twin" are equals. Even
	// exploring on every decision, the router must never try "bad" once it
	// knows, and must try "twin" sometimes.
	r, err := New(Options{ExploreRate: 1, Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	p := prompts{rand.New(rand.NewPCG(11, 11))}
	arms := []Arm{{Name: "good"}, {Name: "twin"}, {Name: "bad"}}
	for range 200 {
		q := 1.0
		outs := map[string]Outcome{"good": {Quality: q, Rated: true, Cost: 1}, "twin": {Quality: q, Rated: true, Cost: 1},
			"bad": {Quality: 0, Rated: true, Cost: 1}}
		if err := r.Learn(Request{Text: p.chat()}, outs); err != nil {
			t.Fatal(err)
		}
	}
	counts := map[string]int{}
	explored := 0
	for range 1000 {
		d, err := r.Decide(Request{Text: p.chat()}, arms)
		if err != nil {
			t.Fatal(err)
		}
		counts[d.Arm]++
		if d.Explore {
			explored++
		}
	}
	if counts["bad"] > 0 || counts["good"] < 100 || counts["twin"] < 100 || explored == 0 {
		t.Fatalf("decisions %v, %d explored; want none for bad and both equals tried", counts, explored)
	}
}

func TestLoadMovesRequests(t *testing.T) {
	r, err := New(Options{CostWeight: 1, NoExplore: true})
	if err != nil {
		t.Fatal(err)
	}
	p := prompts{rand.New(rand.NewPCG(5, 5))}
	for range 100 {
		o := Outcome{Quality: 1, Rated: true, Cost: 0.2}
		if err := r.Learn(Request{Text: p.chat()}, map[string]Outcome{"a": o, "b": o}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		name string
		arms []Arm
		want string
	}{
		{"a's queue", []Arm{{Name: "a", CostScale: 4}, {Name: "b"}}, "b"},
		{"b's queue", []Arm{{Name: "a"}, {Name: "b", CostScale: 4}}, "a"},
		{"a must load", []Arm{{Name: "a", ExtraCost: 2}, {Name: "b"}}, "b"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d, err := r.Decide(Request{Text: p.chat()}, tt.arms)
			if err != nil || d.Arm != tt.want {
				t.Fatalf("Decide = %+v, %v; want %s", d, err, tt.want)
			}
		})
	}
}

func TestOutcomesAndFeedbackBookkeeping(t *testing.T) {
	r, err := New(Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r.Observe("never", Outcome{Finish: "stop"}) {
		t.Fatal("an unknown decision was observed")
	}
	if err := r.Feedback("never", 1); !errors.Is(err, ErrUnknownCompletion) {
		t.Fatalf("feedback on an unknown completion: %v", err)
	}
	for _, bad := range []float64{-1.5, 2, math.NaN()} {
		if err := r.Feedback("never", bad); err == nil || errors.Is(err, ErrUnknownCompletion) {
			t.Fatalf("rating %g: %v", bad, err)
		}
	}
	decide := func(id string) {
		if _, err := r.Decide(Request{ID: id, Text: "hello there"}, twoArms()); err != nil {
			t.Fatal(err)
		}
	}
	decide("gone")
	r.Abandon("gone")
	if r.Observe("gone", Outcome{Finish: "stop"}) {
		t.Fatal("an abandoned decision was observed")
	}
	// A rating that comes before the outcome is applied with it.
	decide("early")
	if err := r.Feedback("early", -1); err != nil {
		t.Fatal(err)
	}
	if !r.Observe("early", Outcome{Finish: "stop", Cost: 1}) {
		t.Fatal("the decision was lost")
	}
	tr, ok := r.bank.find("early")
	if !ok || tr.outs[0].quality != 0 || tr.outs[0].qweight != 1 {
		t.Fatalf("the early rating was not applied: %+v", tr)
	}
	// Decisions whose outcome never comes are forgotten, oldest first.
	for i := range maxPending + 10 {
		decide(fmt.Sprint("p", i))
	}
	if len(r.pending) != maxPending {
		t.Fatalf("%d decisions pending, want at most %d", len(r.pending), maxPending)
	}
	if r.Observe("p0", Outcome{Finish: "stop"}) || !r.Observe(fmt.Sprint("p", maxPending+9), Outcome{Finish: "stop"}) {
		t.Fatal("the oldest decision should be forgotten and the newest kept")
	}
}

func TestDecisionHeader(t *testing.T) {
	d := Decision{Arm: "qwen:tales", Quality: 0.8125, Cost: 0.5, Score: 0.7625, CostWeight: 0.1, Explore: true, Neighbours: 12}
	want := "qwen:tales; score=0.7625; quality=0.8125; cost=0.5000; cost_weight=0.1; explore=1; neighbours=12"
	if got := d.Header(); got != want {
		t.Fatalf("Header = %q, want %q", got, want)
	}
}

func TestConcurrentRouting(t *testing.T) {
	r, err := New(Options{CostWeight: 0.2, BankSize: 64, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := prompts{rand.New(rand.NewPCG(uint64(g), 9))}
			for i := range 200 {
				id := fmt.Sprint(g, "-", i)
				code := i%3 == 0
				text := p.chat()
				if code {
					text = p.code()
				}
				d, err := r.Decide(Request{ID: id, Text: text, User: strings.Repeat("u", g+1)}, twoArms())
				if err != nil {
					t.Error(err)
					return
				}
				r.Observe(id, truth(d.Arm, code))
				r.Feedback(id, 1)
			}
		}()
	}
	wg.Wait()
}

// TestColdCostsStayBounded: a router that has never seen an arm's costs
// predicts 1 unit; the first costs it sees (milliseconds) are far off,
// and the spread of those early residuals must not inflate the arm's
// expected cost beyond a small factor of what it costs, or a cost-aware
// router would never choose the arm again to learn better.
func TestColdCostsStayBounded(t *testing.T) {
	r, err := New(Options{CostWeight: 1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	arms := []Arm{{Name: "fast"}}
	for i := range 40 {
		id := fmt.Sprint("q", i)
		d, err := r.Decide(Request{ID: id, Text: fmt.Sprintf("question number %d", i)}, arms)
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 && d.Cost > 0.001*math.E*4 {
			t.Fatalf("after %d costs of 1 ms the expected cost is %g s", i, d.Cost)
		}
		r.Observe(id, Outcome{Finish: "stop", Cost: 0.001})
	}
}

// TestRegister: arms registered before any decision are the arms decisions
// offer, with nothing learnt; an empty name and too many arms are refused.
func TestRegister(t *testing.T) {
	r, err := New(Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Register("a", "b", "a"); err != nil {
		t.Fatal(err)
	}
	d, err := r.Decide(Request{Text: "hello"}, []Arm{{Name: "b"}, {Name: "a"}})
	if err != nil || (d.Arm != "a" && d.Arm != "b") || d.Quality != 0.5 {
		t.Errorf("decision %+v, %v", d, err)
	}
	if err := r.Register(""); err == nil {
		t.Error("an empty arm name was registered")
	}
	for i := range MaxArms {
		err = r.Register(fmt.Sprint("arm", i))
	}
	if !errors.Is(err, ErrTooManyArms) {
		t.Errorf("registering %d arms: %v", MaxArms+2, err)
	}
}
