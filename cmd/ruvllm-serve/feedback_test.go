package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/internal/shared"
	"github.com/ruvllm/ruvllm/internal/testmodel"
	"github.com/ruvllm/ruvllm/kvcache"
	"github.com/ruvllm/ruvllm/lora"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// The trainer runs at the lowest priority: on a machine busy with other
// work it trains slowly, and the test waits up to 10 minutes a set.

// postJSON sends v to base+path and decodes the answer into out (when not
// nil), returning the status.
func postJSON(t *testing.T, base, path string, v, out any) int {
	t.Helper()
	b, _ := json.Marshal(v)
	resp, err := http.Post(base+path, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(body, out); err != nil {
			t.Fatalf("%s: %v: %s", path, err, body)
		}
	}
	return resp.StatusCode
}

// scoreText is log p(completion | prompt) under model, through
// /v1/completions with echo and logprobs: the sum of the logprobs of the
// tokens past the prompt's (as a client scores a continuation).
func scoreText(t *testing.T, base, model, prompt, completion string) float64 {
	t.Helper()
	var out struct {
		Choices []struct {
			Logprobs struct {
				TokenLogprobs []*float64 `json:"token_logprobs"`
				TextOffset    []int      `json:"text_offset"`
			} `json:"logprobs"`
		} `json:"choices"`
	}
	if st := postJSON(t, base, "/v1/completions", map[string]any{"model": model, "prompt": prompt + completion, "echo": true, "logprobs": 0, "max_tokens": 0}, &out); st != 200 {
		t.Fatalf("scoring: status %d", st)
	}
	lp := out.Choices[0].Logprobs
	sum := 0.0
	for i, o := range lp.TextOffset {
		// The completion's tokens start at or after the prompt's text.
		if o >= len([]rune(prompt)) && lp.TokenLogprobs[i] != nil {
			sum += *lp.TokenLogprobs[i]
		}
	}
	return sum
}

// meanMarginAPI is the mean over the set's eval prompts of
// log p(chosen) − log p(rejected) under model, scored through the API.
func meanMarginAPI(t *testing.T, base, model string, set *preferenceSet) float64 {
	t.Helper()
	sum := 0.0
	for _, it := range set.Eval {
		sum += scoreText(t, base, model, it.Prompt, it.Chosen) - scoreText(t, base, model, it.Prompt, it.Rejected)
	}
	return sum / float64(len(set.Eval))
}

// TestFeedbackLearns sends a preference set's training pairs as feedback
// to a fresh MicroLoRA through the API, waits for the trainer, and checks
// the target of issue 14: the mean margin over the eval prompts, scored
// through echo and logprobs with "model": "stories260K:NAME", rises by at
// least 1 nat and ends positive, and perplexity on stories-sample.txt with
// the saved adapter stays within +2% of the base model's. The girl-name set
// is ../shared's; the boy and dog sets (testdata) check that the mechanism
// is not tuned to it. The dog set starts at −5.7 nats, past the 5–7 nats
// that β = 1 lets 32 updates move a margin (its loss is saturated by then):
// for a margin that far below zero only the rise is checked.
func TestFeedbackLearns(t *testing.T) {
	model := shared.Path(t, "models", "stories260K.gguf")
	sample := shared.Path(t, "reference", "stories-sample.txt")
	sets := map[string]string{
		"girl-name": filepath.Join(shared.Dir(), "feedback", "girl-name.json"),
		"boy-name":  filepath.Join("testdata", "feedback", "boy-name.json"),
		"dog-name":  filepath.Join("testdata", "feedback", "dog-name.json"),
	}
	for _, name := range []string{"girl-name", "boy-name", "dog-name"} {
		t.Run(name, func(t *testing.T) {
			set, err := readPreferences(sets[name])
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			c, err := parseServeArgs([]string{"--model", model, "--adapter-dir", dir, "--parallel", "2", "--threads", "1"}, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			base, done := startServe(t, ctx, c)
			waitHealthy(t, base)
			adapter := "stories260K:" + name
			before := meanMarginAPI(t, base, "stories260K", set)
			start := time.Now()
			for i, it := range set.Train {
				var resp map[string]any
				if st := postJSON(t, base, "/v1/feedback", map[string]any{"adapter": name, "prompt": it.Prompt, "chosen": it.Chosen, "rejected": it.Rejected}, &resp); st != 202 {
					t.Fatalf("feedback %d: status %d", i, st)
				}
			}
			var info struct {
				Feedback, Updates, Version int64
				Loss                       float64
			}
			for {
				resp, err := http.Get(base + "/v1/adapters/" + name)
				if err != nil {
					t.Fatal(err)
				}
				json.NewDecoder(resp.Body).Decode(&info)
				resp.Body.Close()
				if info.Updates == int64(len(set.Train)) || time.Since(start) > 10*time.Minute {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			trained := time.Since(start)
			if info.Feedback != int64(len(set.Train)) || info.Updates != int64(len(set.Train)) || info.Version < info.Updates {
				t.Errorf("adapter state %+v after %d feedback", info, len(set.Train))
			}
			after := meanMarginAPI(t, base, adapter, set)
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: margin %.3f → %.3f nats (%+.3f) after %d pairs, trained in %v; last loss %.4f",
				name, before, after, after-before, len(set.Train), trained.Round(time.Millisecond), info.Loss)
			if after-before < 1 || (after <= 0 && before > -4) {
				t.Errorf("the margin went from %.3f to %.3f nats: want a rise of at least 1 ending above 0", before, after)
			}
			// The adapter was saved in the directory: perplexity with it.
			basePPL, adPPL := pplWith(t, model, sample, ""), pplWith(t, model, sample, filepath.Join(dir, name+".gguf"))
			t.Logf("%s: perplexity %.4f base, %.4f with the adapter (%+.2f%%)", name, basePPL, adPPL, 100*(adPPL/basePPL-1))
			if adPPL > basePPL*1.02 {
				t.Errorf("perplexity %.4f with the adapter, more than 2%% above the base's %.4f", adPPL, basePPL)
			}
		})
	}
}

// pplWith is perplexity over file with --ctx 128, with the adapter at
// adapterPath ("" for none).
func pplWith(t *testing.T, model, file, adapterPath string) float64 {
	t.Helper()
	m := testmodel.Load(t, model)
	b := testmodel.Backend(t, "native", m, backends.Options{Threads: 1})
	var a *lora.Adapter
	if adapterPath != "" {
		var err error
		if a, err = lora.Load(adapterPath, m.Config, m.File); err != nil {
			t.Fatal(err)
		}
	}
	text, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	toks := m.Tokenizer.Encode(string(text), tokenizer.EncodeOptions{AddSpecial: true})
	r, err := perplexity(context.Background(), b, a, kvcache.F16, toks, 128, m.Tokenizer.Vocab().BOS, m.Tokenizer.Vocab().AddBOS, nil)
	if err != nil {
		t.Fatal(err)
	}
	return math.Exp(r.nll / float64(r.scored))
}
