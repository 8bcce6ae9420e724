package backends_test

import (
	"slices"
	"testing"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/internal/testmodel"
	"github.com/ruvllm/ruvllm/lora"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// familyPrompt is 24 tokens of the tiny family shapes' vocab: three times
// their sliding window.
var familyPrompt = []tokenizer.ID{1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401, 396, 267, 337, 410, 408, 419}

// TestEngineFamilies runs each family newer than llama through the engine as
// TestEnginePrefixReuse and TestEngineAdapterPrefixReuse run the tiny llama:
// a second turn reuses the first's cache, far past the sliding window, and
// gets the tokens it gets without reuse; a LoRA adapter changes the
// continuation and its turns reuse its own cache alike.
func TestEngineFamilies(t *testing.T) {
	for _, shape := range []string{"tiny-qwen3", "tiny-gemma2", "tiny-gemma3", "tiny-phi3", "tiny-llama3-keys"} {
		t.Run(shape, func(t *testing.T) {
			m := testmodel.Load(t, testmodel.Synth(t, shape, "Q8_0"))
			b := testmodel.Backend(t, "native", m, backends.Options{Threads: 1})
			// The tokens and their log-probabilities of two turns.
			run := func(noReuse bool, a *lora.Adapter) (out1, out2 []tokenizer.ID, logprobs []float32, cached int) {
				e := newEngine(t, b, backends.EngineOptions{Parallel: 2, NoPrefixReuse: noReuse})
				defer e.Close()
				r1 := collect(t, submit(t, e, backends.Request{Prompt: familyPrompt, MaxTokens: 12, Adapter: a, TopLogprobs: 0}), 1)[0]
				out1 = r1.ids()
				second := backends.Request{Prompt: slices.Concat(familyPrompt, out1, []tokenizer.ID{300, 301}), MaxTokens: 12, Adapter: a}
				s := submit(t, e, second)
				out2 = collect(t, s, 1)[0].ids()
				for _, tok := range r1.tokens {
					logprobs = append(logprobs, tok.Logprob)
				}
				return out1, out2, logprobs, s.CachedTokens
			}
			adapter := strongAdapter(t, m.Config, 4, 1)
			var base []float32
			for _, a := range []*lora.Adapter{nil, adapter} {
				r1, r2, lp, cached := run(false, a)
				f1, f2, _, none := run(true, a)
				if want := len(familyPrompt) + len(r1) - 1; cached != want || none != 0 {
					t.Errorf("adapter %v: %d cached tokens, want %d (%d without reuse)", a != nil, cached, want, none)
				}
				if !slices.Equal(r1, f1) || !slices.Equal(r2, f2) {
					t.Errorf("adapter %v: with reuse %v %v, without %v %v", a != nil, r1, r2, f1, f2)
				}
				// Gemma repeats its last token, adapter or not; the
				// probabilities show the adapter at work.
				if a == nil {
					base = lp
				} else if slices.Equal(lp, base) {
					t.Errorf("the adapter leaves the log-probabilities %v as they are", lp)
				}
			}
		})
	}
}
