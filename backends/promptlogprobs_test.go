package backends_test

import (
	"math"
	"testing"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// logSoftmax is log p(id) under logits, in float64.
func logSoftmax(logits []float32, id tokenizer.ID) float64 {
	m := math.Inf(-1)
	for _, v := range logits {
		m = max(m, float64(v))
	}
	s := 0.0
	for _, v := range logits {
		s += math.Exp(float64(v) - m)
	}
	return float64(logits[id]) - m - math.Log(s)
}

// TestPromptLogprobs checks the prompt's logprobs against one direct
// AllTokens pass of the backend, for prompts shorter and longer than a
// scoring chunk, with and without generated tokens, with a cached prefix
// in the slot (which scoring must not reuse) and with a logit bias (which
// scoring must not apply).
func TestPromptLogprobs(t *testing.T) {
	b := openTiny(t)
	vocab := b.Model().VocabSize
	prompt := make([]tokenizer.ID, 70)
	for i := range prompt {
		prompt[i] = tokenizer.ID((i*37 + 11) % vocab)
	}
	cases := []struct {
		name      string
		n, tokens int
		top       int
		bias      bool
	}{
		{"short, score only", 5, 0, -1, false},
		{"long, score only", 70, 0, 3, false},
		{"long, then generate", 70, 4, 2, false},
		{"biased", 40, 2, 0, true},
	}
	e := newEngine(t, b, backends.EngineOptions{Parallel: 2, MaxLen: 128})
	// A plain request first, so that a slot holds a cached prefix.
	collect(t, submit(t, e, backends.Request{Prompt: prompt[:40], MaxTokens: 2}), 1)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := prompt[:c.n]
			r := backends.Request{Prompt: p, MaxTokens: c.tokens, PromptLogprobs: true, TopLogprobs: c.top}
			if c.bias {
				r.Sampling.LogitBias = map[tokenizer.ID]float32{p[1]: -50}
			}
			s := submit(t, e, r)
			res := collect(t, s, 1)
			if len(res[0].tokens) != c.tokens || res[0].finish != "length" {
				t.Fatalf("%d tokens, finish %q; want %d, length", len(res[0].tokens), res[0].finish, c.tokens)
			}
			if len(s.PromptLogprobs) != c.n-1 {
				t.Fatalf("%d prompt logprobs for %d tokens", len(s.PromptLogprobs), c.n)
			}
			seq, err := b.NewSequence(backends.SequenceOptions{MaxLen: c.n})
			if err != nil {
				t.Fatal(err)
			}
			defer seq.Close()
			logits := make([]float32, c.n*vocab)
			// The engine runs on its own goroutine; this backend is only
			// read by the test after the stream ended and the engine idles.
			if err := b.Forward([]backends.Step{{Seq: seq, Tokens: p, Outputs: backends.AllTokens, Logits: logits}}); err != nil {
				t.Fatal(err)
			}
			for i, tok := range s.PromptLogprobs {
				want := logSoftmax(logits[i*vocab:(i+1)*vocab], p[i+1])
				if tok.ID != p[i+1] || math.Abs(float64(tok.Logprob)-want) > 1e-4 {
					t.Errorf("token %d: id %d logprob %.5f, want id %d logprob %.5f", i+1, tok.ID, tok.Logprob, p[i+1], want)
				}
				if len(tok.Top) != max(c.top, 0) {
					t.Errorf("token %d: %d alternatives, want %d", i+1, len(tok.Top), max(c.top, 0))
				}
			}
		})
	}
}
