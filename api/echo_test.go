package api

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"testing"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/internal/testmodel"
	"github.com/ruvllm/ruvllm/models/tokenizer"
	"github.com/ruvllm/ruvllm/session"
)

// TestEchoLogprobs scores a prompt through /v1/completions with echo and
// logprobs, as lm-evaluation-harness does, and checks every prompt token's
// logprob against a direct pass of another backend over the same tokens.
func TestEchoLogprobs(t *testing.T) {
	rs := startRealServer(t, realOptions{})
	prompt := "Hello world, the quick brown fox"
	ids := session.EncodePrompt(rs.model.Tokenizer, prompt)
	b := testmodel.Backend(t, "native", rs.model, backends.Options{Threads: 1})
	vocab := b.Model().VocabSize
	seq, err := b.NewSequence(backends.SequenceOptions{MaxLen: len(ids)})
	if err != nil {
		t.Fatal(err)
	}
	logits := make([]float32, len(ids)*vocab)
	if err := b.Forward([]backends.Step{{Seq: seq, Tokens: ids, Outputs: backends.AllTokens, Logits: logits}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		maxTokens int
	}{{"score only", 0}, {"and generate", 3}} {
		t.Run(c.name, func(t *testing.T) {
			body, _ := json.Marshal(map[string]any{"prompt": prompt, "echo": true, "logprobs": 2, "max_tokens": c.maxTokens, "temperature": 0})
			resp, err := http.Post(rs.URL+"/v1/completions", "application/json", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var out struct {
				Choices []struct {
					Text     string `json:"text"`
					Logprobs struct {
						Tokens        []string             `json:"tokens"`
						TokenLogprobs []*float64           `json:"token_logprobs"`
						TopLogprobs   []map[string]float64 `json:"top_logprobs"`
						TextOffset    []int                `json:"text_offset"`
					} `json:"logprobs"`
				} `json:"choices"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
				t.Fatalf("status %d, %v", resp.StatusCode, err)
			}
			lp := out.Choices[0].Logprobs
			if len(lp.Tokens) != len(ids)+c.maxTokens || len(lp.TokenLogprobs) != len(lp.Tokens) || len(lp.TextOffset) != len(lp.Tokens) {
				t.Fatalf("%d tokens, %d logprobs, %d offsets for %d prompt and %d generated tokens",
					len(lp.Tokens), len(lp.TokenLogprobs), len(lp.TextOffset), len(ids), c.maxTokens)
			}
			if lp.TokenLogprobs[0] != nil || lp.TopLogprobs[0] != nil {
				t.Errorf("the first token has logprob %v and top %v, want null", lp.TokenLogprobs[0], lp.TopLogprobs[0])
			}
			for i := 1; i < len(ids); i++ {
				want := logSoftmaxOf(logits[(i-1)*vocab:i*vocab], ids[i])
				if lp.TokenLogprobs[i] == nil || math.Abs(*lp.TokenLogprobs[i]-want) > 1e-4 {
					t.Errorf("token %d: logprob %v, want %.5f", i, lp.TokenLogprobs[i], want)
				}
				if len(lp.TopLogprobs[i]) == 0 {
					t.Errorf("token %d: no top logprobs", i)
				}
				if lp.TextOffset[i] < lp.TextOffset[i-1] {
					t.Errorf("text offsets go back at %d: %v", i, lp.TextOffset)
				}
			}
			if out.Choices[0].Text[:len(prompt)] != prompt {
				t.Errorf("text %q does not echo the prompt", out.Choices[0].Text)
			}
		})
	}
}

func logSoftmaxOf(logits []float32, id tokenizer.ID) float64 {
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
