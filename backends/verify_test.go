package backends

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// chiSquareZ is the Wilson–Hilferty normal deviate of a chi-square
// statistic x with df degrees of freedom: above 4 has probability 3e-5
// for a correct sampler.
func chiSquareZ(x float64, df int) float64 {
	k := float64(df)
	return (math.Cbrt(x/k) - (1 - 2/(9*k))) / math.Sqrt(2/(9*k))
}

// postDistribution is the distribution Sample draws from for logits under
// s's state: exp of PostLogprobs of every token.
func postDistribution(s *Sampler, logits []float32) []float64 {
	p := make([]float64, len(logits))
	for id := range logits {
		lp, _ := s.PostLogprobs(logits, tokenizer.ID(id), 0, nil)
		p[id] = math.Exp(float64(lp))
	}
	return p
}

// TestVerifyKeepsTheDistribution: the token Verify returns for a drafted
// token has the distribution Sample draws from, whatever the draft (the
// most likely token, a middling one, one the filters or the mask rule
// out), over the whole-vocabulary draw and the filtered one, with
// penalties and a logit bias; and the draft is accepted with its
// probability. A rule that accepted every draft, or drew the residual
// with the draft left in, fails by hundreds of standard deviations.
func TestVerifyKeepsTheDistribution(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	logits := randomLogits(r, 24, 1.5)
	order := make([]int, len(logits))
	for i := range order {
		order[i] = i
	}
	// Tokens by decreasing logit: the draft choices.
	for i := range order {
		for j := i + 1; j < len(order); j++ {
			if logits[order[j]] > logits[order[i]] {
				order[i], order[j] = order[j], order[i]
			}
		}
	}
	mask := make([]uint64, 1)
	for id := range 24 {
		if id != order[1] {
			mask[0] |= 1 << id
		}
	}
	params := []struct {
		name string
		p    Params
		mask []uint64
	}{
		{"T=1", Params{Temperature: 1}, nil},
		{"T=0.7 top-k 8", Params{Temperature: 0.7, TopK: 8}, nil},
		{"top-p min-p", Params{Temperature: 1.3, TopP: 0.9, MinP: 0.02}, nil},
		{"penalties bias", Params{Temperature: 1, RepeatPenalty: 1.3, PresencePenalty: 0.5, FrequencyPenalty: 0.2,
			LogitBias: map[tokenizer.ID]float32{tokenizer.ID(order[2]): 1.5}}, nil},
		{"mask", Params{Temperature: 0.9}, mask},
	}
	drafts := []int{order[0], order[1], order[5], order[23]}
	const draws = 30000
	for _, c := range params {
		for _, d := range drafts {
			t.Run(fmt.Sprintf("%s/draft %d", c.name, d), func(t *testing.T) {
				c.p.Seed = seed(int64(d) + 100)
				s := NewSampler(c.p, len(logits))
				s.SetMask(c.mask)
				for _, h := range []int{order[0], order[2], order[2]} {
					s.Accept(tokenizer.ID(h))
				}
				want := postDistribution(s, logits)
				counts := make([]int, len(logits))
				accepted := 0
				for range draws {
					id, ok := s.Verify(logits, tokenizer.ID(d))
					if ok != (int(id) == d) {
						t.Fatalf("Verify gave %d, accepted %v, for draft %d", id, ok, d)
					}
					counts[id]++
					if ok {
						accepted++
					}
				}
				// Tokens that cannot come must not; the rest by chi-square.
				var cnt []int
				var p []float64
				for id, q := range want {
					if q == 0 {
						if counts[id] != 0 {
							t.Fatalf("token %d of probability 0 drawn %d times", id, counts[id])
						}
						continue
					}
					cnt = append(cnt, counts[id])
					p = append(p, q)
				}
				if len(p) > 1 {
					if z := chiSquareZ(chiSquare(cnt, p), len(p)-1); z > 4 {
						t.Errorf("counts %v against %v: chi-square z %.1f", cnt, p, z)
					}
				}
				// Accepted with probability p(draft): binomial, 5 sigma.
				pd := want[d]
				sd := math.Sqrt(draws * pd * (1 - pd))
				if diff := math.Abs(float64(accepted) - draws*pd); diff > 5*sd+1 {
					t.Errorf("draft accepted %d times of %d, want %.0f ± %.0f", accepted, draws, draws*pd, sd)
				}
			})
		}
	}
}

// TestVerifyGreedy: a greedy sampler returns the most likely token and
// accepts the draft exactly when it is that token.
func TestVerifyGreedy(t *testing.T) {
	logits := logitsOf(0.1, 0.6, 0.3)
	s := NewSampler(Params{}, 3)
	for d, want := range []bool{false, true, false} {
		id, ok := s.Verify(logits, tokenizer.ID(d))
		if id != 1 || ok != want {
			t.Errorf("draft %d: %d, %v; want 1, %v", d, id, ok, want)
		}
	}
}
