package api

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	wire "github.com/ruvllm/ruvllm/api/openai"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/internal/testmodel"
	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/session"
	"github.com/ruvllm/ruvllm/sona"
)

// routeServer serves two real models behind the router: stories260K from
// ../shared (the test skips without it) and the synthesized tiny model,
// loaded on demand.
type routeServer struct {
	*httptest.Server
	api    *Server
	router *sona.Router
}

func startRouteServer(t *testing.T, store string) *routeServer {
	t.Helper()
	var st sona.Store
	if store != "" {
		fs, err := sona.OpenFileStore(store)
		if err != nil {
			t.Fatal(err)
		}
		st = fs
	}
	router, err := sona.New(sona.Options{Seed: 7, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { router.Close() })
	s := New(Options{Version: "test-version", Router: router})
	t.Cleanup(s.Close)
	for _, m := range []struct {
		id       string
		model    *models.Model
		onDemand bool
	}{
		{"stories260K", testmodel.Shared(t, "models", "stories260K.gguf"), false},
		{"tiny", testmodel.Tiny(t), true},
	} {
		open := func() (*engineWithBackend, error) {
			b, err := backends.Open("native", m.model, backends.Options{Threads: 1, KVTokens: 2 * 256})
			if err != nil {
				return nil, err
			}
			eng, err := backends.NewEngine(b, backends.EngineOptions{Parallel: 2, MaxLen: 256, IsEOG: m.model.Tokenizer.IsEOG})
			if err != nil {
				b.Close()
				return nil, err
			}
			return &engineWithBackend{eng, b}, nil
		}
		am := &session.Model{ID: m.id, Tokenizer: m.model.Tokenizer, Chat: m.model}
		if m.onDemand {
			am.Load = func() (session.LoadedEngine, error) { return open() }
			am.MaxLen = 256
		} else {
			eng, err := open()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { eng.Close() })
			am.Engine = eng
		}
		if err := s.AddModel(am); err != nil {
			t.Fatal(err)
		}
	}
	return &routeServer{Server: startHTTP(t, s), api: s, router: router}
}

// engineWithBackend closes its backend after the engine.
type engineWithBackend struct {
	*backends.Engine
	b backends.Backend
}

func (e *engineWithBackend) Close() error {
	e.Engine.Close()
	return e.b.Close()
}

// routed is what a routed completion answered.
type routed struct {
	status          int
	id, model, text string
	route           string
	usage           wire.Usage
	body            string
}

func (rs *routeServer) post(t *testing.T, path string, body any) routed {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(rs.URL+path, "application/json", strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := routed{status: resp.StatusCode, route: resp.Header.Get("X-Route")}
	var sb strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		sb.WriteString(sc.Text() + "\n")
	}
	out.body = sb.String()
	var r struct {
		ID      string `json:"id"`
		Model   string `json:"model"`
		Choices []struct {
			Text    string `json:"text"`
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
		Usage wire.Usage `json:"usage"`
	}
	if json.Unmarshal([]byte(out.body), &r) == nil {
		out.id, out.model, out.usage = r.ID, r.Model, r.Usage
		if len(r.Choices) > 0 {
			out.text = r.Choices[0].Text + r.Choices[0].Message.Content
		}
	}
	return out
}

// stories and sums are two kinds of prompts, each with its wording drawn
// at random, so that the router must generalise from the words the kinds
// share rather than remember prompts.
var (
	storyHeads = []string{"Once upon a time", "One day", "Long ago", "In a small village", "There was once"}
	storyWhos  = []string{"a little girl", "a brave dog", "an old king", "a tiny bird", "a shy boy", "a kind witch"}
	storyWhats = []string{"found a ball", "lost her hat", "met a dragon", "went to the park", "baked a cake", "saw the sea"}
	sumVerbs   = []string{"Compute", "Calculate", "What is", "Work out", "Evaluate"}
	sumOps     = []string{"the sum of", "the product of", "the difference between", "the quotient of"}
)

func storyPrompt(rng *rand.Rand) string {
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	return fmt.Sprintf("%s %s %s.", pick(storyHeads), pick(storyWhos), pick(storyWhats))
}

func sumPrompt(rng *rand.Rand) string {
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	return fmt.Sprintf("%s %s %d and %d?", pick(sumVerbs), pick(sumOps), rng.IntN(1000), rng.IntN(1000))
}

// TestRouterEndToEnd drives "model": "auto" through the HTTP API with two
// real models: it serves (the response names the model that answered and
// X-Route says why), streams, counts usage, loads the model on demand it
// chooses, and learns from ratings: once users rate tiny bad for stories
// and stories260K bad for sums, each kind goes to the other model — and a
// router reopened from its store still knows it.
func TestRouterEndToEnd(t *testing.T) {
	store := filepath.Join(t.TempDir(), "route.log")
	rs := startRouteServer(t, store)

	t.Run("serves", func(t *testing.T) {
		r := rs.post(t, "/v1/completions", map[string]any{"model": "auto", "prompt": "Once upon a time", "max_tokens": 6, "temperature": 0})
		if r.status != http.StatusOK {
			t.Fatalf("status %d: %s", r.status, r.body)
		}
		if r.model != "stories260K" && r.model != "tiny" {
			t.Errorf("model %q: not a served model", r.model)
		}
		if !strings.HasPrefix(r.route, r.model+"; score=") || !strings.Contains(r.route, "explore=") || !strings.Contains(r.route, "; decide_us=") {
			t.Errorf("X-Route %q does not name %s and why", r.route, r.model)
		}
		if !strings.HasPrefix(r.id, "cmpl-") || r.usage.CompletionTokens < 1 || r.usage.CompletionTokens > 6 || r.usage.PromptTokens < 2 ||
			r.usage.TotalTokens != r.usage.PromptTokens+r.usage.CompletionTokens {
			t.Errorf("id %q usage %+v", r.id, r.usage)
		}
	})

	t.Run("streams", func(t *testing.T) {
		r := rs.post(t, "/v1/chat/completions", map[string]any{"model": "auto", "stream": true, "stream_options": map[string]any{"include_usage": true},
			"max_tokens": 5, "messages": []any{map[string]any{"role": "user", "content": "Tell me a story."}}})
		if r.status != http.StatusOK || !strings.HasSuffix(r.body, "data: [DONE]\n\n") {
			t.Fatalf("status %d: %s", r.status, r.body)
		}
		name := strings.SplitN(r.route, ";", 2)[0]
		var chunks, usageChunks int
		for line := range strings.Lines(r.body) {
			data, ok := strings.CutPrefix(strings.TrimSpace(line), "data: ")
			if !ok || data == "[DONE]" {
				continue
			}
			var c struct {
				ID    string      `json:"id"`
				Model string      `json:"model"`
				Usage *wire.Usage `json:"usage"`
			}
			if err := json.Unmarshal([]byte(data), &c); err != nil {
				t.Fatal(err)
			}
			chunks++
			if c.Model != name || !strings.HasPrefix(c.ID, "chatcmpl-") {
				t.Errorf("chunk model %q id %q; X-Route names %q", c.Model, c.ID, name)
			}
			if c.Usage != nil {
				usageChunks++
				if c.Usage.CompletionTokens < 1 || c.Usage.CompletionTokens > 5 {
					t.Errorf("usage %+v", *c.Usage)
				}
			}
		}
		if chunks < 2 || usageChunks != 1 {
			t.Errorf("%d chunks, %d with usage", chunks, usageChunks)
		}
	})

	t.Run("listed", func(t *testing.T) {
		resp, err := http.Get(rs.URL + "/v1/models")
		if err != nil {
			t.Fatal(err)
		}
		var l modelList
		err = json.NewDecoder(resp.Body).Decode(&l)
		resp.Body.Close()
		if err != nil || len(l.Data) != 3 || l.Data[2].ID != "auto" || l.Data[2].MaxModelLen != 256 {
			t.Errorf("models %+v, %v; want the router's card last", l.Data, err)
		}
		resp, err = http.Get(rs.URL + "/v1/models/auto")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET /v1/models/auto: %d", resp.StatusCode)
		}
	})

	t.Run("refused where it cannot route", func(t *testing.T) {
		r := rs.post(t, "/tokenize", map[string]any{"model": "auto", "content": "hi"})
		if r.status != http.StatusBadRequest || !strings.Contains(r.body, "router") {
			t.Errorf("tokenize with auto: %d %s", r.status, r.body)
		}
		r = rs.post(t, "/v1/completions", map[string]any{"model": "auto", "prompt": "hi", "max_tokens": 2, "route_cost_weight": -1})
		if r.status != http.StatusBadRequest || !strings.Contains(r.body, "route_cost_weight") {
			t.Errorf("negative route_cost_weight: %d %s", r.status, r.body)
		}
		r = rs.post(t, "/v1/completions", map[string]any{"model": "tiny", "prompt": "hi", "max_tokens": 2, "route_cost_weight": 1})
		if r.status != http.StatusBadRequest || !strings.Contains(r.body, "route_cost_weight") {
			t.Errorf("route_cost_weight without the router: %d %s", r.status, r.body)
		}
	})

	// bad says which model users dislike for which kind of prompt.
	bad := map[bool]string{true: "tiny", false: "stories260K"}
	rng := rand.New(rand.NewPCG(15, 1))
	ask := func(t *testing.T, story bool) routed {
		t.Helper()
		p := sumPrompt(rng)
		if story {
			p = storyPrompt(rng)
		}
		r := rs.post(t, "/v1/completions", map[string]any{"model": "auto", "prompt": p, "max_tokens": 3, "temperature": 0})
		if r.status != http.StatusOK {
			t.Fatalf("status %d: %s", r.status, r.body)
		}
		return r
	}
	t.Run("learns from ratings", func(t *testing.T) {
		for i := range 60 {
			story := i%2 == 0
			r := ask(t, story)
			rating := 1
			if r.model == bad[story] {
				rating = -1
			}
			fb := rs.post(t, "/v1/feedback", map[string]any{"completion_id": r.id, "rating": rating})
			if fb.status != http.StatusAccepted {
				t.Fatalf("feedback: %d %s", fb.status, fb.body)
			}
		}
		wrong := map[bool]int{}
		for i := range 40 {
			story := i%2 == 0
			if r := ask(t, story); r.model == bad[story] {
				wrong[story]++
			}
		}
		// Exploration may still try the disliked model now and then.
		if wrong[true] > 2 || wrong[false] > 2 {
			t.Errorf("after the ratings, %d of 20 stories went to %s and %d of 20 sums to %s", wrong[true], bad[true], wrong[false], bad[false])
		}
	})

	t.Run("a restart does not forget", func(t *testing.T) {
		rs.router.Close()
		again := startRouteServer(t, store)
		wrong := 0
		for i := range 20 {
			story := i%2 == 0
			p := sumPrompt(rng)
			if story {
				p = storyPrompt(rng)
			}
			r := again.post(t, "/v1/completions", map[string]any{"model": "auto", "prompt": p, "max_tokens": 2})
			if r.status != http.StatusOK {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			if r.model == bad[story] {
				wrong++
			}
		}
		if wrong > 2 {
			t.Errorf("after a restart %d of 20 prompts went to the model rated bad for them", wrong)
		}
	})
}

// TestRouterAvoidsAModelThatFailsToLoad: a model on demand whose loads
// fail answers 503, and the router learns from those failures to send the
// requests to the model that works.
func TestRouterAvoidsAModelThatFailsToLoad(t *testing.T) {
	router, err := sona.New(sona.Options{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	broken, working := &demandModel{id: "broken"}, &demandModel{id: "working"}
	broken.fail.Store(true)
	hs, _ := demandServer(t, Options{Router: router}, broken, working)
	failed, late, last := 0, 0, ""
	for i := range 40 {
		resp, b := do(t, "POST", hs.URL+"/v1/chat/completions", fmt.Sprintf(`{"model": "auto", "max_tokens": 2, "messages": [{"role": "user", "content": "question %d"}]}`, i))
		switch {
		case resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(string(b), "out of memory"):
			failed++
			last = "broken"
		case resp.StatusCode == http.StatusOK:
			last = decode[wire.ChatCompletion](t, b).Model
		default:
			t.Fatalf("status %d: %s", resp.StatusCode, b)
		}
		if i >= 20 && last == "broken" {
			late++
		}
	}
	// Exploration may try it again now and then, never often.
	if failed == 0 || failed > 6 || late > 2 {
		t.Errorf("%d of 40 requests went to the model that fails to load, %d of the last 20", failed, late)
	}
}

// TestRouterStatus: the router's card says loaded only while a model it can
// choose is loaded.
func TestRouterStatus(t *testing.T) {
	router, err := sona.New(sona.Options{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	a, b := &demandModel{id: "a"}, &demandModel{id: "b"}
	hs, _ := demandServer(t, Options{Router: router, KeepAlive: time.Hour}, a, b)
	status := func() string {
		t.Helper()
		_, body := do(t, "GET", hs.URL+"/v1/models/auto", "")
		return decode[modelObject](t, body).Status.Value
	}
	if got := status(); got != "unloaded" {
		t.Errorf("with every model unloaded the router is %q", got)
	}
	if resp, body := do(t, "POST", hs.URL+"/v1/completions", completion("a", "")); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if got := status(); got != "loaded" {
		t.Errorf("with a model loaded the router is %q", got)
	}
}
