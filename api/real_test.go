package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/ruvllm/ruvllm/backends"
	_ "github.com/ruvllm/ruvllm/backends/native" // opened by name
	"github.com/ruvllm/ruvllm/internal/httpcheck"
	"github.com/ruvllm/ruvllm/internal/shared"
	"github.com/ruvllm/ruvllm/internal/testmodel"
	"github.com/ruvllm/ruvllm/lora"
	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/models/chat"
	"github.com/ruvllm/ruvllm/session"
)

// storiesGreedy is what stories260K continues "Once upon a time" with,
// greedily (DESIGN.md gives the same text from BOS).
const storiesGreedy = ", there was a little girl named Lily. She loved to play outside in the park."

// realServer serves a model through the real engine, with the ChatML
// template: stories260K from ../shared for the tests that know what it
// writes, else the synthesized tiny model, so that the tests of the HTTP
// layer run on a fresh machine.
type realServer struct {
	*httptest.Server
	engine *backends.Engine
	client openai.Client
	model  *models.Model
	// id is the model's id: "stories260K" or "tiny".
	id string
	// adapters is the registry, when the server was made with an adapter
	// directory.
	adapters *lora.Registry
}

// realOptions configure startRealServer.
type realOptions struct {
	// stories serves stories260K (the test skips without ../shared);
	// otherwise the synthesized tiny model is served.
	stories bool
	// queue is the engine's queue (0: its default).
	parallel, queue int
	// adapterDir, when set, gives the model an adapter registry there,
	// with at most maxResident adapters in memory and maxAdapterBytes per
	// upload (0: the registry's defaults).
	adapterDir      string
	maxResident     int
	maxAdapterBytes int64
	// wrap, when set, wraps the engine the server sees.
	wrap func(session.Engine) session.Engine
	// shared, when set, names another model file of ../shared to serve
	// (its id is the file name without .gguf).
	shared []string
	// template, when set, names a real chat template of ../shared/templates
	// to render chats with instead of the model's.
	template string
	// maxLen is each sequence's context (0: 512).
	maxLen int
	// builtin, when set, names a built-in template (llama.cpp's names) to
	// render chats with instead of the model's.
	builtin string
	// verbose is Options.Verbose.
	verbose bool
}

func startRealServer(t *testing.T, o realOptions) *realServer {
	t.Helper()
	m, id := testmodel.Tiny(t), "tiny"
	if o.stories {
		m, id = testmodel.Shared(t, "models", "stories260K.gguf"), "stories260K"
	}
	if o.shared != nil {
		m = testmodel.Shared(t, o.shared...)
		id = m.ID()
	}
	maxLen := 512
	if o.maxLen > 0 {
		maxLen = o.maxLen
	}
	b := testmodel.Backend(t, "native", m, backends.Options{Threads: 1, KVTokens: max(o.parallel, 1) * maxLen})
	tok := m.Tokenizer
	eng, err := backends.NewEngine(b, backends.EngineOptions{Parallel: o.parallel, QueueSize: o.queue, MaxLen: maxLen, IsEOG: tok.IsEOG})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	am := &session.Model{ID: id, Tokenizer: tok, Chat: m, Engine: eng, MaxAdapterBytes: o.maxAdapterBytes}
	if info, err := m.Info(); err == nil {
		am.Info = &info
	}
	if o.template != "" {
		src, err := os.ReadFile(shared.Path(t, "templates", o.template))
		if err != nil {
			t.Fatal(err)
		}
		tmpl, err := chat.Parse(string(src))
		if err != nil {
			t.Fatal(err)
		}
		am.Chat = templateChat{tmpl}
	}
	if o.builtin != "" {
		src, ok := chat.Builtin(o.builtin)
		if !ok {
			t.Fatalf("no built-in template %q", o.builtin)
		}
		tmpl, err := chat.Parse(src)
		if err != nil {
			t.Fatal(err)
		}
		am.Chat = templateChat{tmpl}
	}
	if o.wrap != nil {
		am.Engine = o.wrap(eng)
	}
	if o.adapterDir != "" {
		am.Adapters, err = lora.NewRegistry(lora.RegistryOptions{Dir: o.adapterDir, Config: m.Config, Base: m.File, BaseModel: am.ID,
			MaxResident: o.maxResident, MaxUploadBytes: o.maxAdapterBytes})
		if err != nil {
			t.Fatal(err)
		}
	}
	s := New(Options{Version: "test-version", Verbose: o.verbose})
	if err := s.AddModel(am); err != nil {
		t.Fatal(err)
	}
	hs := startHTTP(t, s)
	client := sdkClient(hs.URL)
	return &realServer{Server: hs, engine: eng, client: client, model: m, id: id, adapters: am.Adapters}
}

// sdkClient is the OpenAI SDK pointed at a test server.
func sdkClient(url string) openai.Client {
	return openai.NewClient(option.WithBaseURL(url+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
}

func userMessage(s string) []openai.ChatCompletionMessageParamUnion {
	return []openai.ChatCompletionMessageParamUnion{openai.UserMessage(s)}
}

// TestRealModel drives the server with the official Go SDK: completions,
// chat, streaming, stop strings, seeds, logprobs, embeddings and errors.
func TestRealModel(t *testing.T) {
	rs := startRealServer(t, realOptions{stories: true, parallel: 4})
	ctx := context.Background()
	c := rs.client

	t.Run("greedy completion", func(t *testing.T) {
		r, err := c.Completions.New(ctx, openai.CompletionNewParams{
			Model:       "stories260K",
			Prompt:      openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")},
			MaxTokens:   openai.Int(20),
			Temperature: openai.Float(0),
		})
		if err != nil {
			t.Fatal(err)
		}
		got := r.Choices[0].Text
		if !strings.HasPrefix(storiesGreedy, got) || len(got) < 30 || r.Choices[0].FinishReason != "length" || r.Usage.CompletionTokens != 20 {
			t.Errorf("text %q finish %q usage %+v", got, r.Choices[0].FinishReason, r.Usage)
		}
	})

	t.Run("stop string", func(t *testing.T) {
		r, err := c.Completions.New(ctx, openai.CompletionNewParams{
			Model:       "stories260K",
			Prompt:      openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")},
			Temperature: openai.Float(0),
			Stop:        openai.CompletionNewParamsStopUnion{OfStringArray: []string{"Lily", "xyzzy"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if r.Choices[0].Text != ", there was a little girl named " || r.Choices[0].FinishReason != "stop" {
			t.Errorf("text %q finish %q", r.Choices[0].Text, r.Choices[0].FinishReason)
		}
	})

	var plain string
	t.Run("chat", func(t *testing.T) {
		r, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:       "stories260K",
			Messages:    userMessage("Tell me a story."),
			MaxTokens:   openai.Int(24),
			Temperature: openai.Float(0),
		})
		if err != nil {
			t.Fatal(err)
		}
		ch := r.Choices[0]
		plain = ch.Message.Content
		if plain == "" || ch.FinishReason != "length" || r.Usage.CompletionTokens != 24 || r.Usage.PromptTokens == 0 ||
			//lint:ignore SA1019 OpenAI deprecates system_fingerprint but still sends it, and so do we
			!strings.HasPrefix(r.ID, "chatcmpl-") || r.Model != "stories260K" || r.SystemFingerprint != "test-version" {
			t.Errorf("%+v", r)
		}
	})

	t.Run("chat stream equals the plain response", func(t *testing.T) {
		stream := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
			Model:         "stories260K",
			Messages:      userMessage("Tell me a story."),
			MaxTokens:     openai.Int(24),
			Temperature:   openai.Float(0),
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		})
		var acc openai.ChatCompletionAccumulator
		chunks := 0
		for stream.Next() {
			acc.AddChunk(stream.Current())
			chunks++
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if chunks < 3 || len(acc.Choices) != 1 || acc.Choices[0].Message.Content != plain || acc.Choices[0].FinishReason != "length" || acc.Usage.CompletionTokens != 24 {
			t.Errorf("%d chunks: %+v (plain %q)", chunks, acc.ChatCompletion, plain)
		}
	})

	t.Run("seed determinism", func(t *testing.T) {
		run := func(seed int64) []string {
			r, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
				Model: "stories260K", Messages: userMessage("Once"), MaxTokens: openai.Int(24),
				Temperature: openai.Float(1), Seed: openai.Int(seed), N: openai.Int(2),
			})
			if err != nil {
				t.Fatal(err)
			}
			return []string{r.Choices[0].Message.Content, r.Choices[1].Message.Content}
		}
		a, b := run(42), run(42)
		if a[0] != b[0] || a[1] != b[1] {
			t.Errorf("the same seed gave %q and %q", a, b)
		}
		if a[0] == a[1] {
			t.Logf("the two choices of one request agree: %q", a[0])
		}
	})

	t.Run("logprobs", func(t *testing.T) {
		r, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model: "stories260K", Messages: userMessage("Once"), MaxTokens: openai.Int(8),
			Temperature: openai.Float(0), Logprobs: openai.Bool(true), TopLogprobs: openai.Int(3),
		})
		if err != nil {
			t.Fatal(err)
		}
		lp := r.Choices[0].Logprobs.Content
		if len(lp) != 8 {
			t.Fatalf("%d logprob entries for 8 tokens", len(lp))
		}
		var text strings.Builder
		for _, e := range lp {
			text.WriteString(e.Token)
			if e.Logprob > 0 || len(e.TopLogprobs) != 3 || e.TopLogprobs[0].Logprob < e.TopLogprobs[1].Logprob {
				t.Errorf("entry %+v", e)
			}
			// Greedy: the chosen token is the most likely one.
			if e.Token != e.TopLogprobs[0].Token || math.Abs(e.Logprob-e.TopLogprobs[0].Logprob) > 1e-5 {
				t.Errorf("chosen %q %v, top %q %v", e.Token, e.Logprob, e.TopLogprobs[0].Token, e.TopLogprobs[0].Logprob)
			}
		}
		if text.String() != r.Choices[0].Message.Content {
			t.Errorf("tokens spell %q, content is %q", text.String(), r.Choices[0].Message.Content)
		}
	})

	t.Run("logit bias", func(t *testing.T) {
		// A bias of +100 forces a token: greedy output repeats it.
		_, b := do(t, "POST", rs.URL+"/tokenize", `{"content":"Once upon a time","with_pieces":true}`)
		toks := decode[struct {
			Tokens []struct {
				ID    int64
				Piece string
			}
		}](t, b).Tokens
		forced := toks[len(toks)-1]
		r, err := c.Completions.New(ctx, openai.CompletionNewParams{
			Model: "stories260K", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")},
			MaxTokens: openai.Int(3), Temperature: openai.Float(0),
			LogitBias: map[string]int64{strconv.FormatInt(forced.ID, 10): 100},
		})
		if err != nil {
			t.Fatal(err)
		}
		if want := strings.Repeat(forced.Piece, 3); r.Choices[0].Text != want {
			t.Errorf("text %q, want %q", r.Choices[0].Text, want)
		}
	})

	t.Run("embeddings", func(t *testing.T) {
		r, err := c.Embeddings.New(ctx, openai.EmbeddingNewParams{
			Model: "stories260K",
			Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"Once upon a time", "Lily"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Data) != 2 || len(r.Data[0].Embedding) == 0 {
			t.Fatalf("%+v", r)
		}
		var norm float64
		for _, x := range r.Data[0].Embedding {
			norm += x * x
		}
		if math.Abs(norm-1) > 1e-3 {
			t.Errorf("|embedding|² = %v, want 1", norm)
		}
	})

	t.Run("errors", func(t *testing.T) {
		_, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-9", Messages: userMessage("hi")})
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Code != session.CodeModelNotFound {
			t.Errorf("unknown model: %v", err)
		}
		_, err = c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "stories260K", Messages: userMessage("hi"), MaxTokens: openai.Int(100000)})
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Code != session.CodeContextLength || apiErr.Param != "max_tokens" {
			t.Errorf("context: %v", err)
		}
		stream := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "stories260K", Messages: userMessage("hi"), Temperature: openai.Float(3)})
		for stream.Next() {
		}
		if err := stream.Err(); !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "temperature" {
			t.Errorf("temperature in a stream: %v", err)
		}
	})
}

// TestRealDisconnect drops a long stream after its first tokens: the
// engine must stop generating for it at once, not run to max_tokens.
func TestRealDisconnect(t *testing.T) {
	rs := startRealServer(t, realOptions{parallel: 1})
	before := rs.engine.Stats().GeneratedTokens
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", rs.URL+"/v1/completions",
		strings.NewReader(`{"prompt":"Once upon a time","max_tokens":500,"stream":true,"logit_bias":{"2":-100}}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	for events := 0; events < 3 && sc.Scan(); {
		if strings.HasPrefix(sc.Text(), "data: ") {
			events++
		}
	}
	cancel()
	resp.Body.Close()
	deadline := time.Now().Add(2 * time.Second)
	for rs.engine.Stats().Running > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the engine still runs the dropped request")
		}
		time.Sleep(time.Millisecond)
	}
	if n := rs.engine.Stats().GeneratedTokens - before; n >= 250 {
		t.Errorf("%d tokens generated for a stream dropped after 3 events", n)
	} else {
		t.Logf("%d tokens generated for a stream dropped after 3 events", n)
	}
}

// TestRealQueueFull fills the one slot and the one place in the queue: the
// next request gets 429 with Retry-After, and once the load is gone
// requests succeed again.
func TestRealQueueFull(t *testing.T) {
	rs := startRealServer(t, realOptions{parallel: 1, queue: 1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	open := func() *bufio.Scanner {
		req, _ := http.NewRequestWithContext(ctx, "POST", rs.URL+"/v1/completions",
			strings.NewReader(`{"prompt":"Once upon a time","max_tokens":500,"stream":true,"logit_bias":{"2":-100}}`))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		return bufio.NewScanner(resp.Body)
	}
	running := open()
	running.Scan() // a token: the first request holds the slot
	open()         // the second waits in the queue
	deadline := time.Now().Add(2 * time.Second)
	for rs.engine.Stats().Queued == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the second request is not queued: %+v", rs.engine.Stats())
		}
		time.Sleep(time.Millisecond)
	}
	resp, b := do(t, "POST", rs.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Errorf("third request: status %d, Retry-After %q: %s", resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
	cancel()
	deadline = time.Now().Add(2 * time.Second)
	for st := rs.engine.Stats(); st.Running+st.Queued > 0; st = rs.engine.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("the engine is still busy: %+v", st)
		}
		time.Sleep(time.Millisecond)
	}
	if resp, b := do(t, "POST", rs.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`); resp.StatusCode != 200 {
		t.Errorf("after the load: %d %s", resp.StatusCode, b)
	}
}

// TestRealDefaultMaxTokens checks that without max_tokens generation runs
// until the model ends it or the context is full, not to a small cap.
func TestRealDefaultMaxTokens(t *testing.T) {
	rs := startRealServer(t, realOptions{stories: true, parallel: 1})
	r, err := rs.client.Completions.New(context.Background(), openai.CompletionNewParams{
		Model:            "stories260K",
		Prompt:           openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")},
		Temperature:      openai.Float(0),
		PresencePenalty:  openai.Float(0),
		FrequencyPenalty: openai.Float(0),
	})
	if err != nil {
		t.Fatal(err)
	}
	u := r.Usage
	switch r.Choices[0].FinishReason {
	case "length":
		if u.PromptTokens+u.CompletionTokens != int64(rs.engine.MaxLen()) {
			t.Errorf("length after %d+%d tokens, context %d", u.PromptTokens, u.CompletionTokens, rs.engine.MaxLen())
		}
	case "stop":
		if u.CompletionTokens < 20 {
			t.Errorf("stopped after %d tokens", u.CompletionTokens)
		}
	default:
		t.Errorf("finish %q", r.Choices[0].FinishReason)
	}
}

// TestRealVerbosePrompt checks llama-server's __verbose object against
// the prompts its own test suite (tools/server/tests/unit/
// test_chat_completion.py) expects of stories260K with the llama3 template:
// the prompt as the model read it, BOS and special tokens written.
func TestRealVerbosePrompt(t *testing.T) {
	const head = "<s> <|start_header_id|>system<|end_header_id|>\n\nBook<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n" +
		"What is the best book<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
	chatBody := func(extra string) string {
		return `{"max_tokens":8,"messages":[{"role":"system","content":"Book"},{"role":"user","content":"What is the best book"}` + extra + `]}`
	}
	for _, verbose := range []bool{true, false} {
		rs := startRealServer(t, realOptions{stories: true, parallel: 1, builtin: "llama3", verbose: verbose})
		for _, tc := range []struct {
			name, route, body, want string
		}{
			{"chat", "/chat/completions", chatBody(""), head},
			{"assistant prefill", "/v1/chat/completions", chatBody(`,{"role":"assistant","content":"Whill"}`), head + "Whill"},
			{"prefill in parts", "/v1/chat/completions", chatBody(`,{"role":"assistant","content":[{"type":"text","text":"Wh"},{"type":"text","text":"ill"}]}`), head + "Whill"},
			{"text completion", "/v1/completions", `{"max_tokens":4,"prompt":"Once upon a time"}`, "<s> Once upon a time"},
		} {
			t.Run(fmt.Sprintf("%s/verbose=%v", tc.name, verbose), func(t *testing.T) {
				var resp struct {
					Verbose *struct {
						Prompt          string `json:"prompt"`
						Content         string `json:"content"`
						TokensPredicted int    `json:"tokens_predicted"`
					} `json:"__verbose"`
				}
				res, body := httpcheck.Do(t, "POST", rs.URL+tc.route, tc.body, "Content-Type", "application/json")
				if res.StatusCode != 200 {
					t.Fatalf("status %d: %s", res.StatusCode, body)
				}
				if err := json.Unmarshal(body, &resp); err != nil {
					t.Fatal(err)
				}
				switch {
				case !verbose && resp.Verbose != nil:
					t.Fatalf("__verbose without Verbose: %+v", resp.Verbose)
				case !verbose:
				case resp.Verbose == nil:
					t.Fatal("no __verbose")
				case resp.Verbose.Prompt != tc.want:
					t.Fatalf("prompt %q, want %q", resp.Verbose.Prompt, tc.want)
				case resp.Verbose.TokensPredicted == 0 || resp.Verbose.Content == "":
					t.Fatalf("verbose %+v", resp.Verbose)
				}
			})
		}
	}
}

// TestRealStreamsDropped opens 64 streams at once, drops half of them
// mid-way, checks that the rest complete and that the server keeps
// answering, and that afterwards the goroutines and the heap are back to
// where they started: nothing of a dropped request outlives it.
func TestRealStreamsDropped(t *testing.T) {
	rs := startRealServer(t, realOptions{parallel: 4})
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	client := &http.Client{Transport: tr}
	post := func(ctx context.Context, body string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, "POST", rs.URL+"/v1/chat/completions", strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		return client.Do(req)
	}
	const body = `{"messages":[{"role":"user","content":"Tell me a story."}],"stream":true,"max_tokens":48,"temperature":0.8,"seed":1}`
	// Warm up every slot and the connection pool, so that the baseline
	// holds what a busy server keeps.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			resp, err := post(context.Background(), body)
			if err == nil {
				drain(resp)
			}
		})
	}
	wg.Wait()
	baseG, baseHeap := settle(t, rs, tr)

	const streams = 64
	results := make([]string, streams)
	for i := range streams {
		wg.Go(func() {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			resp, err := post(ctx, body)
			if err != nil {
				results[i] = "post: " + err.Error()
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 {
				results[i] = "status " + resp.Status
				return
			}
			sc := bufio.NewScanner(resp.Body)
			events := 0
			for sc.Scan() {
				line := sc.Text()
				if !strings.HasPrefix(line, "data: ") {
					continue
				}
				events++
				if i%2 == 1 && events == 6 {
					cancel() // drop the stream mid-way
					results[i] = "dropped"
					return
				}
				if line == "data: [DONE]" {
					results[i] = "done"
					return
				}
			}
			results[i] = "ended without [DONE]"
		})
	}
	// The server answers while the streams run.
	time.Sleep(20 * time.Millisecond)
	if resp, b := do(t, "GET", rs.URL+"/health", ""); resp.StatusCode != 200 {
		t.Errorf("health during the run: %d %s", resp.StatusCode, b)
	}
	wg.Wait()
	for i, r := range results {
		want := "done"
		if i%2 == 1 {
			want = "dropped"
		}
		if r != want {
			t.Errorf("stream %d: %s, want %s", i, r, want)
		}
	}
	resp, b := do(t, "POST", rs.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":4}`)
	if resp.StatusCode != 200 {
		t.Fatalf("after the run: %d %s", resp.StatusCode, b)
	}
	g, heap := settle(t, rs, tr)
	if g > baseG {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines after the run, %d before:\n%s", g, baseG, buf[:runtime.Stack(buf, true)])
	}
	if heap > baseHeap+1<<20 {
		t.Errorf("heap %d bytes after the run, %d before", heap, baseHeap)
	}
	t.Logf("goroutines %d → %d, heap %d → %d KiB", baseG, g, baseHeap>>10, heap>>10)
}

func drain(resp *http.Response) {
	buf := make([]byte, 4096)
	for {
		if _, err := resp.Body.Read(buf); err != nil {
			break
		}
	}
	resp.Body.Close()
}

// settle waits until the engine is idle and the goroutine count stops
// falling, and returns it with the live heap.
func settle(t *testing.T, rs *realServer, tr *http.Transport) (int, uint64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := rs.engine.Stats()
		if st.Queued == 0 && st.Running == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the engine is still busy: %+v", st)
		}
		time.Sleep(5 * time.Millisecond)
	}
	tr.CloseIdleConnections()
	rs.CloseClientConnections()
	g := runtime.NumGoroutine()
	for stable := 0; stable < 10 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		if n := runtime.NumGoroutine(); n < g {
			g, stable = n, 0
		} else {
			stable++
		}
	}
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return g, ms.HeapAlloc
}
