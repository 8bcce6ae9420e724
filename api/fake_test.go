package api

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/internal/testmodel"
	"github.com/ruvllm/ruvllm/models/chat"
	"github.com/ruvllm/ruvllm/models/tokenizer"
	"github.com/ruvllm/ruvllm/session"
)

// testTokenizer is the test vocabulary's tokenizer.
func testTokenizer(tb testing.TB) *tokenizer.Tokenizer { return testmodel.WordTokenizer(tb) }

// ids maps pieces of the test vocabulary to their token ids.
func ids(tb testing.TB, tk *tokenizer.Tokenizer, pieces ...string) []tokenizer.ID {
	return testmodel.IDs(tb, tk, pieces...)
}

// fakeEngine plays the engine's part of the contract: it streams a script
// of tokens per request, honours MaxTokens ("length"), ends the script with
// "stop", stops within one token when the request's context is cancelled,
// and refuses requests beyond its capacity with ErrQueueFull.
type fakeEngine struct {
	maxLen   int
	capacity int           // requests at once; 0: unlimited
	delay    time.Duration // between tokens
	// script gives the tokens of a request; nil repeats "▁Hello" forever.
	script func(r backends.Request) []tokenizer.ID
	hello  tokenizer.ID

	mu        sync.Mutex
	active    int
	submitted []backends.Request
	cancelled int
	idle      *sync.Cond
}

func newFakeEngine(tk *tokenizer.Tokenizer) *fakeEngine {
	e := &fakeEngine{maxLen: 256, hello: tk.Vocab().IDs["▁Hello"]}
	e.idle = sync.NewCond(&e.mu)
	return e
}

func (e *fakeEngine) MaxLen() int { return e.maxLen }

func (e *fakeEngine) Stats() backends.EngineStats {
	e.mu.Lock()
	defer e.mu.Unlock()
	return backends.EngineStats{Running: e.active, KVBytes: int64(e.active) * 1000}
}

func (e *fakeEngine) Embed(ctx context.Context, tokens []tokenizer.ID) ([]float32, error) {
	if len(tokens) > e.maxLen {
		return nil, backends.ErrContextLength
	}
	// A unit vector that depends on the tokens.
	v := []float32{float32(len(tokens)), float32(tokens[0]), 1}
	n := float32(math.Sqrt(float64(v[0]*v[0] + v[1]*v[1] + v[2]*v[2])))
	for i := range v {
		v[i] /= n
	}
	return v, nil
}

func (e *fakeEngine) Submit(ctx context.Context, r backends.Request) (*backends.Stream, error) {
	if len(r.Prompt)+r.MaxTokens > e.maxLen {
		return nil, fmt.Errorf("%w: %d + %d > %d", backends.ErrContextLength, len(r.Prompt), r.MaxTokens, e.maxLen)
	}
	if r.MaxTokens <= 0 || len(r.Prompt) == 0 {
		return nil, fmt.Errorf("%w: bad request", backends.ErrInvalidRequest)
	}
	e.mu.Lock()
	if e.capacity > 0 && e.active >= e.capacity {
		e.mu.Unlock()
		return nil, backends.ErrQueueFull
	}
	e.active++
	e.submitted = append(e.submitted, r)
	e.mu.Unlock()

	var script []tokenizer.ID
	if e.script != nil {
		script = e.script(r)
	}
	ch := make(chan backends.Event, 4)
	go func() {
		defer func() {
			close(ch)
			e.mu.Lock()
			e.active--
			e.idle.Broadcast()
			e.mu.Unlock()
		}()
		for i := 0; ; i++ {
			if i == r.MaxTokens {
				ch <- backends.Event{Finish: "length"}
				return
			}
			id := e.hello
			if e.script != nil {
				if i == len(script) {
					ch <- backends.Event{Finish: "stop"}
					return
				}
				id = script[i]
			}
			tok := &backends.Token{ID: id}
			if r.TopLogprobs >= 0 {
				tok.Logprob = -0.25
				for k := range r.TopLogprobs {
					tok.Top = append(tok.Top, backends.TokenLogprob{ID: tokenizer.ID(int(id) + k), Logprob: -0.25 - float32(k)})
				}
			}
			if e.delay > 0 {
				select {
				case <-ctx.Done():
				case <-time.After(e.delay):
				}
			}
			if ctx.Err() != nil {
				e.mu.Lock()
				e.cancelled++
				e.mu.Unlock()
				ch <- backends.Event{Err: ctx.Err()}
				return
			}
			select {
			case ch <- backends.Event{Token: tok}:
			case <-ctx.Done():
			}
		}
	}()
	return &backends.Stream{Events: ch, PromptTokens: len(r.Prompt)}, nil
}

// waitIdle waits until no request runs, or fails the test after d.
func (e *fakeEngine) waitIdle(tb testing.TB, d time.Duration) {
	tb.Helper()
	done := make(chan struct{})
	go func() {
		e.mu.Lock()
		for e.active > 0 {
			e.idle.Wait()
		}
		e.mu.Unlock()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(d):
		e.mu.Lock()
		n := e.active
		e.mu.Unlock()
		tb.Fatalf("%d engine requests still run after %v", n, d)
	}
}

func (e *fakeEngine) cancelledCount() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cancelled
}

func (e *fakeEngine) requests() []backends.Request {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]backends.Request(nil), e.submitted...)
}

// templateChat renders with a parsed chat template, as models.Model does.
type templateChat struct{ t *chat.Template }

func (c templateChat) RenderChat(in chat.Input) (string, error) {
	if len(in.Messages) > 0 && in.Messages[0]["content"] == "panic please" {
		panic("the renderer was asked to panic")
	}
	in.BOSToken, in.EOSToken = "<s>", "</s>"
	return c.t.Render(in)
}

// ChatTemplateSource tells the server the template's tool-call format.
func (c templateChat) ChatTemplateSource() string { return c.t.Source() }

// chatMLRaising is ChatML that refuses a message whose content is "boom",
// as real templates refuse, say, roles out of order.
const chatMLRaising = `{%- for message in messages %}{%- if message['content'] == 'boom' %}{{ raise_exception('boom is not allowed') }}{%- endif %}` +
	`{{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}{%- endfor %}` +
	`{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}`

// templateChatOf is the fake server's template: chatMLRaising.
func templateChatOf(tb testing.TB) templateChat {
	tb.Helper()
	tmpl, err := chat.Parse(chatMLRaising)
	if err != nil {
		tb.Fatal(err)
	}
	return templateChat{tmpl}
}

// fakeServer is an API server over the fake engine.
type fakeServer struct {
	*httptest.Server
	api *Server
	eng *fakeEngine
	tok *tokenizer.Tokenizer
}

func newFakeServer(tb testing.TB, o Options, setup func(*fakeEngine)) *fakeServer {
	tb.Helper()
	return newFakeServerWith(tb, o, templateChatOf(tb), setup)
}

// newFakeServerWith is newFakeServer with another chat renderer.
func newFakeServerWith(tb testing.TB, o Options, renderer session.ChatRenderer, setup func(*fakeEngine)) *fakeServer {
	tb.Helper()
	tk := testTokenizer(tb)
	eng := newFakeEngine(tk)
	if setup != nil {
		setup(eng)
	}
	if o.Version == "" {
		o.Version = "test-version"
	}
	s := New(o)
	if err := s.AddModel(&session.Model{ID: "fake-model", Tokenizer: tk, Chat: renderer, Engine: eng}); err != nil {
		tb.Fatal(err)
	}
	return &fakeServer{Server: startHTTP(tb, s), api: s, eng: eng, tok: tk}
}

// startHTTP serves h on a test server, closed (its connections first) when
// the test ends.
func startHTTP(tb testing.TB, h http.Handler) *httptest.Server {
	hs := httptest.NewServer(h)
	tb.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
	})
	return hs
}

// scriptOf makes a script that always plays the same pieces.
func scriptOf(tb testing.TB, tk *tokenizer.Tokenizer, pieces ...string) func(backends.Request) []tokenizer.ID {
	s := ids(tb, tk, pieces...)
	return func(backends.Request) []tokenizer.ID { return s }
}

func TestTestTokenizer(t *testing.T) {
	tk := testTokenizer(t)
	got := tk.Decode(ids(t, tk, "▁Hello", "▁world", "!"))
	if got != "Hello world!" {
		t.Fatalf("decode = %q", got)
	}
	// The vocabulary lacks the pieces SPM merges through, so text encodes
	// byte by byte after BOS.
	if enc := tk.Encode("Hi", tokenizer.EncodeOptions{AddSpecial: true}); len(enc) != 4 || enc[0] != 1 {
		t.Fatalf("encode = %v", enc)
	}
	if !strings.Contains(tk.Decode(tk.Encode("héllo", tokenizer.EncodeOptions{})), "é") {
		t.Fatal("byte fallback does not round-trip")
	}
}
