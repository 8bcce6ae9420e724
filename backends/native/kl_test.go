package native

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/internal/shared"
	"github.com/ruvllm/ruvllm/kvcache"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// klRun feeds tokens to a new sequence of precision kv, the prompt (the
// first nPrompt) in one step and the rest one token a step, and returns the
// log-probabilities after the prompt and after each later token.
func klRun(t *testing.T, b *Backend, kv kvcache.Precision, tokens []tokenizer.ID, nPrompt int) [][]float64 {
	t.Helper()
	s := newSeq(t, b, backends.SequenceOptions{MaxLen: len(tokens), KV: kv})
	defer s.Close()
	logits := make([]float32, b.Model().VocabSize)
	var out [][]float64
	for fed := 0; fed < len(tokens); {
		n := 1
		if fed == 0 {
			n = nPrompt
		}
		forward(t, b, backends.Step{Seq: s, Tokens: tokens[fed : fed+n], Logits: logits})
		fed += n
		p := make([]float64, len(logits))
		softmax(logits, p)
		for i := range p {
			p[i] = math.Log(p[i])
		}
		out = append(out, p)
	}
	return out
}

// meanKL is the mean over steps of KL(p ‖ q) of two runs' distributions.
func meanKL(p, q [][]float64) float64 {
	var sum float64
	for i := range p {
		for v, lp := range p[i] {
			if lp > -700 {
				sum += math.Exp(lp) * (lp - q[i][v])
			}
		}
	}
	return sum / float64(len(p))
}

// greedyFrom extends tokens greedily to n tokens with b on an F16 cache.
func greedyFrom(t *testing.T, b *Backend, tokens []tokenizer.ID, n int) []tokenizer.ID {
	s := newSeq(t, b, backends.SequenceOptions{MaxLen: n})
	defer s.Close()
	logits := make([]float32, b.Model().VocabSize)
	forward(t, b, backends.Step{Seq: s, Tokens: tokens, Logits: logits})
	out := append([]tokenizer.ID{}, tokens...)
	for len(out) < n {
		out = append(out, tokenizer.ID(argmax(logits)))
		if len(out) < n {
			forward(t, b, backends.Step{Seq: s, Tokens: out[len(out)-1:], Logits: logits})
		}
	}
	return out
}

// TestTieredKL measures the mean KL divergence of next-token distributions
// with quantized KV caches from those with the F16 cache, on the reference
// prompts of the mini models and stories260K (../shared/reference): the
// prompt, then llama.cpp's greedy tokens, teacher-forced one a step. The
// reference runs are 25-29 tokens, less than a block, so no block is
// quantized yet: what differs is the tiered kernels' float32 arithmetic
// against the F16 path's (llama.cpp's), and the mean KL must stay within
// 0.002. With RUVLLM_KL_TOKENS=512 the runs are extended greedily (on the
// F16 cache) to that many tokens, where blocks are read at 8 and 4 bits;
// the table it logs is kvcache's doc's measurement. The random-weight mini
// models amplify any change (F32 against F16 keys and values is the floor
// of what can be told apart), so the extended runs are reported, and held
// to 0.002 only on mini-llama-F16 and stories260K.
func TestTieredKL(t *testing.T) {
	dir := shared.Path(t, "reference")
	extend := 0
	if v := os.Getenv("RUVLLM_KL_TOKENS"); v != "" {
		fmt.Sscan(v, &extend)
	}
	root := filepath.Dir(dir)
	type cfg struct {
		name string
		kv   kvcache.Precision
		opt  backends.Options
	}
	cfgs := []cfg{
		{"f32 (floor)", kvcache.F32, backends.Options{}},
		{"q8", kvcache.Q8, backends.Options{}},
		{"q4", kvcache.Q4, backends.Options{}},
		{"tiered", kvcache.Tiered, backends.Options{KVHotTokens: 64}},
		{"tiered warm 64", kvcache.Tiered, backends.Options{KVHotTokens: 64, KVWarmTokens: 64}},
	}
	for _, model := range []string{"mini-llama-F16", "mini-llama-Q8_0", "mini-llama-Q4_K_M", "mini-qwen2-Q8_0", "stories260K"} {
		files, _ := filepath.Glob(filepath.Join(dir, model, "*.logits.json"))
		if len(files) == 0 {
			continue
		}
		kl := make([]float64, len(cfgs))
		for _, file := range files {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var ref reference
			if err := json.Unmarshal(raw, &ref); err != nil {
				t.Fatal(err)
			}
			rel, _ := filepath.Rel(root, modelPath(root, ref.ModelFile))
			parts := strings.Split(rel, string(filepath.Separator))
			base := open(t, backends.Options{Threads: 2}, parts...)
			tokens := append([]tokenizer.ID{}, ref.PromptTokens...)
			for _, st := range ref.Steps[:len(ref.Steps)-1] {
				tokens = append(tokens, tokenizer.ID(st.Chosen))
			}
			if extend > len(tokens) {
				tokens = greedyFrom(t, base, tokens, extend)
			}
			want := klRun(t, base, kvcache.F16, tokens, len(ref.PromptTokens))
			for i, c := range cfgs {
				c.opt.Threads = 2
				b := open(t, c.opt, parts...)
				kl[i] += meanKL(want, klRun(t, b, c.kv, tokens, len(ref.PromptTokens))) / float64(len(files))
				b.Close()
			}
		}
		var line strings.Builder
		for i, c := range cfgs {
			fmt.Fprintf(&line, "  %s %.6f", c.name, kl[i])
			held := extend == 0 || model == "mini-llama-F16" || model == "stories260K"
			if c.kv != kvcache.F32 && held && kl[i] > 0.002 {
				t.Errorf("%s, %s: mean KL %.5f against the F16 cache, more than 0.002", model, c.name, kl[i])
			}
		}
		t.Logf("%s (%d prompts, %d tokens or the reference's):%s", model, len(files), extend, line.String())
	}
}
