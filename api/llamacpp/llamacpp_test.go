package llamacpp_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ruvllm/ruvllm/api"
	"github.com/ruvllm/ruvllm/backends"
	_ "github.com/ruvllm/ruvllm/backends/native" // opened by name
	"github.com/ruvllm/ruvllm/internal/httpcheck"
	"github.com/ruvllm/ruvllm/internal/testmodel"
	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/models/chat"
	"github.com/ruvllm/ruvllm/models/tokenizer"
	"github.com/ruvllm/ruvllm/session"
)

// server is an api.Server over the synthesized tiny model on the real
// engine.
type server struct {
	url   string
	model *models.Model
	tok   *tokenizer.Tokenizer
	// maxLen is each slot's context.
	maxLen int
}

const (
	testMaxLen   = 256
	testParallel = 2
	testSeed     = 42
)

func startServer(t *testing.T, o api.Options) *server {
	t.Helper()
	return startServerBatch(t, o, 0)
}

// startServerBatch is startServer with an engine that prefills at most
// batch prompt tokens a step (0: its default).
func startServerBatch(t *testing.T, o api.Options, batch int) *server {
	t.Helper()
	return startServerEngine(t, o, backends.EngineOptions{Batch: batch})
}

// startServerEngine is startServer with an engine of options eo (its
// parallel slots, context and end-of-generation tokens set here).
func startServerEngine(t *testing.T, o api.Options, eo backends.EngineOptions) *server {
	t.Helper()
	m := testmodel.Tiny(t)
	b := testmodel.Backend(t, "native", m, backends.Options{Threads: 1, KVTokens: testParallel * testMaxLen})
	eo.Parallel, eo.MaxLen, eo.IsEOG = testParallel, testMaxLen, m.Tokenizer.IsEOG
	eng, err := backends.NewEngine(b, eo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	if o.Version == "" {
		o.Version = "b-test"
	}
	if o.Sampling == nil {
		p := backends.DefaultParams()
		seed := int64(testSeed)
		p.Seed = &seed
		o.Sampling = &p
	}
	s := api.New(o)
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := os.WriteFile(path, []byte("stand-in for the model file"), 0o644); err != nil {
		t.Fatal(err)
	}
	am := &session.Model{ID: "tiny", Tokenizer: m.Tokenizer, Chat: m, Engine: eng, Path: path, TrainedContext: m.Config.ContextLength}
	if err := s.AddModel(am); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
	})
	return &server{url: hs.URL, model: m, tok: m.Tokenizer, maxLen: testMaxLen}
}

// do sends a request with a JSON body (nil: none) and returns the status
// and the body.
func (s *server) do(t *testing.T, method, path string, body any, header ...string) (int, []byte, http.Header) {
	t.Helper()
	var text string
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		text = string(b)
	}
	resp, b := httpcheck.Do(t, method, s.url+path, text, header...)
	return resp.StatusCode, b, resp.Header
}

// post sends a request that must answer 200 and decodes its body into a
// map.
func (s *server) post(t *testing.T, path string, body any) map[string]any {
	t.Helper()
	status, b, _ := s.do(t, "POST", path, body)
	if status != 200 {
		t.Fatalf("POST %s: %d %s", path, status, b)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("POST %s: %v in %s", path, err, b)
	}
	return out
}

// events reads a stream's "data:" events.
func (s *server) events(t *testing.T, path string, body any) []map[string]any {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(s.url+path, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("stream %s: %d %s", path, resp.StatusCode, b)
	}
	var out []map[string]any
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if line == "[DONE]" {
			out = append(out, map[string]any{"[DONE]": true})
			continue
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("event %q: %v", line, err)
		}
		out = append(out, ev)
	}
	return out
}

// errorOf decodes llama-server's {"error": {...}}.
func errorOf(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var e struct {
		Error map[string]any `json:"error"`
	}
	if err := json.Unmarshal(b, &e); err != nil || e.Error == nil {
		t.Fatalf("not an error body: %s", b)
	}
	return e.Error
}

func num(v any) float64 {
	f, _ := v.(float64)
	return f
}

func obj(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func ids(v any) []tokenizer.ID {
	var out []tokenizer.ID
	for _, x := range v.([]any) {
		out = append(out, tokenizer.ID(x.(float64)))
	}
	return out
}

const prompt = "Once upon a time"

// checkTimings checks a timings object against the counts it must hold,
// and its rates against its counts and times.
func checkTimings(t *testing.T, what string, tm map[string]any, promptN, cacheN, predictedN int) {
	t.Helper()
	if int(num(tm["prompt_n"])) != promptN || int(num(tm["cache_n"])) != cacheN || int(num(tm["predicted_n"])) != predictedN {
		t.Errorf("%s: timings %v, want prompt_n %d, cache_n %d, predicted_n %d", what, tm, promptN, cacheN, predictedN)
	}
	for _, k := range []string{"prompt_ms", "predicted_ms", "prompt_per_token_ms", "predicted_per_token_ms", "prompt_per_second", "predicted_per_second"} {
		if v, ok := tm[k].(float64); !ok || v < 0 || math.IsNaN(v) {
			t.Errorf("%s: timings[%s] = %v", what, k, tm[k])
		}
	}
	if ms := num(tm["predicted_ms"]); ms > 0 {
		if want := float64(predictedN) / ms * 1000; math.Abs(num(tm["predicted_per_second"])-want) > 1e-6*want {
			t.Errorf("%s: predicted_per_second %v, want %v", what, tm["predicted_per_second"], want)
		}
		if want := ms / float64(predictedN); math.Abs(num(tm["predicted_per_token_ms"])-want) > 1e-9*want+1e-12 {
			t.Errorf("%s: predicted_per_token_ms %v, want %v", what, tm["predicted_per_token_ms"], want)
		}
	}
}

// POST /completion answers llama-server's object: the text, the counts,
// the settings, the timings measured; a repeated prompt reuses the cache
// unless cache_prompt is false.
func TestCompletion(t *testing.T) {
	s := startServer(t, api.Options{})
	promptIDs := session.EncodePrompt(s.tok, prompt)
	r := s.post(t, "/completion", map[string]any{"prompt": prompt, "n_predict": 8, "temperature": 0})
	if _, ok := r["content"].(string); !ok || r["stop"] != true || r["stop_type"] != "limit" || r["truncated"] != false ||
		r["model"] != "tiny" || int(num(r["tokens_predicted"])) != 8 || int(num(r["tokens_evaluated"])) != len(promptIDs) {
		t.Errorf("response %v", r)
	}
	if _, ok := r["has_new_line"].(bool); !ok {
		t.Errorf("has_new_line %v", r["has_new_line"])
	}
	if toks, ok := r["tokens"].([]any); !ok || len(toks) != 0 {
		t.Errorf("tokens without return_tokens: %v", r["tokens"])
	}
	gs := obj(r["generation_settings"])
	if num(gs["n_predict"]) != 8 || num(gs["seed"]) != testSeed || num(gs["temperature"]) != 0 {
		t.Errorf("generation_settings %v", gs)
	}
	var want strings.Builder
	for _, id := range promptIDs {
		want.WriteString(s.tok.Piece(id))
	}
	if r["prompt"] != want.String() {
		t.Errorf("prompt %q, want %q", r["prompt"], want.String())
	}
	checkTimings(t, "first", obj(r["timings"]), len(promptIDs), 0, 8)
	if slot := num(r["id_slot"]); slot < 0 || slot >= testParallel {
		t.Errorf("id_slot %v", r["id_slot"])
	}
	content := r["content"].(string)

	again := s.post(t, "/completion", map[string]any{"prompt": prompt, "n_predict": 8, "temperature": 0, "return_tokens": true})
	checkTimings(t, "cached", obj(again["timings"]), 1, len(promptIDs)-1, 8)
	if again["content"] != content || len(again["tokens"].([]any)) != 8 || s.tok.Decode(ids(again["tokens"])) == "" {
		t.Errorf("repeated: %q %v, want %q", again["content"], again["tokens"], content)
	}
	fresh := s.post(t, "/completion", map[string]any{"prompt": prompt, "n_predict": 8, "temperature": 0, "cache_prompt": false})
	checkTimings(t, "cache_prompt false", obj(fresh["timings"]), len(promptIDs), 0, 8)

	// /completions is the same route, as llama-server serves it.
	if c := s.post(t, "/completions", map[string]any{"prompt": prompt, "n_predict": 8, "temperature": 0}); c["content"] != content {
		t.Errorf("/completions: %v", c)
	}

	// n_predict -1 stops at the end of the context, truncated.
	long := s.post(t, "/completion", map[string]any{"prompt": prompt, "n_predict": -1, "temperature": 0, "ignore_eos": true})
	if int(num(long["tokens_predicted"])) != s.maxLen-len(promptIDs) || long["truncated"] != true || long["stop_type"] != "limit" {
		t.Errorf("n_predict -1: %v predicted, truncated %v, stop_type %v", long["tokens_predicted"], long["truncated"], long["stop_type"])
	}
	// More than the context holds stops at its end instead of a 400.
	clamp := s.post(t, "/completion", map[string]any{"prompt": prompt, "n_predict": 10000, "temperature": 0, "ignore_eos": true})
	if int(num(clamp["tokens_predicted"])) != s.maxLen-len(promptIDs) || clamp["truncated"] != false {
		t.Errorf("n_predict past the context: %v predicted, truncated %v", clamp["tokens_predicted"], clamp["truncated"])
	}
}

// Prompts come as llama-server takes them: token ids, ids mixed with
// text, {"prompt_string"}, or a list of prompts answered by a list.
func TestCompletionPrompts(t *testing.T) {
	s := startServer(t, api.Options{})
	promptIDs := session.EncodePrompt(s.tok, prompt)
	base := s.post(t, "/completion", map[string]any{"prompt": prompt, "n_predict": 6, "temperature": 0})
	content := base["content"]
	same := func(what string, p any) {
		t.Helper()
		r := s.post(t, "/completion", map[string]any{"prompt": p, "n_predict": 6, "temperature": 0})
		if r["content"] != content || int(num(r["tokens_evaluated"])) != len(promptIDs) {
			t.Errorf("%s: %q (%v tokens), want %q (%d)", what, r["content"], r["tokens_evaluated"], content, len(promptIDs))
		}
	}
	same("token ids", promptIDs)
	same("object", map[string]any{"prompt_string": prompt})
	// The BOS id, then the text: encoded without another BOS.
	withBOS := []any{float64(promptIDs[0])}
	withBOS = append(withBOS, prompt)
	same("mixed", withBOS)

	status, b, _ := s.do(t, "POST", "/completion", map[string]any{"prompt": []any{promptIDs, prompt, map[string]any{"prompt_string": prompt}}, "n_predict": 6, "temperature": 0})
	var list []map[string]any
	if status != 200 || json.Unmarshal(b, &list) != nil || len(list) != 3 {
		t.Fatalf("list of prompts: %d %s", status, b)
	}
	for i, r := range list {
		if r["content"] != content || int(num(r["index"])) != i {
			t.Errorf("prompt %d: %v", i, r)
		}
	}

	for _, bad := range []struct {
		what string
		body map[string]any
	}{
		{"multimodal", map[string]any{"prompt": map[string]any{"prompt_string": "x <__media__>", "multimodal_data": "AAAA"}}},
		{"no prompt", map[string]any{"n_predict": 3}},
		{"empty list", map[string]any{"prompt": []any{}}},
		{"object without prompt_string", map[string]any{"prompt": map[string]any{"text": "x"}}},
		{"token outside the vocabulary", map[string]any{"prompt": []any{1, 1 << 20}}},
		{"unknown field", map[string]any{"prompt": "x", "n_predcit": 3}},
		{"lora by id", map[string]any{"prompt": "x", "lora": []any{map[string]any{"id": 0, "scale": 1}}}},
		{"n_probs too many", map[string]any{"prompt": "x", "n_probs": 21}},
		{"return_progress not a boolean", map[string]any{"prompt": "x", "return_progress": 1}},
	} {
		status, b, _ := s.do(t, "POST", "/completion", bad.body)
		if status != 400 {
			t.Errorf("%s: %d %s", bad.what, status, b)
			continue
		}
		if e := errorOf(t, b); num(e["code"]) != 400 || e["type"] != "invalid_request_error" || e["message"] == "" {
			t.Errorf("%s: error %v", bad.what, e)
		}
	}
}

// A stream sends one event per token, {"content", "tokens", "stop":
// false}, then the final object; the text is the whole response's.
func TestCompletionStream(t *testing.T) {
	s := startServer(t, api.Options{})
	body := map[string]any{"prompt": prompt, "n_predict": 8, "temperature": 0, "n_probs": 2, "timings_per_token": true}
	whole := s.post(t, "/completion", body)
	body["stream"] = true
	evs := s.events(t, "/completion", body)
	if len(evs) != 9 {
		t.Fatalf("%d events, want 8 tokens and the end: %v", len(evs), evs)
	}
	var text strings.Builder
	for i, ev := range evs[:8] {
		toks, _ := ev["tokens"].([]any)
		probs, _ := ev["completion_probabilities"].([]any)
		if ev["stop"] != false || len(toks) != 1 || len(probs) != 1 || int(num(ev["tokens_predicted"])) != i+1 || obj(ev["timings"]) == nil {
			t.Errorf("event %d: %v", i, ev)
		}
		text.WriteString(ev["content"].(string))
	}
	last := evs[8]
	if last["stop"] != true || last["content"] != "" || last["stop_type"] != "limit" || obj(last["generation_settings"]) == nil {
		t.Errorf("final event %v", last)
	}
	checkTimings(t, "stream", obj(last["timings"]), int(num(whole["tokens_evaluated"]))-int(num(obj(last["timings"])["cache_n"])),
		int(num(obj(last["timings"])["cache_n"])), 8)
	if text.String() != whole["content"] {
		t.Errorf("streamed %q, whole %q", text.String(), whole["content"])
	}
}

// n_probs gives each token's log-probability and its alternatives;
// post_sampling_probs gives probabilities of the distribution drawn from,
// all the mass on the chosen token when greedy.
func TestCompletionProbabilities(t *testing.T) {
	s := startServer(t, api.Options{})
	r := s.post(t, "/completion", map[string]any{"prompt": prompt, "n_predict": 5, "temperature": 0, "n_probs": 4, "return_tokens": true})
	probs := r["completion_probabilities"].([]any)
	toks := ids(r["tokens"])
	if len(probs) != 5 {
		t.Fatalf("%d probabilities", len(probs))
	}
	for i, p := range probs {
		p := obj(p)
		top := p["top_logprobs"].([]any)
		if tokenizer.ID(num(p["id"])) != toks[i] || p["token"] != s.tok.Piece(toks[i]) || num(p["logprob"]) > 0 || len(top) != 4 || p["bytes"] == nil {
			t.Errorf("token %d: %v", i, p)
		}
		// Greedy: the chosen token is the most likely.
		if num(obj(top[0])["id"]) != num(p["id"]) || num(obj(top[0])["logprob"]) != num(p["logprob"]) {
			t.Errorf("token %d: top %v", i, top[0])
		}
	}
	r = s.post(t, "/completion", map[string]any{"prompt": prompt, "n_predict": 5, "temperature": 0, "n_probs": 4, "post_sampling_probs": true})
	for i, p := range r["completion_probabilities"].([]any) {
		p := obj(p)
		top := p["top_probs"].([]any)
		if num(p["prob"]) != 1 || len(top) != 4 || num(obj(top[0])["prob"]) != 1 || num(obj(top[1])["prob"]) != 0 || p["logprob"] != nil {
			t.Errorf("post-sampling token %d: %v", i, p)
		}
	}
}

// Stop words, response_fields and llama-server's forms of logit_bias.
func TestCompletionFields(t *testing.T) {
	s := startServer(t, api.Options{})
	r := s.post(t, "/completion", map[string]any{"prompt": prompt, "n_predict": 12, "temperature": 0, "return_tokens": true})
	content := r["content"].(string)
	toks := ids(r["tokens"])
	t.Logf("tiny writes %q", content)

	// A stop word from the middle of the text.
	if len(content) < 6 {
		t.Fatalf("content %q is too short for a stop word", content)
	}
	word := content[len(content)/2 : len(content)/2+3]
	st := s.post(t, "/completion", map[string]any{"prompt": prompt, "n_predict": 12, "temperature": 0, "stop": []string{"zzzz-none", word}})
	if at := strings.Index(content, word); st["stop_type"] != "word" || st["stopping_word"] != word || st["content"] != content[:at] {
		t.Errorf("stop %q: %v %v %q, want %q", word, st["stop_type"], st["stopping_word"], st["content"], content[:at])
	}

	f := s.post(t, "/completion", map[string]any{"prompt": prompt, "n_predict": 4, "temperature": 0,
		"response_fields": []string{"content", "generation_settings/n_predict", "timings/predicted_n", "no/such"}})
	if len(f) != 3 || num(f["generation_settings/n_predict"]) != 4 || num(f["timings/predicted_n"]) != 4 || f["content"] == nil {
		t.Errorf("response_fields: %v", f)
	}

	// The first token banned by id (false and -100), then by its text.
	first := toks[0]
	for _, lb := range []any{[]any{[]any{first, false}}, map[string]any{jsonKey(first): -100}} {
		b := s.post(t, "/completion", map[string]any{"prompt": prompt, "n_predict": 12, "temperature": 0, "return_tokens": true, "logit_bias": lb})
		if slices.Contains(ids(b["tokens"]), first) {
			t.Errorf("logit_bias %v: %v holds %d", lb, b["tokens"], first)
		}
	}
	text := s.tok.Piece(first)
	banned := s.tok.Encode(text, tokenizer.EncodeOptions{})
	for _, lb := range []any{[]any{[]any{text, -100}}, map[string]any{text: false}} {
		b := s.post(t, "/completion", map[string]any{"prompt": prompt, "n_predict": 12, "temperature": 0, "return_tokens": true, "logit_bias": lb})
		for _, id := range ids(b["tokens"]) {
			if slices.Contains(banned, id) {
				t.Errorf("logit_bias %v: %v holds %d of %v", lb, b["tokens"], id, banned)
			}
		}
	}
}

func jsonKey(id tokenizer.ID) string {
	b, _ := json.Marshal(id)
	return string(b)
}

// A prompt the context cannot hold is llama-server's
// exceed_context_size_error, on both the native and the OpenAI routes.
func TestContextExceeded(t *testing.T) {
	s := startServer(t, api.Options{})
	long := strings.Repeat("Once upon a time there was a cat. ", 60)
	n := len(session.EncodePrompt(s.tok, long))
	if n <= s.maxLen {
		t.Fatalf("the long prompt has only %d tokens", n)
	}
	status, b, _ := s.do(t, "POST", "/completion", map[string]any{"prompt": long})
	e := errorOf(t, b)
	if status != 400 || e["type"] != "exceed_context_size_error" || int(num(e["n_prompt_tokens"])) != n || int(num(e["n_ctx"])) != s.maxLen ||
		!strings.Contains(e["message"].(string), "exceeds the available context size") {
		t.Errorf("/completion: %d %v", status, e)
	}
	status, b, _ = s.do(t, "POST", "/v1/chat/completions", map[string]any{"messages": []any{map[string]any{"role": "user", "content": long}}})
	e = errorOf(t, b)
	if status != 400 || e["type"] != "exceed_context_size_error" || e["code"] != session.CodeContextLength || num(e["n_prompt_tokens"]) <= float64(s.maxLen) || int(num(e["n_ctx"])) != s.maxLen {
		t.Errorf("chat: %d %v", status, e)
	}
}

// The server's --n-predict caps every request and is the limit of those
// that give none, on every route; its seed is the requests' default.
func TestServerTokenLimit(t *testing.T) {
	s := startServer(t, api.Options{MaxTokens: 5})
	for _, body := range []map[string]any{{"prompt": prompt, "ignore_eos": true}, {"prompt": prompt, "n_predict": 50, "ignore_eos": true}} {
		r := s.post(t, "/completion", body)
		if num(r["tokens_predicted"]) != 5 || num(obj(r["generation_settings"])["n_predict"]) != 5 || r["stop_type"] != "limit" || r["truncated"] != false {
			t.Errorf("%v: %v predicted, settings %v", body, r["tokens_predicted"], obj(r["generation_settings"])["n_predict"])
		}
	}
	c := s.post(t, "/v1/chat/completions", map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}, "max_tokens": 100, "ignore_eos": true})
	if u := obj(c["usage"]); num(u["completion_tokens"]) != 5 {
		t.Errorf("chat usage %v", u)
	}
	// Unseeded requests draw from the server's seed: the same text.
	body := map[string]any{"prompt": prompt, "temperature": 1}
	if a, b := s.post(t, "/completion", body), s.post(t, "/completion", body); a["content"] != b["content"] {
		t.Errorf("the server's seed gave %q and %q", a["content"], b["content"])
	}
}

// GET /props and /slots show the slots and the server's defaults; /slots
// is 501 when off; POST /props changes nothing.
func TestPropsAndSlots(t *testing.T) {
	s := startServer(t, api.Options{MaxTokens: 64})
	status, b, _ := s.do(t, "GET", "/props", nil)
	var p map[string]any
	if status != 200 || json.Unmarshal(b, &p) != nil {
		t.Fatalf("/props: %d %s", status, b)
	}
	def := obj(p["default_generation_settings"])
	if num(p["total_slots"]) != testParallel || !strings.HasSuffix(p["model_path"].(string), ".gguf") || num(def["n_ctx"]) != testMaxLen ||
		num(obj(def["params"])["seed"]) != testSeed || num(obj(def["params"])["n_predict"]) != 64 || p["build_info"] != "b-test" || p["endpoint_slots"] != false {
		t.Errorf("/props: %s", b)
	}
	status, b, _ = s.do(t, "GET", "/slots", nil)
	if e := errorOf(t, b); status != 501 || e["type"] != "not_supported_error" {
		t.Errorf("/slots off: %d %s", status, b)
	}
	if status, b, _ = s.do(t, "POST", "/props", map[string]any{"n_predict": 3}); status != 501 {
		t.Errorf("POST /props: %d %s", status, b)
	}

	s = startServer(t, api.Options{Slots: true})
	s.post(t, "/completion", map[string]any{"prompt": prompt, "n_predict": 3, "id_slot": 1, "seed": 7})
	status, b, _ = s.do(t, "GET", "/slots", nil)
	var slots []map[string]any
	if status != 200 || json.Unmarshal(b, &slots) != nil || len(slots) != testParallel {
		t.Fatalf("/slots: %d %s", status, b)
	}
	for i, sl := range slots {
		seed := float64(testSeed)
		if i == 1 {
			seed = 7 // what it ran last
		}
		if num(sl["id"]) != float64(i) || num(sl["n_ctx"]) != testMaxLen || sl["is_processing"] != false || num(obj(sl["params"])["seed"]) != seed {
			t.Errorf("slot %d: %v", i, sl)
		}
	}
}

// Slot actions: a slot's cache saved to a file, erased, and restored into
// another slot, which then reuses it; file names cannot leave the
// directory.
func TestSlotActions(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, api.Options{SlotSavePath: dir, Slots: true})
	body := map[string]any{"prompt": prompt, "n_predict": 10, "temperature": 0, "id_slot": 1, "ignore_eos": true}
	r := s.post(t, "/completion", body)
	cached := int(num(r["tokens_cached"]))
	sv := s.post(t, "/slots/1?action=save", map[string]any{"filename": "one.bin"})
	st, err := os.Stat(filepath.Join(dir, "one.bin"))
	if err != nil || int(num(sv["n_saved"])) != cached || int64(num(sv["n_written"])) != st.Size() || sv["filename"] != "one.bin" || num(sv["id_slot"]) != 1 {
		t.Errorf("save: %v (%v)", sv, err)
	}
	if er := s.post(t, "/slots/1?action=erase", nil); int(num(er["n_erased"])) != cached {
		t.Errorf("erase: %v", er)
	}
	// Erased: the prompt is computed again in slot 1.
	r = s.post(t, "/completion", body)
	promptN := int(num(r["tokens_evaluated"]))
	checkTimings(t, "after erase", obj(r["timings"]), promptN, 0, 10)
	rs := s.post(t, "/slots/0?action=restore", map[string]any{"filename": "one.bin"})
	if int(num(rs["n_restored"])) != cached || int64(num(rs["n_read"])) != st.Size() {
		t.Errorf("restore: %v", rs)
	}
	body["id_slot"] = 0
	r0 := s.post(t, "/completion", body)
	checkTimings(t, "after restore", obj(r0["timings"]), 1, promptN-1, 10)
	if r0["content"] != r["content"] || num(r0["id_slot"]) != 0 {
		t.Errorf("restored slot 0 wrote %q in slot %v, slot 1 %q", r0["content"], r0["id_slot"], r["content"])
	}

	for _, bad := range []struct {
		path   string
		body   any
		status int
	}{
		{"/slots/0?action=save", map[string]any{"filename": "../escape.bin"}, 400},
		{"/slots/0?action=save", map[string]any{"filename": "a/b.bin"}, 400},
		{"/slots/0?action=save", map[string]any{"filename": ".hidden"}, 400},
		{"/slots/0?action=save", map[string]any{"filename": ""}, 400},
		{"/slots/0?action=save", map[string]any{}, 400},
		{"/slots/0?action=restore", map[string]any{"filename": "missing.bin"}, 404},
		{"/slots/0?action=dance", nil, 400},
		{"/slots/9?action=erase", nil, 400},
		{"/slots/x?action=erase", nil, 400},
	} {
		status, b, _ := s.do(t, "POST", bad.path, bad.body)
		if status != bad.status {
			t.Errorf("%s %v: %d %s, want %d", bad.path, bad.body, status, b, bad.status)
		}
	}
	// A file of another kind is refused, and leaves the slot as it was.
	os.WriteFile(filepath.Join(dir, "junk.bin"), []byte("RVLLSLOT but not really a slot file at all"), 0o644)
	if status, b, _ := s.do(t, "POST", "/slots/0?action=restore", map[string]any{"filename": "junk.bin"}); status != 400 {
		t.Errorf("junk file: %d %s", status, b)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() != "one.bin" && e.Name() != "junk.bin" {
			t.Errorf("left in the directory: %s", e.Name())
		}
	}

	off := startServer(t, api.Options{})
	if status, b, _ := off.do(t, "POST", "/slots/0?action=erase", nil); status != 501 {
		t.Errorf("without a save path: %d %s", status, b)
	}
}

// POST /apply-template renders the chat as a chat completion would see it.
func TestApplyTemplate(t *testing.T) {
	s := startServer(t, api.Options{})
	msgs := []any{map[string]any{"role": "system", "content": "Be brief."}, map[string]any{"role": "user", "content": "Hi there"}}
	r := s.post(t, "/apply-template", map[string]any{"messages": msgs})
	rendered, err := s.model.RenderChat(chatInput(msgs, true))
	if err != nil {
		t.Fatal(err)
	}
	if r["prompt"] != rendered {
		t.Errorf("prompt %q, want %q", r["prompt"], rendered)
	}
	r = s.post(t, "/apply-template", map[string]any{"messages": msgs, "add_generation_prompt": false})
	noGen, _ := s.model.RenderChat(chatInput(msgs, false))
	if r["prompt"] != noGen || noGen == rendered {
		t.Errorf("without the generation prompt %q, want %q", r["prompt"], noGen)
	}
	if status, b, _ := s.do(t, "POST", "/apply-template", map[string]any{"messages": "hi"}); status != 400 {
		t.Errorf("bad messages: %d %s", status, b)
	}
}

func chatInput(msgs []any, addGen bool) chat.Input {
	in := chat.Input{AddGenerationPrompt: addGen}
	for _, m := range msgs {
		in.Messages = append(in.Messages, chat.Message(m.(map[string]any)))
	}
	return in
}

// return_progress streams the prompt's progress, a chunk at a time,
// before the tokens: on the native route and on the chat route.
func TestReturnProgress(t *testing.T) {
	s := startServerBatch(t, api.Options{}, 4)
	long := "Once upon a time there was a cat who liked to sit in the sun"
	// check checks the progress events of a prompt of n tokens of which
	// cache were reused: one per chunk of 4, in order, the last whole.
	check := func(what string, evs []map[string]any, n, cache int) {
		t.Helper()
		var progress []map[string]any
		for i, ev := range evs {
			if p := obj(ev["prompt_progress"]); p != nil {
				if len(progress) > 0 && i != progress[len(progress)-1]["at"].(int)+1 {
					t.Errorf("%s: progress after content: %v", what, evs)
				}
				p["at"] = i
				progress = append(progress, p)
			}
		}
		if want := (n - cache + 3) / 4; len(progress) != want {
			t.Fatalf("%s: %d progress events, want %d: %v", what, len(progress), want, progress)
		}
		for i, p := range progress {
			want := min(cache+4*(i+1), n)
			if int(num(p["total"])) != n || int(num(p["cache"])) != cache || int(num(p["processed"])) != want {
				t.Errorf("%s: progress %d: %v, want total %d, cache %d, processed %d", what, i, p, n, cache, want)
			}
		}
	}
	n := len(session.EncodePrompt(s.tok, long))
	evs := s.events(t, "/completion", map[string]any{"prompt": long, "n_predict": 3, "stream": true, "return_progress": true, "cache_prompt": false})
	check("native", evs, n, 0)

	// The chat route: the role first, then progress, then content; the
	// same chat again reuses all but the last token.
	msgs := []any{map[string]any{"role": "user", "content": long}}
	body := map[string]any{"messages": msgs, "max_tokens": 3, "stream": true, "return_progress": true}
	rendered, err := s.model.RenderChat(chatInput(msgs, true))
	if err != nil {
		t.Fatal(err)
	}
	n = len(session.EncodePrompt(s.tok, rendered))
	evs = s.events(t, "/v1/chat/completions", body)
	if obj(evs[0]["prompt_progress"]) != nil {
		t.Errorf("the first chunk is progress: %v", evs[0])
	}
	cache := int(num(obj(evs[1]["prompt_progress"])["cache"]))
	check("chat", evs[1:], n, cache)
	evs = s.events(t, "/v1/chat/completions", body)
	check("chat again", evs[1:], n, n-1)
}
