package api

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	wire "github.com/ruvllm/ruvllm/api/openai"

	"github.com/ruvllm/ruvllm/models/chat"
	"github.com/ruvllm/ruvllm/session"
)

// closingEngine is a fake engine loaded on demand, which counts its closes.
type closingEngine struct {
	*fakeEngine
	closed *atomic.Int32
}

func (e closingEngine) Close() error { e.closed.Add(1); return nil }

// demandModel is a model on demand over fake engines, with counters.
type demandModel struct {
	id            string
	loads, closes atomic.Int32
	// fail makes the next loads fail; delay slows each load.
	fail  atomic.Bool
	delay time.Duration
	// setup prepares each engine loaded.
	setup func(*fakeEngine)
}

// demandServer serves the given models on demand with o.
func demandServer(t *testing.T, o Options, models ...*demandModel) (*httptest.Server, *Server) {
	t.Helper()
	tk := testTokenizer(t)
	tmpl, err := chat.Parse(chatMLRaising)
	if err != nil {
		t.Fatal(err)
	}
	s := New(o)
	for _, dm := range models {
		dm := dm
		load := func() (session.LoadedEngine, error) {
			time.Sleep(dm.delay)
			if dm.fail.Load() {
				return nil, errors.New("out of memory")
			}
			dm.loads.Add(1)
			eng := newFakeEngine(tk)
			if dm.setup != nil {
				dm.setup(eng)
			}
			return closingEngine{eng, &dm.closes}, nil
		}
		if err := s.AddModel(&session.Model{ID: dm.id, Tokenizer: tk, Chat: templateChat{tmpl}, Load: load, MaxLen: 256}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(s.Close)
	return startHTTP(t, s), s
}

// statusOf is the listed status of model id.
func statusOf(t *testing.T, url, id string) string {
	t.Helper()
	_, b := do(t, "GET", url+"/v1/models/"+id, "")
	return decode[modelObject](t, b).Status.Value
}

// eventually waits up to two seconds for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("still not %s after 2s", what)
}

func completion(model, extra string) string {
	return `{"model":"` + model + `","prompt":"Hello","max_tokens":3` + extra + `}`
}

func TestModelOnDemand(t *testing.T) {
	a := &demandModel{id: "a"}
	hs, _ := demandServer(t, Options{}, a)
	if got := statusOf(t, hs.URL, "a"); got != "unloaded" {
		t.Fatalf("before any request: %q", got)
	}
	// Requests at once share one load.
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, b := do(t, "POST", hs.URL+"/v1/completions", completion("a", ""))
			if resp.StatusCode != 200 {
				t.Errorf("status %d: %s", resp.StatusCode, b)
			}
		}()
	}
	wg.Wait()
	if a.loads.Load() != 1 || statusOf(t, hs.URL, "a") != "loaded" {
		t.Fatalf("%d loads, status %q; want one load, loaded", a.loads.Load(), statusOf(t, hs.URL, "a"))
	}
	m := decode[modelObject](t, func() []byte { _, b := do(t, "GET", hs.URL+"/v1/models/a", ""); return b }())
	if m.MaxModelLen != 256 {
		t.Fatalf("max_model_len %d", m.MaxModelLen)
	}
}

func TestKeepAlive(t *testing.T) {
	a := &demandModel{id: "a"}
	hs, _ := demandServer(t, Options{KeepAlive: 50 * time.Millisecond}, a)
	tests := []struct {
		name, keepAlive string
		unloaded        bool
	}{
		{"the server's keep-alive ends", "", true},
		{"0 unloads after the request", `,"keep_alive":0`, true},
		{"a duration", `,"keep_alive":"10m"`, false},
		{"negative keeps it", `,"keep_alive":-1`, false},
		{"seconds as a string", `,"keep_alive":"0"`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := a.closes.Load()
			resp, b := do(t, "POST", hs.URL+"/v1/completions", completion("a", tt.keepAlive))
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			if tt.unloaded {
				eventually(t, "unloaded", func() bool { return a.closes.Load() == before+1 && statusOf(t, hs.URL, "a") == "unloaded" })
			} else {
				time.Sleep(150 * time.Millisecond)
				if a.closes.Load() != before || statusOf(t, hs.URL, "a") != "loaded" {
					t.Fatalf("unloaded although keep_alive kept it")
				}
			}
		})
	}
	for _, bad := range []string{`"soon"`, `true`, `[1]`, `"1e999"`} {
		resp, b := do(t, "POST", hs.URL+"/v1/completions", completion("a", `,"keep_alive":`+bad))
		wantError(t, "keep_alive "+bad, resp, b, 400, session.CodeInvalidValue, "keep_alive")
	}
}

func TestMaxLoaded(t *testing.T) {
	a, b := &demandModel{id: "a"}, &demandModel{id: "b"}
	slow := make(chan struct{})
	// a's engine streams slowly, so that a request can hold it.
	a.setup = func(e *fakeEngine) { e.delay = 20 * time.Millisecond }
	hs, _ := demandServer(t, Options{MaxLoaded: 1, KeepAlive: session.KeepForever}, a, b)
	if resp, body := do(t, "POST", hs.URL+"/v1/completions", completion("a", "")); resp.StatusCode != 200 {
		t.Fatalf("a: %d %s", resp.StatusCode, body)
	}
	// b takes a's place: a is idle, so it is unloaded first.
	if resp, body := do(t, "POST", hs.URL+"/v1/completions", completion("b", "")); resp.StatusCode != 200 {
		t.Fatalf("b: %d %s", resp.StatusCode, body)
	}
	if a.closes.Load() != 1 || statusOf(t, hs.URL, "a") != "unloaded" || statusOf(t, hs.URL, "b") != "loaded" {
		t.Fatalf("a closed %d times, a %s, b %s", a.closes.Load(), statusOf(t, hs.URL, "a"), statusOf(t, hs.URL, "b"))
	}
	// While a long request holds a, b must wait for it rather than
	// unload it: the long request ends whole, and only then is a unloaded.
	var long []byte
	go func() {
		defer close(slow)
		_, long = do(t, "POST", hs.URL+"/v1/completions", `{"model":"a","prompt":"Hello","max_tokens":15}`)
	}()
	eventually(t, "a loaded for the long request", func() bool { return statusOf(t, hs.URL, "a") == "loaded" })
	if resp, body := do(t, "POST", hs.URL+"/v1/completions", completion("b", "")); resp.StatusCode != 200 {
		t.Fatalf("b again: %d %s", resp.StatusCode, body)
	}
	<-slow
	got := decode[struct {
		Usage wire.Usage `json:"usage"`
	}](t, long)
	if got.Usage.CompletionTokens != 15 || a.closes.Load() != 2 {
		t.Fatalf("the long request got %s; a closed %d times", long, a.closes.Load())
	}
}

func TestLoadFailure(t *testing.T) {
	a := &demandModel{id: "a"}
	a.fail.Store(true)
	hs, _ := demandServer(t, Options{}, a)
	resp, b := do(t, "POST", hs.URL+"/v1/completions", completion("a", ""))
	wantError(t, "a failed load", resp, b, 503, session.CodeModelLoad, "out of memory")
	a.fail.Store(false)
	if resp, b := do(t, "POST", hs.URL+"/v1/completions", completion("a", "")); resp.StatusCode != 200 {
		t.Fatalf("the retry: %d %s", resp.StatusCode, b)
	}
}

func TestLoadAndUnloadRoutes(t *testing.T) {
	a := &demandModel{id: "a"}
	a.setup = func(e *fakeEngine) { e.delay = 20 * time.Millisecond }
	hs, s := demandServer(t, Options{KeepAlive: session.KeepForever}, a)
	tk := testTokenizer(t)
	if err := s.AddModel(&session.Model{ID: "pinned", Tokenizer: tk, Engine: newFakeEngine(tk)}); err != nil {
		t.Fatal(err)
	}
	resp, b := do(t, "POST", hs.URL+"/models/load", `{"model":"a"}`)
	if resp.StatusCode != 200 || string(b) != "{\"success\":true}\n" || statusOf(t, hs.URL, "a") != "loaded" {
		t.Fatalf("load: %d %s, status %s", resp.StatusCode, b, statusOf(t, hs.URL, "a"))
	}
	// In use: refused.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		doCtx(ctx, hs.URL+"/v1/completions", `{"model":"a","prompt":"Hello","max_tokens":200}`)
	}()
	eventually(t, "the long request running", func() bool { return statusOf(t, hs.URL, "a") == "loaded" && s.models.Leases(a.id) > 0 })
	resp, b = do(t, "POST", hs.URL+"/models/unload", `{"model":"a"}`)
	wantError(t, "unload in use", resp, b, 409, codeModelBusy, "requests are using it")
	cancel()
	<-done
	eventually(t, "unused", func() bool { return s.models.Leases(a.id) == 0 })
	resp, b = do(t, "POST", hs.URL+"/models/unload", `{"model":"a"}`)
	if resp.StatusCode != 200 {
		t.Fatalf("unload: %d %s", resp.StatusCode, b)
	}
	eventually(t, "unloaded", func() bool { return statusOf(t, hs.URL, "a") == "unloaded" })
	for _, tc := range []struct{ body, code string }{
		{`{"model":"pinned"}`, codeModelPinned},
		{`{"model":"nope"}`, session.CodeModelNotFound},
		{`{}`, session.CodeMissing},
		{`{"model":"a","x":1}`, session.CodeUnknownParam},
	} {
		resp, b := do(t, "POST", hs.URL+"/models/unload", tc.body)
		if e := decode[errorBody](t, b); resp.StatusCode < 400 || deref(e.Error.Code) != tc.code {
			t.Errorf("%s: %d %s", tc.body, resp.StatusCode, b)
		}
	}
}

func TestCloseUnloadsEverything(t *testing.T) {
	a, b := &demandModel{id: "a"}, &demandModel{id: "b"}
	hs, s := demandServer(t, Options{KeepAlive: session.KeepForever}, a, b)
	for _, id := range []string{"a", "b"} {
		if resp, body := do(t, "POST", hs.URL+"/v1/completions", completion(id, "")); resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", id, resp.StatusCode, body)
		}
	}
	s.Close()
	if a.closes.Load() != 1 || b.closes.Load() != 1 {
		t.Fatalf("closes: a %d, b %d", a.closes.Load(), b.closes.Load())
	}
	resp, body := do(t, "POST", hs.URL+"/v1/completions", completion("a", ""))
	wantError(t, "after Close", resp, body, 503, "shutting_down", "shutting down")
}

func TestClientLeavesWhileLoading(t *testing.T) {
	a := &demandModel{id: "a", delay: 100 * time.Millisecond}
	hs, s := demandServer(t, Options{KeepAlive: 30 * time.Millisecond}, a)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	doCtx(ctx, hs.URL+"/v1/completions", completion("a", ""))
	// The load goes on without its client; nobody holds the model, so its
	// keep-alive unloads it.
	eventually(t, "loaded then unloaded", func() bool { return a.loads.Load() == 1 && a.closes.Load() == 1 })
	if n := s.models.Leases(a.id); n != 0 {
		t.Fatalf("%d leases left", n)
	}
}

// doCtx posts body to url until ctx ends, ignoring the outcome.
func doCtx(ctx context.Context, url, body string) {
	req, err := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	if err != nil {
		return
	}
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}
