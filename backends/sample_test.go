package backends

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"testing"

	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// logitsOf turns probabilities into logits (log p; the softmax undoes it).
func logitsOf(p ...float64) []float32 {
	l := make([]float32, len(p))
	for i, x := range p {
		l[i] = float32(math.Log(x))
	}
	return l
}

// randomLogits are normal with the given spread, like a model's raw scores.
func randomLogits(r *rand.Rand, n int, spread float64) []float32 {
	l := make([]float32, n)
	for i := range l {
		l[i] = float32(r.NormFloat64() * spread)
	}
	return l
}

func seed(v int64) *int64 { return &v }

func ids(c []candidate) []int {
	out := make([]int, len(c))
	for i, x := range c {
		out[i] = int(x.id)
	}
	return out
}

func sortedIDs(c []candidate) []int {
	out := ids(c)
	slices.Sort(out)
	return out
}

func TestExpNeg(t *testing.T) {
	worst := 0.0
	for x := -87.0; x <= 0; x += 0.00037 {
		got, want := float64(expNeg(float32(x))), math.Exp(float64(float32(x)))
		if e := math.Abs(got-want) / want; e > worst {
			worst = e
		}
	}
	if worst > 2e-7 {
		t.Errorf("worst relative error %g, want <= 2e-7", worst)
	}
	for _, c := range []struct {
		x    float32
		want float32
	}{
		{0, 1},
		{float32(math.Inf(-1)), 0},
		{-200, 0},
		{float32(math.NaN()), 0},
	} {
		if got := expNeg(c.x); got != c.want {
			t.Errorf("expNeg(%v) = %v, want %v", c.x, got, c.want)
		}
	}
}

func TestValidate(t *testing.T) {
	nan := float32(math.NaN())
	for _, c := range []struct {
		name  string
		p     Params
		param string // "" means valid
	}{
		{"zero", Params{}, ""},
		{"defaults", DefaultParams(), ""},
		{"full", Params{Temperature: 2, TopK: 100, TopP: 1, MinP: 1, RepeatPenalty: 1.3, RepeatLastN: -1,
			PresencePenalty: -2, FrequencyPenalty: 2, LogitBias: map[tokenizer.ID]float32{5: -100, 7: 100}, Seed: seed(-3)}, ""},
		{"temperature high", Params{Temperature: 2.01}, "temperature"},
		{"temperature negative", Params{Temperature: -0.1}, "temperature"},
		{"temperature NaN", Params{Temperature: nan}, "temperature"},
		{"top_k negative", Params{TopK: -1}, "top_k"},
		{"top_p high", Params{TopP: 1.5}, "top_p"},
		{"top_p negative", Params{TopP: -0.1}, "top_p"},
		{"min_p high", Params{MinP: 1.1}, "min_p"},
		{"min_p NaN", Params{MinP: nan}, "min_p"},
		{"repeat_penalty negative", Params{RepeatPenalty: -1}, "repeat_penalty"},
		{"repeat_penalty inf", Params{RepeatPenalty: float32(math.Inf(1))}, "repeat_penalty"},
		{"repeat_last_n low", Params{RepeatLastN: -2}, "repeat_last_n"},
		{"repeat_last_n huge", Params{RepeatLastN: MaxRepeatLastN + 1}, "repeat_last_n"},
		{"presence", Params{PresencePenalty: 2.5}, "presence_penalty"},
		{"frequency", Params{FrequencyPenalty: -2.5}, "frequency_penalty"},
		{"bias id", Params{LogitBias: map[tokenizer.ID]float32{-1: 1}}, "logit_bias"},
		{"bias value", Params{LogitBias: map[tokenizer.ID]float32{1: 101}}, "logit_bias"},
		{"bias NaN", Params{LogitBias: map[tokenizer.ID]float32{1: nan}}, "logit_bias"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.p.Validate()
			if c.param == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var pe *ParamError
			if !errors.As(err, &pe) || pe.Param != c.param {
				t.Fatalf("Validate() = %v, want a ParamError on %s", err, c.param)
			}
		})
	}
	t.Run("vocab", func(t *testing.T) {
		p := Params{LogitBias: map[tokenizer.ID]float32{9: 1}}
		if err := p.ValidateVocab(10); err != nil {
			t.Errorf("ValidateVocab(10) = %v", err)
		}
		if err := p.ValidateVocab(9); err == nil {
			t.Errorf("ValidateVocab(9) accepted token 9")
		}
	})
}

func TestGreedy(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, c := range []struct {
		name   string
		p      Params
		logits []float32
		want   int
	}{
		{"argmax", Params{}, []float32{0.1, 3, -2, 2.9}, 1},
		{"all negative", Params{}, []float32{-5, -3, -4}, 1},
		{"tie goes to lower id", Params{}, []float32{1, 7, 7, 2}, 1},
		{"NaN never wins", Params{}, []float32{nan, 1, nan, 0}, 1},
		{"all -Inf", Params{}, []float32{-inf, -inf}, 0},
		{"negative temperature", Params{Temperature: -1}, []float32{0, 0, 4}, 2},
		{"bias moves argmax", Params{LogitBias: map[tokenizer.ID]float32{0: 5}}, []float32{1, 3, 2}, 0},
		{"filters keep the argmax", Params{TopK: 2, TopP: 0.1, MinP: 0.9}, []float32{1, 3, 2}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := NewSampler(c.p, len(c.logits))
			if got := s.Sample(c.logits); int(got) != c.want {
				t.Errorf("Sample = %d, want %d", got, c.want)
			}
		})
	}
	t.Run("random rows", func(t *testing.T) {
		r := rand.New(rand.NewPCG(1, 2))
		s := NewSampler(Params{}, 5000)
		for range 20 {
			l := randomLogits(r, 5000, 3)
			want := 0
			for i, v := range l {
				if v > l[want] {
					want = i
				}
			}
			if got := s.Sample(l); int(got) != want {
				t.Fatalf("Sample = %d, want %d", got, want)
			}
		}
	})
}

func TestSampleDoesNotModifyLogits(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	l := randomLogits(r, 1000, 2)
	orig := slices.Clone(l)
	s := NewSampler(Params{Temperature: 1, RepeatPenalty: 1.5, LogitBias: map[tokenizer.ID]float32{3: 9}}, len(l))
	s.Accept(5)
	s.Sample(l)
	s.TopLogprobs(l, 5, nil)
	if !slices.Equal(l, orig) {
		t.Error("Sample changed the caller's logits")
	}
}

// refTop is the k best tokens by a full sort: decreasing logit, lower id first.
func refTop(l []float32, k int) []int {
	idx := make([]int, len(l))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return l[idx[a]] > l[idx[b]] })
	return idx[:k]
}

func TestTopKMatchesFullSort(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const n = 20000
	// Coarse values make many ties, which must go to the lower id.
	coarse := make([]float32, n)
	for i := range coarse {
		coarse[i] = float32(r.IntN(50))
	}
	for _, c := range []struct {
		name string
		l    []float32
	}{
		{"normal", randomLogits(r, n, 3)},
		{"ties", coarse},
	} {
		for _, k := range []int{1, 2, 40, 1000, n - 1, n} {
			s := NewSampler(Params{}, n)
			w := s.prepare(c.l)
			if got, want := ids(s.topKOf(w, k)), refTop(c.l, k); !slices.Equal(got, want) {
				t.Errorf("%s k=%d: top-k differs from the full sort", c.name, k)
			}
		}
	}
}

func TestTopKOneIsGreedy(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	const n = 3000
	base := Params{RepeatPenalty: 1.3, FrequencyPenalty: 0.4, PresencePenalty: 0.2,
		LogitBias: map[tokenizer.ID]float32{11: 4, 12: -3}}
	greedy := NewSampler(base, n)
	top1 := base
	top1.TopK, top1.Temperature, top1.TopP, top1.Seed = 1, 1.5, 0.9, seed(99)
	sampler := NewSampler(top1, n)
	for step := range 300 {
		l := randomLogits(r, n, 1)
		// Make the penalties matter: the few tokens seen keep high logits.
		for i := range 20 {
			l[i] += 2.5
		}
		g, s := greedy.Sample(l), sampler.Sample(l)
		if g != s {
			t.Fatalf("step %d: top-k 1 sampled %d, greedy %d", step, s, g)
		}
		greedy.Accept(g)
		sampler.Accept(s)
	}
}

// halving is the distribution 1/2, 1/4, ..., 1/2^(n-1), 1/2^(n-1), shuffled
// over the ids so that the kept sets are not prefixes of the vocabulary.
func halving(n int) (logits []float32, rank []int) {
	p := make([]float64, n)
	for i := range p {
		p[i] = math.Ldexp(1, -(i + 1))
	}
	p[n-1] = p[n-2]
	rank = rand.New(rand.NewPCG(9, 10)).Perm(n)
	shuffled := make([]float64, n)
	for i, id := range rank {
		shuffled[id] = p[i]
	}
	return logitsOf(shuffled...), rank
}

func TestTopPKeepsTheNucleus(t *testing.T) {
	l, rank := halving(12)
	for _, c := range []struct {
		p    float32
		keep int // the most likely keep tokens, by rank
	}{
		{0.3, 1},    // 0.5
		{0.5, 1},    // 0.5 reaches 0.5
		{0.6, 2},    // 0.75
		{0.8, 3},    // 0.875
		{0.9, 4},    // 0.9375
		{0.99, 7},   // 0.9921875
		{0.999, 10}, // 0.9990234375
	} {
		want := slices.Sorted(slices.Values(rank[:c.keep]))
		// Without top-k the bucketed path runs; with a top-k that keeps
		// everything but one token, the sorted path.
		for _, topK := range []int{0, len(l) - 1} {
			s := NewSampler(Params{Temperature: 1, TopP: c.p, TopK: topK, Seed: seed(1)}, len(l))
			got := sortedIDs(s.filter(s.prepare(l)))
			if !slices.Equal(got, want) {
				t.Errorf("top-p %v (top-k %d) kept %v, want %v", c.p, topK, got, want)
			}
			// Draws stay inside the nucleus and reach all of it.
			seen := map[int]int{}
			for range 3000 {
				seen[int(s.Sample(l))]++
			}
			for id := range seen {
				if !slices.Contains(want, id) {
					t.Errorf("top-p %v drew token %d outside the nucleus", c.p, id)
				}
			}
			if len(seen) != len(want) {
				t.Errorf("top-p %v drew %d distinct tokens, want %d", c.p, len(seen), len(want))
			}
		}
	}
}

// refTopP is top-p by a full sort and float64 softmax.
func refTopP(l []float32, p float64) []int {
	order := refTop(l, len(l))
	m := float64(l[order[0]])
	var sum float64
	for _, v := range l {
		sum += math.Exp(float64(v) - m)
	}
	var cum float64
	for i, id := range order {
		cum += math.Exp(float64(l[id])-m) / sum
		if cum >= p {
			return order[:i+1]
		}
	}
	return order
}

func TestTopPBucketedMatchesFullSort(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	const n = 32000
	for _, spread := range []float64{0.3, 1, 3, 10} {
		l := randomLogits(r, n, spread)
		for _, p := range []float64{0.05, 0.3, 0.7, 0.9, 0.95, 0.999} {
			s := NewSampler(Params{Temperature: 1, TopP: float32(p)}, n)
			got := sortedIDs(s.filter(s.prepare(l)))
			want := slices.Sorted(slices.Values(refTopP(l, float64(float32(p)))))
			// The reference uses math.Exp; the sampler's exp differs in the
			// last float32 bit, which may move the cut by one token only when
			// the cumulative mass lands within ~1e-7 of p.
			t.Logf("spread %v p %v: %d tokens kept", spread, p, len(got))
			if missing, extra := setDiff(want, got), setDiff(got, want); len(missing)+len(extra) > 1 {
				t.Errorf("spread %v p %v: kept %d tokens, reference %d (missing %d, extra %d)",
					spread, p, len(got), len(want), len(missing), len(extra))
			}
		}
	}
}

func TestTopPOverflowBucket(t *testing.T) {
	// Only a p within 1e-12 of 1 needs tokens more than 32 nats below the
	// top, the histogram's last bucket; the API cannot ask for it, but the
	// code path must still keep a prefix of the sorted tokens that ends where
	// a full sort's would. At this p single tokens weigh a few float64 ulps
	// of the running sum, so the reference may cut a few tokens away.
	r := rand.New(rand.NewPCG(25, 26))
	const n = 1000
	l := make([]float32, n)
	for i := range l {
		l[i] = -33 + float32(r.NormFloat64()*0.2)
	}
	l[10], l[20] = 0, -1
	for _, p := range []float64{1 - 3e-12, 1 - 2e-12, 1 - 1e-12} {
		s := NewSampler(Params{}, n)
		got := sortedIDs(s.topPOf(s.prepare(l), p))
		want := refTopP(l, p)
		t.Logf("p = 1-%.0e: %d tokens kept, reference %d", 1-p, len(got), len(want))
		if prefix := slices.Sorted(slices.Values(refTop(l, len(got)))); !slices.Equal(got, prefix) {
			t.Errorf("p = 1-%.0e: the kept tokens are not the %d most likely", 1-p, len(got))
		}
		if d := len(got) - len(want); d < -3 || d > 3 || len(got) < 100 || len(got) > n-100 {
			t.Errorf("p = 1-%.0e: kept %d tokens, reference %d", 1-p, len(got), len(want))
		}
	}
}

// setDiff is a minus b, both sorted.
func setDiff(a, b []int) []int {
	var out []int
	for _, x := range a {
		if _, found := slices.BinarySearch(b, x); !found {
			out = append(out, x)
		}
	}
	return out
}

func TestMinPKeepsTokensNearTheTop(t *testing.T) {
	l, rank := halving(10)
	for _, c := range []struct {
		minP float32
		keep int
	}{
		{1, 1},
		{0.6, 1},
		{0.5, 2},  // 0.25 >= 0.5·0.5
		{0.2, 3},  // 0.125 >= 0.1
		{0.1, 4},  // 0.0625 >= 0.05
		{0.01, 7}, // 1/128 >= 1/200 > 1/256
	} {
		want := slices.Sorted(slices.Values(rank[:c.keep]))
		for _, topK := range []int{0, len(l) - 1} {
			s := NewSampler(Params{Temperature: 1, MinP: c.minP, TopK: topK}, len(l))
			if got := sortedIDs(s.filter(s.prepare(l))); !slices.Equal(got, want) {
				t.Errorf("min-p %v (top-k %d) kept %v, want %v", c.minP, topK, got, want)
			}
		}
	}
}

func TestChainOrder(t *testing.T) {
	t.Run("top-p sees the top-k distribution", func(t *testing.T) {
		l := logitsOf(0.4, 0.3, 0.2, 0.1)
		// Over all four tokens top-p 0.5 needs two (0.4, 0.7); after top-k 2
		// the first alone has 4/7 >= 0.5.
		for _, c := range []struct {
			topK int
			want []int
		}{{0, []int{0, 1}}, {2, []int{0}}} {
			s := NewSampler(Params{Temperature: 1, TopK: c.topK, TopP: 0.5}, len(l))
			if got := sortedIDs(s.filter(s.prepare(l))); !slices.Equal(got, c.want) {
				t.Errorf("top-k %d, top-p 0.5 kept %v, want %v", c.topK, got, c.want)
			}
		}
	})
	t.Run("min-p runs before temperature", func(t *testing.T) {
		// min-p 0.5 drops token 1 (0.2 < 0.25). Were the temperature 2
		// applied first, token 1 would have sqrt(0.2/0.5) = 0.63 of the top
		// probability and stay.
		l := logitsOf(0.5, 0.2, 0.3)
		s := NewSampler(Params{Temperature: 2, MinP: 0.5, Seed: seed(5)}, len(l))
		counts := make([]int, 3)
		for range 4000 {
			counts[s.Sample(l)]++
		}
		if counts[1] != 0 || counts[0] == 0 || counts[2] == 0 {
			t.Errorf("draws %v, want tokens 0 and 2 only", counts)
		}
	})
	t.Run("bias before penalties", func(t *testing.T) {
		// The repeat penalty divides the biased logit: (1+3)/2 = 2, not 1/2+3.
		s := NewSampler(Params{RepeatPenalty: 2, LogitBias: map[tokenizer.ID]float32{0: 3}}, 2)
		s.Accept(0)
		if got := s.prepare([]float32{1, 0})[0]; got != 2 {
			t.Errorf("biased, penalised logit %v, want 2", got)
		}
	})
}

// chiSquare of observed counts against probabilities.
func chiSquare(counts []int, p []float64) float64 {
	n := 0
	for _, c := range counts {
		n += c
	}
	var x float64
	for i, c := range counts {
		e := p[i] * float64(n)
		x += (float64(c) - e) * (float64(c) - e) / e
	}
	return x
}

func TestTemperatureShapesFrequencies(t *testing.T) {
	base := []float64{0.5, 0.3, 0.2}
	l := logitsOf(base...)
	const draws = 20000
	// With 2 degrees of freedom, P(chi2 > 30) = 3e-7: a correct sampler
	// passes. A sampler that ignores the temperature is off by at least 0.085
	// in the first token's frequency, a chi2 of several hundred.
	const limit = 30
	var firstFreq []float64
	for _, temp := range []float32{0.5, 1, 2} {
		want := make([]float64, len(base))
		var sum float64
		for i, p := range base {
			want[i] = math.Pow(p, 1/float64(temp))
			sum += want[i]
		}
		for i := range want {
			want[i] /= sum
		}
		// No filter: the whole-vocabulary draw. A min-p that keeps every
		// token: the candidate draw.
		for _, p := range []Params{
			{Temperature: temp, Seed: seed(42)},
			{Temperature: temp, MinP: 0.01, Seed: seed(43)},
		} {
			s := NewSampler(p, len(l))
			counts := make([]int, len(l))
			for range draws {
				counts[s.Sample(l)]++
			}
			if x := chiSquare(counts, want); x > limit {
				t.Errorf("T=%v minP=%v: counts %v against %v: chi2 %.1f > %d", temp, p.MinP, counts, want, x, limit)
			}
			if p.MinP == 0 {
				firstFreq = append(firstFreq, float64(counts[0])/draws)
			}
		}
	}
	// Sharpening raises the top token's share: 0.66, 0.5, 0.42 expected.
	if !(firstFreq[0] > firstFreq[1]+0.1 && firstFreq[1] > firstFreq[2]+0.05) {
		t.Errorf("top token frequency at T=0.5, 1, 2: %v, want clearly decreasing", firstFreq)
	}
}

func TestSeeds(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	const n = 1000
	rows := make([][]float32, 100)
	for i := range rows {
		rows[i] = randomLogits(r, n, 0.5)
	}
	run := func(s *Sampler) []int {
		out := make([]int, len(rows))
		for i, l := range rows {
			out[i] = int(s.Sample(l))
			s.Accept(tokenizer.ID(out[i]))
		}
		return out
	}
	params := func(sd *int64) Params {
		return Params{Temperature: 1, TopK: 200, TopP: 0.95, RepeatPenalty: 1.1, Seed: sd}
	}
	a := run(NewSampler(params(seed(7)), n))
	if b := run(NewSampler(params(seed(7)), n)); !slices.Equal(a, b) {
		t.Error("the same seed gave different tokens")
	}
	if b := run(NewSampler(params(seed(8)), n)); slices.Equal(a, b) {
		t.Error("seeds 7 and 8 gave the same 100 tokens")
	}
	s := NewSampler(params(seed(7)), n)
	run(s)
	s.Reset()
	if b := run(s); !slices.Equal(a, b) {
		t.Error("Reset did not restart the seeded stream")
	}
	u, v := NewSampler(params(nil), n), NewSampler(params(nil), n)
	if slices.Equal(run(u), run(v)) {
		t.Errorf("two unseeded samplers (seeds %d, %d) gave the same tokens", u.Seed(), v.Seed())
	}
	// The seed an unseeded sampler reports reproduces its draws.
	x := NewSampler(params(nil), n)
	got := run(x)
	if y := run(NewSampler(params(seed(x.Seed())), n)); !slices.Equal(got, y) {
		t.Error("replaying Seed() of an unseeded sampler gave other tokens")
	}
}

func TestPenalties(t *testing.T) {
	const n = 10
	logits := []float32{2, -1, 0.5, 3, -2, 0, 1, 1, 1, 1}
	for _, c := range []struct {
		name     string
		p        Params
		accepted []int
		want     map[tokenizer.ID]float32 // changed logits, written as logit and penalties; the rest stay
	}{
		{
			name:     "repeat divides positive, multiplies negative",
			p:        Params{RepeatPenalty: 2},
			accepted: []int{0, 1, 1, 5},
			want:     map[tokenizer.ID]float32{0: 1, 1: -2, 5: 0},
		},
		{
			name:     "frequency and presence (OpenAI)",
			p:        Params{FrequencyPenalty: 0.5, PresencePenalty: 0.25},
			accepted: []int{3, 3, 3, 4},
			want:     map[tokenizer.ID]float32{3: 3 - 3*0.5 - 0.25, 4: -2 - 0.5 - 0.25},
		},
		{
			name:     "all three",
			p:        Params{RepeatPenalty: 1.5, FrequencyPenalty: 0.5, PresencePenalty: 0.25},
			accepted: []int{0, 0, 1},
			want:     map[tokenizer.ID]float32{0: 2/1.5 - 2*0.5 - 0.25, 1: -1*1.5 - 0.5 - 0.25},
		},
		{
			name:     "window forgets older tokens",
			p:        Params{FrequencyPenalty: 1, RepeatLastN: 3},
			accepted: []int{2, 2, 6, 7, 6}, // window holds 6, 7, 6
			want:     map[tokenizer.ID]float32{6: 1 - 1*2, 7: 1 - 1*1},
		},
		{
			name:     "default window is 64",
			p:        Params{FrequencyPenalty: 1},
			accepted: append([]int{2}, slices.Repeat([]int{6}, 64)...),
			want:     map[tokenizer.ID]float32{6: 1 - 1*64},
		},
		{
			name:     "unbounded window",
			p:        Params{FrequencyPenalty: 0.01, RepeatLastN: -1},
			accepted: append([]int{2}, slices.Repeat([]int{6}, 100)...),
			want:     map[tokenizer.ID]float32{2: 0.5 - 0.01*1, 6: 1 - 0.01*100},
		},
		{
			name:     "off",
			p:        Params{RepeatPenalty: 1},
			accepted: []int{0, 1, 2},
			want:     nil,
		},
		{
			name:     "negative penalties encourage",
			p:        Params{PresencePenalty: -1},
			accepted: []int{4},
			want:     map[tokenizer.ID]float32{4: -1},
		},
		{
			name:     "ids outside the vocabulary are ignored",
			p:        Params{PresencePenalty: 1},
			accepted: []int{-1, n, 9},
			want:     map[tokenizer.ID]float32{9: 0},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := NewSampler(c.p, n)
			for _, id := range c.accepted {
				s.Accept(tokenizer.ID(id))
			}
			got := s.prepare(logits)
			for i, v := range got {
				want, changed := c.want[tokenizer.ID(i)]
				if !changed {
					want = logits[i]
				}
				if math.Abs(float64(v-want)) > 1e-6 {
					t.Errorf("logit %d = %v, want %v", i, v, want)
				}
			}
			s.Reset()
			if got := s.prepare(logits); !slices.Equal(got, logits) {
				t.Errorf("after Reset the logits are still penalised: %v", got)
			}
		})
	}
	t.Run("window bookkeeping matches a recount", func(t *testing.T) {
		r := rand.New(rand.NewPCG(15, 16))
		const vocab, window = 50, 17
		s := NewSampler(Params{FrequencyPenalty: 1, RepeatLastN: window}, vocab)
		var hist []int
		zeros := make([]float32, vocab)
		for range 2000 {
			id := r.IntN(12) * 4 // a few tokens, often repeated
			s.Accept(tokenizer.ID(id))
			hist = append(hist, id)
			recent := hist[max(0, len(hist)-window):]
			got := s.prepare(zeros)
			for tok := range vocab {
				cnt := 0
				for _, h := range recent {
					if h == tok {
						cnt++
					}
				}
				if got[tok] != -float32(cnt) {
					t.Fatalf("after %d tokens: token %d penalised %v, want %d", len(hist), tok, -got[tok], cnt)
				}
			}
		}
	})
	t.Run("penalty changes the greedy choice", func(t *testing.T) {
		s := NewSampler(Params{RepeatPenalty: 1.5}, 3)
		l := []float32{3, 2.5, 0}
		if got := s.Sample(l); got != 0 {
			t.Fatalf("first pick %d, want 0", got)
		}
		s.Accept(0)
		if got := s.Sample(l); got != 1 {
			t.Errorf("after token 0 (logit 3/1.5 = 2 < 2.5) picked %d, want 1", got)
		}
	})
}

func TestLogitBias(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	const n = 500
	l := randomLogits(r, n, 1)
	l[42] = 12 // the clear favourite
	l[7] = -12 // hopeless
	for _, c := range []struct {
		name   string
		bias   map[tokenizer.ID]float32
		banned int // -1: none
		forced int // -1: none
	}{
		{"-100 bans", map[tokenizer.ID]float32{42: -100}, 42, -1},
		{"+100 forces", map[tokenizer.ID]float32{7: 100}, -1, 7},
		{"out of range ignored", map[tokenizer.ID]float32{n: 100, -4: 100}, -1, -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, p := range []Params{
				{LogitBias: c.bias},
				{LogitBias: c.bias, Temperature: 1.5, Seed: seed(3)},
				{LogitBias: c.bias, Temperature: 2, TopP: 0.99, TopK: 300, Seed: seed(4)},
			} {
				s := NewSampler(p, n)
				for range 2000 {
					id := s.Sample(l)
					if int(id) == c.banned {
						t.Fatalf("%+v: sampled banned token %d", p, id)
					}
					if c.forced >= 0 && int(id) != c.forced {
						t.Fatalf("%+v: sampled %d, want forced %d", p, id, c.forced)
					}
				}
			}
		})
	}
}

// refLogSoftmax in float64 with math.Exp.
func refLogSoftmax(l []float32) []float64 {
	m := math.Inf(-1)
	for _, v := range l {
		m = max(m, float64(v))
	}
	var sum float64
	for _, v := range l {
		sum += math.Exp(float64(v) - m)
	}
	out := make([]float64, len(l))
	for i, v := range l {
		out[i] = float64(v) - m - math.Log(sum)
	}
	return out
}

func TestLogprobs(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 20))
	const n = 2000
	l := randomLogits(r, n, 2.5)
	bias := map[tokenizer.ID]float32{17: 6}
	s := NewSampler(Params{Temperature: 0.7, TopK: 5, TopP: 0.5, MinP: 0.2, LogitBias: bias, RepeatPenalty: 1.2, Seed: seed(1)}, n)
	s.Accept(3)
	s.Accept(3)

	// The reference distribution: bias and penalty applied by hand,
	// temperature 1, no filters.
	adj := slices.Clone(l)
	adj[17] += 6
	if adj[3] > 0 {
		adj[3] /= 1.2
	} else {
		adj[3] *= 1.2
	}
	want := refLogSoftmax(adj)

	var total float64
	for id := range n {
		lp, _ := s.Logprobs(l, tokenizer.ID(id), 0, nil)
		if math.Abs(float64(lp)-want[id]) > 1e-5 {
			t.Fatalf("token %d: logprob %v, want %v", id, lp, want[id])
		}
		total += math.Exp(float64(lp))
	}
	if math.Abs(total-1) > 1e-5 {
		t.Errorf("probabilities sum to %v over the vocabulary", total)
	}

	dst := make([]TokenLogprob, 0, MaxTopLogprobs)
	for _, k := range []int{0, 1, 5, 20, 50, -3} {
		chosen, top := s.Logprobs(l, 17, k, dst)
		wantLen := min(max(k, 0), MaxTopLogprobs)
		if len(top) != wantLen {
			t.Fatalf("n=%d: %d alternatives, want %d", k, len(top), wantLen)
		}
		order := refTop(adj, wantLen)
		for i, x := range top {
			if int(x.ID) != order[i] || math.Abs(float64(x.Logprob)-want[x.ID]) > 1e-5 {
				t.Errorf("n=%d: alternative %d is %+v, want token %d with %v", k, i, x, order[i], want[order[i]])
			}
		}
		if math.Abs(float64(chosen)-want[17]) > 1e-5 {
			t.Errorf("chosen logprob %v, want %v", chosen, want[17])
		}
	}
	if top, order := s.TopLogprobs(l, 3, nil), refTop(adj, 3); len(top) != 3 || int(top[0].ID) != order[0] || int(top[2].ID) != order[2] {
		t.Errorf("TopLogprobs = %+v, want tokens %v", top, order)
	}
	if lp, _ := s.Logprobs(l, n, 0, nil); !math.IsInf(float64(lp), -1) {
		t.Errorf("logprob of an id outside the vocabulary = %v, want -Inf", lp)
	}
	// Probabilities are never above 1, even for a certain token.
	certain := make([]float32, 10)
	certain[4] = 1e4
	if lp, _ := NewSampler(Params{}, 10).Logprobs(certain, 4, 0, nil); lp != 0 {
		t.Errorf("logprob of a certain token = %v, want 0", lp)
	}
}

func TestDegenerateLogits(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	any3 := []tokenizer.ID{0, 1, 2}
	rows := []struct {
		logits  []float32
		allowed []tokenizer.ID
	}{
		{[]float32{nan, nan, nan}, any3},
		{[]float32{-inf, -inf, -inf}, any3},
		{[]float32{nan, 1, -inf}, []tokenizer.ID{1}},
		{[]float32{0, inf, 1}, []tokenizer.ID{1}},
		{[]float32{1, 1, 1}, any3},
	}
	for _, p := range []Params{
		{},
		{Temperature: 1, Seed: seed(1)},
		{Temperature: 1, TopK: 2, Seed: seed(1)},
		{Temperature: 1, TopP: 0.5, Seed: seed(1)},
		{Temperature: 1, MinP: 0.5, Seed: seed(1)},
		{Temperature: 1e-30, Seed: seed(1)},
	} {
		s := NewSampler(p, 3)
		for _, r := range rows {
			for range 20 {
				if id := s.Sample(r.logits); !slices.Contains(r.allowed, id) {
					t.Errorf("%+v on %v: sampled %d, want one of %v", p, r.logits, id, r.allowed)
				}
			}
			top := s.TopLogprobs(r.logits, 3, nil)
			if len(top) != 3 || !slices.Contains(r.allowed, top[0].ID) {
				t.Errorf("%+v on %v: top logprobs %+v", p, r.logits, top)
			}
		}
	}
}

func TestSampleAllocatesNothing(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	const n = 32000
	l := randomLogits(r, n, 3)
	bias := map[tokenizer.ID]float32{1: 5, 2: -100}
	dst := make([]TokenLogprob, 0, MaxTopLogprobs)
	for _, c := range []struct {
		name string
		p    Params
	}{
		{"greedy", Params{LogitBias: bias}},
		{"top-k top-p", Params{Temperature: 0.8, TopK: 40, TopP: 0.95, Seed: seed(1)}},
		{"llama.cpp defaults with penalties", func() Params {
			p := DefaultParams()
			p.RepeatPenalty, p.PresencePenalty, p.FrequencyPenalty, p.LogitBias = 1.1, 0.5, 0.5, bias
			return p
		}()},
		{"top-p alone", Params{Temperature: 1, TopP: 0.9}},
		{"min-p alone", Params{Temperature: 1, MinP: 0.05}},
		{"temperature alone", Params{Temperature: 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := NewSampler(c.p, n)
			allocs := testing.AllocsPerRun(20, func() {
				id := s.Sample(l)
				s.Logprobs(l, id, MaxTopLogprobs, dst)
				s.Accept(id)
			})
			if allocs != 0 {
				t.Errorf("%v allocations per step, want 0", allocs)
			}
		})
	}
}

func benchLogits(n int) []float32 {
	r := rand.New(rand.NewPCG(23, 24))
	l := randomLogits(r, n, 2)
	// A few strong candidates on top of the noise, as after a real prompt.
	for i := range 10 {
		l[r.IntN(n)] = 8 + float32(i)*0.3
	}
	return l
}

func BenchmarkSample(b *testing.B) {
	for _, n := range []int{32000, 151936} {
		l := benchLogits(n)
		for _, c := range []struct {
			name string
			p    Params
		}{
			{"greedy", Params{}},
			{"defaults", DefaultParams()},
			{"top-k40", Params{Temperature: 0.8, TopK: 40}},
			{"top-p0.95", Params{Temperature: 0.8, TopP: 0.95}},
			{"min-p0.05", Params{Temperature: 0.8, MinP: 0.05}},
			{"temperature", Params{Temperature: 0.8}},
		} {
			b.Run(c.name+"/"+strconv.Itoa(n), func(b *testing.B) {
				s := NewSampler(c.p, n)
				for b.Loop() {
					s.Sample(l)
				}
			})
		}
		b.Run("logprobs20/"+strconv.Itoa(n), func(b *testing.B) {
			s := NewSampler(Params{}, n)
			dst := make([]TokenLogprob, 0, MaxTopLogprobs)
			for b.Loop() {
				s.Logprobs(l, 0, MaxTopLogprobs, dst)
			}
		})
	}
}

func TestSetParamsMatchesNewSampler(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	const n = 1000
	rows := make([][]float32, 60)
	for i := range rows {
		rows[i] = randomLogits(r, n, 0.5)
	}
	run := func(s *Sampler) []int {
		out := make([]int, len(rows))
		for i, l := range rows {
			out[i] = int(s.Sample(l))
			s.Accept(tokenizer.ID(out[i]))
		}
		return out
	}
	configs := []Params{
		{Temperature: 1, TopK: 200, TopP: 0.95, RepeatPenalty: 1.3, RepeatLastN: 8, Seed: seed(7)},
		{},
		{Temperature: 0.7, MinP: 0.1, FrequencyPenalty: 1, RepeatLastN: -1, Seed: seed(9)},
		{LogitBias: map[tokenizer.ID]float32{3: 100}},
		{Temperature: 1.2, TopP: 0.9, PresencePenalty: 2, RepeatLastN: 40, LogitBias: map[tokenizer.ID]float32{5: -100}, Seed: seed(11)},
		{Temperature: 1, Seed: seed(7)},
	}
	// One sampler goes through every configuration in turn, each time after
	// accepting tokens under the previous one: it must behave like a fresh
	// sampler, penalty state and random stream included.
	s := NewSampler(DefaultParams(), n)
	run(s)
	for i, p := range configs {
		s.SetParams(p)
		got := run(s)
		if want := run(NewSampler(p, n)); !slices.Equal(got, want) {
			t.Errorf("config %d: SetParams gave other tokens than NewSampler", i)
		}
	}
	// Going back to a configuration the sampler had allocates nothing.
	if a := testing.AllocsPerRun(10, func() { s.SetParams(configs[0]) }); a != 0 {
		t.Errorf("SetParams to a known configuration: %v allocations, want 0", a)
	}
}

// TestSamplerMask checks that a mask keeps every sampling path to the
// allowed tokens: greedy takes the best of them, draws never leave them
// under any filter, and logprobs give the rest -Inf and the allowed ones a
// distribution of their own.
func TestSamplerMask(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	const vocab = 300
	for trial := range 40 {
		logits := randomLogits(r, vocab, 3)
		mask := make([]uint64, (vocab+63)/64)
		var allowed []int
		for id := range vocab {
			if r.IntN(7) == 0 || (trial%4 == 0 && id < 200) {
				mask[id>>6] |= 1 << (id & 63)
				allowed = append(allowed, id)
			}
		}
		if len(allowed) == 0 {
			continue
		}
		for _, p := range []Params{{}, {Temperature: 1}, {Temperature: 1.5, TopK: 5}, {Temperature: 1, TopP: 0.5}, {Temperature: 1, MinP: 0.2},
			{Temperature: 1, RepeatPenalty: 1.3, LogitBias: map[tokenizer.ID]float32{tokenizer.ID(allowed[0]): -5}}} {
			s := NewSampler(p, vocab)
			s.SetMask(mask)
			best := allowed[0]
			for _, id := range allowed {
				if logits[id] > logits[best] {
					best = id
				}
			}
			for range 50 {
				id := s.Sample(logits)
				if mask[id>>6]&(1<<(id&63)) == 0 {
					t.Fatalf("params %+v drew masked token %d", p, id)
				}
				if p.Temperature == 0 && int(id) != best {
					t.Fatalf("greedy drew %d, the best allowed is %d", id, best)
				}
			}
			if p.RepeatPenalty != 0 {
				continue
			}
			lp, top := s.Logprobs(logits, tokenizer.ID(best), 3, nil)
			var sum float64
			for _, id := range allowed {
				l, _ := s.Logprobs(logits, tokenizer.ID(id), 0, nil)
				sum += math.Exp(float64(l))
			}
			if math.Abs(sum-1) > 1e-4 || lp > 0 {
				t.Fatalf("allowed tokens' probabilities sum to %v", sum)
			}
			for _, a := range top {
				if mask[a.ID>>6]&(1<<(a.ID&63)) == 0 && !math.IsInf(float64(a.Logprob), -1) {
					t.Fatalf("masked token %d in the top logprobs with %v", a.ID, a.Logprob)
				}
			}
		}
	}
	s := NewSampler(Params{}, vocab)
	s.SetMask(make([]uint64, (vocab+63)/64))
	if id := s.Sample(randomLogits(r, vocab, 1)); id != 0 {
		t.Errorf("with every token masked greedy drew %d, want 0", id)
	}
	s.SetParams(Params{})
	if s.mask != nil {
		t.Error("SetParams kept the mask")
	}
	defer func() {
		if recover() == nil {
			t.Error("a mask of the wrong length was taken")
		}
	}()
	s.SetMask(make([]uint64, 1))
}
