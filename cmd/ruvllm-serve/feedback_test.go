package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
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
// the targets of issue 33: the mean margin over the held-out prompts,
// scored through echo and logprobs with "model": "stories260K:NAME", rises
// by at least 1 nat and ends positive, and ln perplexity on
// stories-sample.txt with the saved adapter rises by at most 2%. The
// girl-name set is ../shared's; the others (testdata) check that the
// mechanism is not tuned to it: dog-name starts at −5.7 nats, which DPO
// left at −0.4, and dog-rex at −10.
func TestFeedbackLearns(t *testing.T) {
	model := shared.Path(t, "models", "stories260K.gguf")
	sample := shared.Path(t, "reference", "stories-sample.txt")
	sets := map[string]string{
		"girl-name": filepath.Join(shared.Dir(), "feedback", "girl-name.json"),
		"boy-name":  filepath.Join("testdata", "feedback", "boy-name.json"),
		"dog-name":  filepath.Join("testdata", "feedback", "dog-name.json"),
		"dog-rex":   filepath.Join("testdata", "feedback", "dog-rex.json"),
	}
	baseNLL := nllWith(t, model, sample, "")
	for _, name := range []string{"girl-name", "boy-name", "dog-name", "dog-rex"} {
		t.Run(name, func(t *testing.T) {
			set, err := readPreferences(sets[name])
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			c, err := parseServeArgs(quietEnv(), []string{"--model", model, "--adapter-dir", dir, "--parallel", "2", "--threads", "1"})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			base, done := startServe(t, ctx, c)
			waitHealthy(t, base)
			adapter := "stories260K:" + name
			before := meanMarginAPI(t, base, "stories260K", set)
			start := time.Now()
			info := trainThroughAPI(t, base, name, set)
			trained := time.Since(start)
			if info.Feedback != int64(len(set.Train)) || info.Updates != int64(len(set.Train)) || info.Version < 2 || info.Version > info.Updates+1 {
				t.Errorf("adapter state %+v after %d feedback", info, len(set.Train))
			}
			after := meanMarginAPI(t, base, adapter, set)
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: margin %.3f → %.3f nats (%+.3f) after %d pairs, trained in %v; last loss %.4f, version %d",
				name, before, after, after-before, len(set.Train), trained.Round(time.Millisecond), info.Loss, info.Version)
			if after-before < 1 || after <= 0 {
				t.Errorf("the margin went from %.3f to %.3f nats: want a rise of at least 1 ending above 0", before, after)
			}
			// The adapter was saved in the directory: ln perplexity with it.
			nll := nllWith(t, model, sample, filepath.Join(dir, name+".gguf"))
			t.Logf("%s: ln perplexity %.5f base, %.5f with the adapter (%+.2f%%; perplexity %+.2f%%)", name, baseNLL, nll, 100*(nll/baseNLL-1), 100*(math.Exp(nll-baseNLL)-1))
			if nll > baseNLL*1.02 {
				t.Errorf("ln perplexity %.5f with the adapter, more than 2%% above the base's %.5f", nll, baseNLL)
			}
		})
	}
}

// nllWith is ln perplexity (the mean negative log-likelihood of a
// token) over file with --ctx 128, with the adapter at adapterPath ("" for
// none).
func nllWith(t *testing.T, model, file, adapterPath string) float64 {
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
	return r.nll / float64(r.scored)
}

// familyPreferences is a preference set for a random-weight model of the
// synthetic vocabulary: 32 training and 8 held-out prompts of words, all
// preferring one completion over another, each a few tokens long.
func familyPreferences() *preferenceSet {
	subjects := []string{"the cat", "a dog", "my friend", "the old man", "a bird", "the girl", "our teacher", "a small fox",
		"the king", "a baker", "the farmer", "her brother", "the robot", "a sailor", "the queen", "his sister",
		"the doctor", "a child", "the pilot", "my uncle"}
	verbs := []string{"liked the", "painted the", "found a", "saw the"}
	set := &preferenceSet{Preference: "things are blue, not red"}
	for i, s := range subjects {
		for j, v := range verbs[:2] {
			it := preferenceItem{Prompt: s + " " + v + " house and it was", Chosen: " blue", Rejected: " red"}
			if i < 16 {
				set.Train = append(set.Train, it)
			} else if j == 0 {
				it.Prompt = s + " " + verbs[2+i%2] + " box and it was"
				set.Eval = append(set.Eval, it)
			}
		}
	}
	for _, s := range subjects[16:] {
		set.Eval = append(set.Eval, preferenceItem{Prompt: s + " " + verbs[3] + " car and it was", Chosen: " blue", Rejected: " red"})
	}
	return set
}

// TestFeedbackLearnsFamilies sends familyPreferences' 32 training pairs as
// feedback to a fresh MicroLoRA of the tiny synthesized file of every
// family, served by each backend, and checks that the mean margin over the
// held-out prompts, scored through the API with the adapter, rises by at
// least 1 nat (issue 33's target on random weights), and that the adapter
// saved in the directory loads.
func TestFeedbackLearnsFamilies(t *testing.T) {
	if testing.Short() {
		t.Skip("trains 12 adapters")
	}
	families := []struct{ arch, shape, as string }{
		{"llama", "tiny-llama3", ""},
		{"qwen2", "tiny-phi3", "qwen2"},
		{"qwen3", "tiny-qwen3", ""},
		{"gemma2", "tiny-gemma2", ""},
		{"gemma3", "tiny-gemma3", ""},
		{"phi3", "tiny-phi3", ""},
	}
	set := familyPreferences()
	if len(set.Train) != 32 || len(set.Eval) != 8 {
		t.Fatalf("%d training and %d held-out pairs", len(set.Train), len(set.Eval))
	}
	for _, fam := range families {
		for _, backend := range []string{"native", "gorgonia"} {
			t.Run(fam.arch+"/"+backend, func(t *testing.T) {
				path := testmodel.SynthAs(t, fam.shape, fam.as, "F32")
				dir := t.TempDir()
				// The gorgonia backend keeps F16 or F32 caches only.
				c, err := parseServeArgs(quietEnv(), []string{"--model", path, "--backend", backend, "--kv", "f16", "--adapter-dir", dir, "--parallel", "2", "--threads", "1", "--micro-lora-cpu", "1"})
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				base, done := startServe(t, ctx, c)
				waitHealthy(t, base)
				model := strings.TrimSuffix(filepath.Base(path), ".gguf")
				before := meanMarginAPI(t, base, model, set)
				info := trainThroughAPI(t, base, "blue", set)
				after := meanMarginAPI(t, base, model+":blue", set)
				cancel()
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				t.Logf("%s on %s: margin %.3f → %.3f nats (%+.3f); %d updates, version %d, last loss %.4f",
					fam.arch, backend, before, after, after-before, info.Updates, info.Version, info.Loss)
				if after-before < 1 {
					t.Errorf("the held-out margin went from %.3f to %.3f nats: want a rise of at least 1", before, after)
				}
				m := testmodel.Load(t, path)
				a, err := lora.Load(filepath.Join(dir, "blue.gguf"), m.Config, m.File)
				if err != nil {
					t.Fatal(err)
				}
				if a.Training == nil || a.Training.Version != info.Version || a.Training.State == nil {
					t.Errorf("the saved adapter's training state is %+v, want version %d with the trainer's state", a.Training, info.Version)
				}
			})
		}
	}
}

// adapterInfo is what GET /v1/adapters/NAME says of a MicroLoRA's
// training.
type adapterInfo struct {
	Feedback, Updates, Version int64
	Loss                       float64
}

// getAdapter reads GET /v1/adapters/name.
func getAdapter(t *testing.T, base, name string) adapterInfo {
	t.Helper()
	resp, err := http.Get(base + "/v1/adapters/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var info adapterInfo
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		t.Fatal(err)
	}
	return info
}

// trainThroughAPI sends the set's training pairs to the MicroLoRA named
// name through POST /v1/feedback, waits (up to 10 minutes: the trainer
// runs at the lowest priority) until every one is trained, and returns the
// adapter's state then.
func trainThroughAPI(t *testing.T, base, name string, set *preferenceSet) adapterInfo {
	t.Helper()
	start := getAdapter(t, base, name).Updates
	for i, it := range set.Train {
		var resp map[string]any
		if st := postJSON(t, base, "/v1/feedback", map[string]any{"adapter": name, "prompt": it.Prompt, "chosen": it.Chosen, "rejected": it.Rejected}, &resp); st != 202 {
			t.Fatalf("feedback %d: status %d", i, st)
		}
	}
	deadline := time.Now().Add(10 * time.Minute)
	for {
		info := getAdapter(t, base, name)
		if info.Updates == start+int64(len(set.Train)) {
			return info
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10 minutes, %d of %d pairs are trained", info.Updates-start, len(set.Train))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// feedbackOne sends one training pair to the MicroLoRA named name and
// waits until it is trained, returning the loss of its update.
func feedbackOne(t *testing.T, base, name string, it preferenceItem) float64 {
	t.Helper()
	before := getAdapter(t, base, name).Updates
	if st := postJSON(t, base, "/v1/feedback", map[string]any{"adapter": name, "prompt": it.Prompt, "chosen": it.Chosen, "rejected": it.Rejected}, nil); st != 202 {
		t.Fatalf("feedback: status %d", st)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if info := getAdapter(t, base, name); info.Updates > before {
			return info.Loss
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the pair was not trained in 2 minutes")
	return 0
}

// TestFeedbackRestart kills a server (SIGKILL) half way through training a
// MicroLoRA, once the adapter's file holds its last update, and starts it
// again on the same directory: the adapter's version and counts are as
// they were, and the updates that follow have the losses of a server that
// was never stopped, so the optimiser's moments came back with the factors
// (a new optimiser takes other steps, TestTrainerStateRestores).
func TestFeedbackRestart(t *testing.T) {
	model := testmodel.Synth(t, "tiny-llama3", "F32")
	set := familyPreferences()
	const half = 16
	args := func(dir string) []string {
		return []string{"--model", model, "--adapter-dir", dir, "--threads", "1", "--micro-lora-cpu", "1"}
	}
	whole := startChild(t, args(t.TempDir())...)
	var want []float64
	for _, it := range set.Train {
		want = append(want, feedbackOne(t, whole.base, "blue", it))
	}
	whole.kill()

	dir := t.TempDir()
	first := startChild(t, args(dir)...)
	defer func() { first.kill() }()
	for _, it := range set.Train[:half] {
		feedbackOne(t, first.base, "blue", it)
	}
	live := getAdapter(t, first.base, "blue")
	// The file follows the version in memory within --micro-lora's save
	// interval (2 s).
	deadline := time.Now().Add(time.Minute)
	for {
		a, err := lora.OpenGGUF(filepath.Join(dir, "blue.gguf"))
		if err == nil && a.Training != nil && a.Training.Version == live.Version {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the adapter's file did not reach version %d in a minute (%v)", live.Version, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	first.kill()
	second := startChild(t, args(dir)...)
	defer second.kill()
	back := getAdapter(t, second.base, "blue")
	if back.Version != live.Version || back.Updates != live.Updates || back.Feedback != live.Feedback {
		t.Errorf("after the restart the adapter is %+v, before it %+v", back, live)
	}
	var got []float64
	for _, it := range set.Train[half:] {
		got = append(got, feedbackOne(t, second.base, "blue", it))
	}
	t.Logf("losses of updates %d-%d: never stopped %.5g; killed and restarted %.5g", half+1, len(set.Train), want[half:], got)
	for i, l := range got {
		if w := want[half+i]; math.Abs(l-w) > 1e-4*max(1, math.Abs(w)) {
			t.Errorf("update %d after the restart: loss %.6g, %.6g in the server never stopped", half+i+1, l, w)
		}
	}
}

// TestTrainLoRA runs train-lora on the tiny llama with familyPreferences'
// pairs under each pair objective, shuffled and in the file's order: it
// reports the held-out margin before and after, and writes an adapter that
// loads; a margin that is not positive is refused.
func TestTrainLoRA(t *testing.T) {
	model := testmodel.Synth(t, "tiny-llama3", "F32")
	data := filepath.Join(t.TempDir(), "blue.json")
	b, _ := json.Marshal(familyPreferences())
	if err := os.WriteFile(data, b, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"margin in order", []string{"--objective", "margin", "--in-order"}, 0, "margin after"},
		{"dpo shuffled", []string{"--objective", "dpo"}, 0, "margin after"},
		{"kto", []string{"--objective", "kto", "--margin", "3"}, 0, "margin after"},
		{"margin of 0", []string{"--objective", "margin", "--margin", "0"}, 2, "--margin must be positive"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "a.gguf")
			stdout, stderr, code := run(t, append([]string{"train-lora", "--model", model, "--data", data, "--steps", "3", "--batch", "1", "--out", out}, c.args...)...)
			if code != c.code || !strings.Contains(stdout+stderr, c.want) {
				t.Fatalf("exit %d, %s%s; want exit %d mentioning %q", code, stdout, stderr, c.code, c.want)
			}
			if code != 0 {
				return
			}
			m := testmodel.Load(t, model)
			a, err := lora.Load(out, m.Config, m.File)
			if err != nil {
				t.Fatal(err)
			}
			if len(a.Targets()) != m.Config.Layers || a.Training != nil {
				t.Errorf("the adapter has %d targets (want one ffn_down a block, %d) and training state %+v", len(a.Targets()), m.Config.Layers, a.Training)
			}
		})
	}
}

// TestFeedbackFlood sends feedback naming a new adapter in each request,
// several at once, as issue 30's probe did (3,000 names left 3,006 files
// and 3,002 adapters in memory): at most --micro-lora-max adapters are
// made, the rest are a 409 naming the limit, a prompt longer than the
// context is a 400 that leaves nothing behind, and at most --max-adapters
// are held in memory.
func TestFeedbackFlood(t *testing.T) {
	model := testmodel.Synth(t, "tiny", "F32")
	dir := t.TempDir()
	c, err := parseServeArgs(quietEnv(), []string{"--model", model, "--adapter-dir", dir, "--threads", "1", "--micro-lora-cpu", "1",
		"--micro-lora-max", "3", "--max-adapters", "2"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	base, done := startServe(t, ctx, c)
	waitHealthy(t, base)
	id := strings.TrimSuffix(filepath.Base(model), ".gguf")
	type answer struct {
		status int
		body   string
	}
	send := func(adapter, prompt string) answer {
		b, _ := json.Marshal(map[string]any{"model": id, "adapter": adapter, "prompt": prompt, "chosen": " yes", "rejected": " no"})
		resp, err := http.Post(base+"/v1/feedback", "application/json", bytes.NewReader(b))
		if err != nil {
			t.Error(err)
			return answer{}
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return answer{resp.StatusCode, string(body)}
	}
	// A prompt longer than the context: refused, nothing made.
	if a := send("toolong", strings.Repeat("hello world ", 4000)); a.status != http.StatusBadRequest {
		t.Errorf("a prompt longer than the context: %d %s", a.status, a.body)
	}
	const names, workers = 60, 8
	answers := make(chan answer, names)
	next := make(chan int, names)
	for i := range names {
		next <- i
	}
	close(next)
	for range workers {
		go func() {
			for i := range next {
				answers <- send(fmt.Sprintf("user%d", i), "Once upon a time")
			}
		}()
	}
	counts := map[int]int{}
	for range names {
		a := <-answers
		counts[a.status]++
		if a.status == http.StatusConflict && !strings.Contains(a.body, "adapter_limit_reached") && !strings.Contains(a.body, "--micro-lora-max 3") {
			t.Errorf("a 409 that does not name the limit: %s", a.body)
		}
	}
	if counts[http.StatusAccepted] != 3 || counts[http.StatusConflict] != names-3 {
		t.Errorf("statuses %v, want 3 accepted and %d refused (409)", counts, names-3)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 {
		t.Errorf("%d files in the adapter directory, want 3", len(entries))
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var list struct {
			Data []struct {
				Resident bool `json:"resident"`
			} `json:"data"`
		}
		resp, err := http.Get(base + "/v1/adapters")
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
		if err != nil || len(list.Data) != 3 {
			t.Fatalf("the adapter listing: %v, %d adapters, want 3", err, len(list.Data))
		}
		resident := 0
		for _, in := range list.Data {
			if in.Resident {
				resident++
			}
		}
		if resident <= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d adapters resident, want at most --max-adapters 2", resident)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
