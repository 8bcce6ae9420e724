package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/ruvllm/ruvllm/models/hub"
)

// summaryField is KEY's value in a loadtest summary line.
func summaryField(t *testing.T, line, key string) string {
	t.Helper()
	for f := range strings.FieldsSeq(line) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			return v
		}
	}
	t.Fatalf("no %s in %q", key, line)
	return ""
}

// TestLoadtestRealServer runs chats against the serve command on the
// synthesized tiny model: every turn succeeds, and the later turns find
// most of their history in the server's prefix cache.
func TestLoadtestRealServer(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	base, done := startServe(t, ctx, testServeConfig(t))
	// The server stops before the test ends.
	defer func() {
		cancel()
		<-done
	}()
	waitHealthy(t, base)
	var out bytes.Buffer
	records := filepath.Join(t.TempDir(), "records.jsonl")
	err := runLoadtest(&env{stdout: &out, stderr: io.Discard, log: zerolog.Nop()}, []string{"--url", base, "--sessions", "2", "--turns", "3", "--user-words", "20", "--max-tokens", "4",
		"--key", "header", "--records", records})
	if err != nil {
		t.Fatal(err)
	}
	line := out.String()
	if summaryField(t, line, "requests") != "6" || summaryField(t, line, "failed") != "0" || summaryField(t, line, "later_turns") != "4" {
		t.Fatalf("summary %q", line)
	}
	hit, err := strconv.ParseFloat(summaryField(t, line, "hit"), 64)
	if err != nil || hit < 0.5 || hit > 1 {
		t.Errorf("hit %v (%v) in %q; want most of the history cached", hit, err, line)
	}
	b, err := os.ReadFile(records)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte("\n")); n != 6 {
		t.Errorf("%d records, want 6", n)
	}
}

// fakeChat is an OpenAI streaming chat endpoint that remembers what each
// request sent, and cuts the stream of the first request cut matches.
type fakeChat struct {
	mu   sync.Mutex
	seen []fakeRequest
	cut  func(r fakeRequest) bool
	done bool // a stream was cut
}

type fakeRequest struct {
	sessionID, user string
	messages        []map[string]string
}

func (f *fakeChat) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct {
		User     string              `json:"user"`
		Messages []map[string]string `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	fr := fakeRequest{sessionID: r.Header.Get("X-Session-Id"), user: body.User, messages: body.Messages}
	f.mu.Lock()
	f.seen = append(f.seen, fr)
	cut := !f.done && f.cut != nil && f.cut(fr)
	f.done = f.done || cut
	f.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Ruvllm-Replica", "r1")
	fmt.Fprint(w, `data: {"choices":[{"delta":{"role":"assistant","content":""}}]}`+"\n\n")
	fmt.Fprint(w, `data: {"choices":[{"delta":{"content":"hello"}}]}`+"\n\n")
	if cut {
		return // the stream ends without [DONE]
	}
	fmt.Fprint(w, `data: {"choices":[{"delta":{"content":" world"}}]}`+"\n\n")
	prompt := 10 * len(body.Messages)
	fmt.Fprintf(w, `data: {"choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":%d}}}`+"\n\n", prompt, prompt/2)
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// TestLoadtestRequests checks what the chats send (the session key as the
// --key says, the history with the assistant's text), how a cut stream is
// counted and retried, and the hit fraction of the usage reported.
func TestLoadtestRequests(t *testing.T) {
	// The second turn of the session keyed by user is cut once.
	f := &fakeChat{cut: func(r fakeRequest) bool { return r.user != "" && len(r.messages) == 4 }}
	hs := httptest.NewServer(f)
	defer hs.Close()
	var out bytes.Buffer
	if err := runLoadtest(&env{stdout: &out, stderr: io.Discard, log: zerolog.Nop()}, []string{"--url", hs.URL, "--sessions", "3", "--turns", "2", "--user-words", "5", "--first-words", "9", "--key", "mixed", "--think", "5ms"}); err != nil {
		t.Fatal(err)
	}
	if err := runLoadtest(quietEnv(), []string{"--url", hs.URL, "--first-words", "-1"}); !errors.Is(err, errUsage) {
		t.Errorf("--first-words -1: %v, want a usage error", err)
	}
	if err := runLoadtest(quietEnv(), []string{"--url", hs.URL, "--think", "-1s"}); !errors.Is(err, errUsage) {
		t.Errorf("--think -1s: %v, want a usage error", err)
	}
	line := out.String()
	// 3 sessions × 2 turns, plus the retry of the cut one.
	if summaryField(t, line, "requests") != "7" || summaryField(t, line, "failed") != "1" || summaryField(t, line, "replicas") != "r1:6" {
		t.Errorf("summary %q", line)
	}
	// Each later turn: history = 20 prompt + 2 completion tokens of turn 1,
	// cached = half of its own 40 prompt tokens.
	if summaryField(t, line, "hit") != strconv.FormatFloat(20.0/22, 'f', 4, 64) {
		t.Errorf("hit in %q, want %.4f", line, 20.0/22)
	}
	byKey := map[string]int{}
	for _, r := range f.seen {
		switch {
		case r.sessionID != "" && r.user == "":
			byKey["header"]++
		case r.user != "" && r.sessionID == "":
			byKey["user"]++
		case r.user == "" && r.sessionID == "":
			byKey["prompt"]++
		default:
			t.Errorf("request with both a header %q and a user %q", r.sessionID, r.user)
		}
		if r.messages[0]["role"] != "system" || r.messages[1]["role"] != "user" {
			t.Errorf("messages %v", r.messages)
		}
		if len(r.messages) == 4 && (r.messages[2]["role"] != "assistant" || r.messages[2]["content"] != "hello world") {
			t.Errorf("second turn's history %v", r.messages)
		}
		// "Turn N:" and the words: --first-words in the first message,
		// --user-words in later ones.
		for i, want := range map[int]int{1: 2 + 9, 3: 2 + 5} {
			if i < len(r.messages) && len(strings.Fields(r.messages[i]["content"])) != want {
				t.Errorf("message %d %q: want %d words", i, r.messages[i]["content"], want)
			}
		}
	}
	if byKey["header"] != 2 || byKey["user"] != 3 || byKey["prompt"] != 2 {
		t.Errorf("requests by session key %v", byKey)
	}
}

func TestFailoverOf(t *testing.T) {
	// The signal went out at 1000; the process was gone by 1010.
	k := kill{from: 1000, to: 1010, replica: "r2"}
	recs := []turnRecord{
		{Start: 100, End: 900},                              // before: fine
		{Start: 100, End: 1100, Replica: "r2", Err: "cut"},  // in flight on the killed replica: allowed
		{Start: 150, End: 1005, Replica: "r2", Err: "cut"},  // cut while it died: allowed
		{Start: 1005, End: 1006, Replica: "r2", Err: "cut"}, // started while it died: allowed
		{Start: 200, End: 1200, Err: "reset"},               // in flight, replica unknown: allowed
		{Start: 300, End: 1300, Replica: "r1", Err: "cut"},  // in flight on the other replica: an error
		{Start: 400, End: 1400, Replica: "r1"},              // in flight, fine
		{Start: 1100, End: 1500, Replica: "r1"},             // after: fine
		{Start: 1200, End: 1600, Replica: "r2", Err: "503"}, // after, failed: an error
		{Start: 500, End: 9000, Err: "deadline", Hung: true},
		{Start: 50, End: 60, Replica: "r2", Err: "early"}, // failed before the kill: an error
	}
	got := failoverOf(recs, k)
	want := failoverCount{after: 2, inFlightFailed: 4, hung: 1, errors: 4}
	if got != want {
		t.Errorf("failoverOf = %+v, want %+v", got, want)
	}
	if got := failoverOf(recs[5:6], kill{from: 1000, to: 1010}); got.inFlightFailed != 1 || got.errors != 0 {
		t.Errorf("without the replica's name, a failure in flight is allowed: %+v", got)
	}
	for _, s := range []string{"", "1", "x 2", "2 1", "1 2 r 4"} {
		if _, err := parseFailover(s); err == nil {
			t.Errorf("parseFailover(%q) succeeded", s)
		}
	}
	if k, err := parseFailover("1234 1240 r2\n"); k != (kill{1234, 1240, "r2"}) || err != nil {
		t.Errorf("parseFailover: %+v %v", k, err)
	}
}

func TestPercentile(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		p    float64
		want float64
	}{
		{nil, 50, 0},
		{[]float64{3}, 50, 3},
		{[]float64{4, 1, 3, 2}, 50, 2},
		{[]float64{5, 1, 4, 2, 3}, 50, 3},
		{[]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 90, 9},
		{[]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 100, 10},
	} {
		if got := percentile(c.xs, c.p); got != c.want {
			t.Errorf("percentile(%v, %v) = %v, want %v", c.xs, c.p, got, c.want)
		}
	}
}

func TestHealthCommand(t *testing.T) {
	status := 200
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(status) }))
	url := hs.URL + "/health"
	if _, stderr, code := run(t, "health", "--url", url); code != 0 {
		t.Errorf("200: exit %d, %s", code, stderr)
	}
	status = 503
	if _, stderr, code := run(t, "health", "--url", url); code != 1 || !strings.Contains(stderr, "503") {
		t.Errorf("503: exit %d, %s", code, stderr)
	}
	hs.Close()
	if _, _, code := run(t, "health", "--url", url); code != 1 {
		t.Errorf("no server: exit %d", code)
	}
}

// TestPullCached checks that pull prints the cached file of a pinned
// reference without a download.
func TestPullCached(t *testing.T) {
	t.Setenv("RUVLLM_CACHE", t.TempDir())
	const ref = "owner/repo@0123456789abcdef0123456789abcdef01234567/model-q8_0.gguf"
	r, err := hub.ParseRef(ref)
	if err != nil {
		t.Fatal(err)
	}
	path, err := (&hub.Client{}).CachePath(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("GGUF"), 0o644); err != nil {
		t.Fatal(err)
	}
	if stdout, stderr, code := run(t, "pull", "--hf", ref); code != 0 || strings.TrimSpace(stdout) != path {
		t.Errorf("exit %d, stdout %q, stderr %q; want %s", code, stdout, stderr, path)
	}
}

// TestSummarize checks the figures of a run from records: a chat that
// stays on r1 for a turn and then moves, and one whose second turn fails
// on r2 and succeeds on r1 when sent again.
func TestSummarize(t *testing.T) {
	recs := []turnRecord{
		{Chat: "a", Turn: 1, TTFTMs: 50, PromptTokens: 100, CompletionTokens: 10, Replica: "r1"},
		{Chat: "b", Turn: 1, TTFTMs: 70, PromptTokens: 120, CompletionTokens: 10, Replica: "r2"},
		{Chat: "a", Turn: 2, TTFTMs: 10, PromptTokens: 200, CompletionTokens: 10, CachedTokens: 96, History: 110, Replica: "r1"},
		{Chat: "b", Turn: 2, Attempt: 1, Err: "cut", History: 130, Replica: "r2"},
		{Chat: "b", Turn: 2, Attempt: 2, TTFTMs: 40, PromptTokens: 220, CompletionTokens: 10, CachedTokens: 0, History: 130, Replica: "r1"},
		{Chat: "a", Turn: 3, TTFTMs: 30, PromptTokens: 300, CompletionTokens: 10, CachedTokens: 192, History: 210, Replica: "r2"},
	}
	s := summarize(recs, 3)
	if s.requests != 6 || s.failed != 1 || s.later != 3 || s.cached != 288 || s.history != 450 {
		t.Errorf("counts: %+v", s)
	}
	if s.hit != 288.0/450 || s.ttftP50 != 30 || s.firstTTFTP50 != 50 {
		t.Errorf("hit %v, ttft p50 %v, first %v", s.hit, s.ttftP50, s.firstTTFTP50)
	}
	if s.stayed != 1 || s.stayedTTFTP50 != 10 || s.moved != 2 || s.movedTTFTP50 != 30 {
		t.Errorf("stayed %d (p50 %v), moved %d (p50 %v); want 1 (10) and 2 (30)", s.stayed, s.stayedTTFTP50, s.moved, s.movedTTFTP50)
	}
	if s.chats != 2 || s.movedChats != 2 || s.replicas["r1"] != 3 || s.replicas["r2"] != 2 {
		t.Errorf("chats %d, moved %d, replicas %v", s.chats, s.movedChats, s.replicas)
	}
}
