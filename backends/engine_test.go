package backends_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ruvllm/ruvllm/backends"
	_ "github.com/ruvllm/ruvllm/backends/native" // the native backend, opened by name
	"github.com/ruvllm/ruvllm/internal/testmodel"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// storiesGreedy is stories260K's greedy continuation of BOS.
const storiesGreedy = "403 407 261 378 432 383 286 261 376 298 315 421 395 317 426 338 401 396 267 337 " +
	"410 408 419 292 411 322 265 282 295 433 426 385 328 432 358 394 261 370 432 352"

// openModel runs a model of the shared test data on the native backend,
// skipping the test when it is absent.
func openModel(tb testing.TB, parts ...string) backends.Backend {
	tb.Helper()
	return testmodel.Backend(tb, "native", testmodel.Shared(tb, parts...), backends.Options{})
}

// openStories runs stories260K, for the tests of its known greedy text.
func openStories(tb testing.TB) backends.Backend {
	tb.Helper()
	return openModel(tb, "models", "stories260K.gguf")
}

// openTiny runs the synthesized "tiny" model (random weights, a vocabulary
// of 1024) on the native backend. The engine's tests need some model, not a
// trained one: they compare the engine with direct runs of the backend, so
// they run on any machine.
func openTiny(tb testing.TB) backends.Backend {
	tb.Helper()
	return openTinyWith(tb, backends.Options{})
}

func openTinyWith(tb testing.TB, opt backends.Options) backends.Backend {
	tb.Helper()
	return testmodel.Backend(tb, "native", testmodel.Tiny(tb), opt)
}

func newEngine(tb testing.TB, b backends.Backend, o backends.EngineOptions) *backends.Engine {
	tb.Helper()
	e, err := backends.NewEngine(b, o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { e.Close() })
	return e
}

func parseIDs(s string) []tokenizer.ID {
	var ids []tokenizer.ID
	for f := range strings.FieldsSeq(s) {
		v, err := strconv.Atoi(f)
		if err != nil {
			panic(err)
		}
		ids = append(ids, tokenizer.ID(v))
	}
	return ids
}

// choiceResult is what a stream delivered for one choice.
type choiceResult struct {
	tokens []backends.Token
	finish string
	err    error
	ended  bool
}

func (c choiceResult) ids() []tokenizer.ID {
	ids := make([]tokenizer.ID, len(c.tokens))
	for i, t := range c.tokens {
		ids[i] = t.ID
	}
	return ids
}

// drain reads a stream of n choices until it closes, checking that every
// choice ends with exactly one final event and sends nothing after it.
func drain(s *backends.Stream, n int) ([]choiceResult, error) {
	res := make([]choiceResult, n)
	timeout := time.After(time.Minute)
	for {
		select {
		case ev, ok := <-s.Events:
			if !ok {
				for i, c := range res {
					if !c.ended {
						return nil, fmt.Errorf("choice %d: the stream closed without its final event", i)
					}
				}
				return res, nil
			}
			if ev.Choice < 0 || ev.Choice >= n {
				return nil, fmt.Errorf("event of choice %d, want 0 … %d", ev.Choice, n-1)
			}
			c := &res[ev.Choice]
			if c.ended {
				return nil, fmt.Errorf("choice %d: event %+v after its final event", ev.Choice, ev)
			}
			if ev.Token != nil {
				c.tokens = append(c.tokens, *ev.Token)
				continue
			}
			c.finish, c.err, c.ended = ev.Finish, ev.Err, true
		case <-timeout:
			return nil, errors.New("the stream did not close within a minute")
		}
	}
}

func collect(tb testing.TB, s *backends.Stream, n int) []choiceResult {
	tb.Helper()
	res, err := drain(s, n)
	if err != nil {
		tb.Fatal(err)
	}
	return res
}

func submit(tb testing.TB, e *backends.Engine, r backends.Request) *backends.Stream {
	tb.Helper()
	s, err := e.Submit(context.Background(), r)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func argmax(x []float32) (best int, margin float32) {
	second := float32(math.Inf(-1))
	for i, v := range x {
		if v > x[best] {
			second = x[best]
			best = i
		} else if i != best && v > second {
			second = v
		}
	}
	return best, x[best] - second
}

// directGreedy runs prompt then n greedy tokens straight on the backend,
// one sequence alone, and returns the tokens and each step's top-1/top-2
// logit margin.
func directGreedy(tb testing.TB, b backends.Backend, prompt []tokenizer.ID, n int) ([]tokenizer.ID, []float32) {
	tb.Helper()
	seq, err := b.NewSequence(backends.SequenceOptions{MaxLen: len(prompt) + n})
	if err != nil {
		tb.Fatal(err)
	}
	defer seq.Close()
	logits := make([]float32, b.Model().VocabSize)
	toks := slices.Clone(prompt)
	var out []tokenizer.ID
	var margins []float32
	for range n {
		if err := b.Forward([]backends.Step{{Seq: seq, Tokens: toks, Logits: logits}}); err != nil {
			tb.Fatal(err)
		}
		id, m := argmax(logits)
		out = append(out, tokenizer.ID(id))
		margins = append(margins, m)
		toks = []tokenizer.ID{tokenizer.ID(id)}
	}
	return out, margins
}

// sameGreedy compares an engine's greedy tokens with a direct run: they
// must agree, except that after a step whose top two logits are within
// float tolerance either continuation is right.
func sameGreedy(got, want []tokenizer.ID, margins []float32) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d tokens, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			if margins[i] < 1e-3 {
				return nil
			}
			return fmt.Errorf("token %d is %d, want %d (margin %.4f):\n got %v\nwant %v", i, got[i], want[i], margins[i], got, want)
		}
	}
	return nil
}

// TestEngineAloneMatchesGreedy: one greedy request alone in the engine gets
// the tokens of a direct run of the backend, and on stories260K its known
// text.
func TestEngineAloneMatchesGreedy(t *testing.T) {
	for _, m := range []struct {
		name string
		open func(testing.TB) backends.Backend
		want []tokenizer.ID // the continuation of BOS; nil: a direct run's
	}{
		{"tiny", openTiny, nil},
		{"stories260K", openStories, parseIDs(storiesGreedy)},
	} {
		t.Run(m.name, func(t *testing.T) {
			b := m.open(t)
			want := m.want
			if want == nil {
				want, _ = directGreedy(t, b, []tokenizer.ID{1}, 40)
			}
			for _, batch := range []int{0, 1} {
				t.Run(fmt.Sprintf("batch=%d", batch), func(t *testing.T) {
					e := newEngine(t, b, backends.EngineOptions{Parallel: 2, Batch: batch})
					s := submit(t, e, backends.Request{Prompt: []tokenizer.ID{1}, MaxTokens: len(want), TopLogprobs: -1})
					res := collect(t, s, 1)[0]
					if !slices.Equal(res.ids(), want) {
						t.Errorf("tokens\n got %v\nwant %v", res.ids(), want)
					}
					if res.finish != "length" || res.err != nil {
						t.Errorf("finish %q, err %v; want length", res.finish, res.err)
					}
					if s.PromptTokens != 1 || s.CachedTokens != 0 {
						t.Errorf("prompt tokens %d, cached %d; want 1, 0", s.PromptTokens, s.CachedTokens)
					}
					st := e.Stats()
					if st.GeneratedTokens != uint64(len(want)) || st.PromptTokens != 1 || st.Running != 0 || st.Queued != 0 || st.KVBytes <= 0 {
						t.Errorf("stats %+v", st)
					}
				})
			}
		})
	}
}

// watched wraps a backend to record the shape of every Forward call and,
// when gate is set, to make each call wait for a value from it.
type watched struct {
	backends.Backend
	gate chan struct{}

	mu    sync.Mutex
	calls [][]stepShape
}

type stepShape struct {
	seq    backends.Sequence
	tokens int
	logits bool
}

func (w *watched) Forward(steps []backends.Step) error {
	if w.gate != nil {
		<-w.gate
	}
	call := make([]stepShape, len(steps))
	for i, st := range steps {
		call[i] = stepShape{st.Seq, len(st.Tokens), st.Logits != nil}
	}
	w.mu.Lock()
	w.calls = append(w.calls, call)
	w.mu.Unlock()
	return w.Backend.Forward(steps)
}

func (w *watched) snapshot() [][]stepShape {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.calls)
}

func TestEngineConcurrentMatchesAlone(t *testing.T) {
	b := openTiny(t)
	prompts := [][]tokenizer.ID{
		{1},
		{1, 403, 407, 261, 378},
		{1, 300, 17, 45, 460, 12, 99, 250, 310, 77, 401, 402, 33, 8, 290, 311, 500, 64, 128, 256},
		{1, 415, 278, 396, 259, 375, 290, 437, 398, 358, 350},
	}
	const n = 24
	want := make([][]tokenizer.ID, len(prompts))
	margins := make([][]float32, len(prompts))
	for i, p := range prompts {
		want[i], margins[i] = directGreedy(t, b, p, n)
	}

	// The first call waits until every request is in, so that the next ones
	// mix the decode of the one-token prompt with prefill chunks of the
	// others (Batch 8 splits the longer prompts).
	w := &watched{Backend: b, gate: make(chan struct{})}
	e := newEngine(t, w, backends.EngineOptions{Parallel: len(prompts), Batch: 8})
	streams := make([]*backends.Stream, len(prompts))
	for i, p := range prompts {
		streams[i] = submit(t, e, backends.Request{Prompt: p, MaxTokens: n})
	}
	close(w.gate)
	for i, s := range streams {
		res := collect(t, s, 1)[0]
		if res.finish != "length" {
			t.Errorf("prompt %d: finish %q, err %v", i, res.finish, res.err)
		}
		if err := sameGreedy(res.ids(), want[i], margins[i]); err != nil {
			t.Errorf("prompt %d: %v", i, err)
		}
	}

	most, mixed := 0, false
	for _, call := range w.snapshot() {
		most = max(most, len(call))
		prefill, decode, budget := false, false, 0
		for _, st := range call {
			prefill = prefill || st.tokens > 1
			decode = decode || st.tokens == 1 && st.logits
			if st.tokens > 1 {
				budget += st.tokens
			}
		}
		mixed = mixed || prefill && decode
		if budget > 8 {
			t.Errorf("a call prefilled %d tokens, more than the batch of 8", budget)
		}
	}
	if most != len(prompts) || !mixed {
		t.Errorf("at most %d sequences in one call (want %d), prefill mixed with decode: %v", most, len(prompts), mixed)
	}
}

func TestEngineRejects(t *testing.T) {
	b := openTiny(t)
	vocab := tokenizer.ID(b.Model().VocabSize)
	e := newEngine(t, b, backends.EngineOptions{MaxLen: 64})
	if e.MaxLen() != 64 {
		t.Fatalf("MaxLen %d, want 64", e.MaxLen())
	}
	ten := make([]tokenizer.ID, 10)
	for _, c := range []struct {
		name string
		r    backends.Request
		want error
	}{
		{"prompt+max over context", backends.Request{Prompt: ten, MaxTokens: 55}, backends.ErrContextLength},
		{"prompt over context", backends.Request{Prompt: make([]tokenizer.ID, 65), MaxTokens: 1}, backends.ErrContextLength},
		{"no prompt", backends.Request{MaxTokens: 5}, backends.ErrInvalidRequest},
		{"no max tokens", backends.Request{Prompt: ten}, backends.ErrInvalidRequest},
		{"token outside vocab", backends.Request{Prompt: []tokenizer.ID{1, vocab}, MaxTokens: 5}, backends.ErrInvalidRequest},
		{"negative token", backends.Request{Prompt: []tokenizer.ID{-1}, MaxTokens: 5}, backends.ErrInvalidRequest},
		{"too many choices", backends.Request{Prompt: ten, MaxTokens: 5, N: backends.MaxChoices + 1}, backends.ErrInvalidRequest},
		{"negative choices", backends.Request{Prompt: ten, MaxTokens: 5, N: -1}, backends.ErrInvalidRequest},
		{"too many logprobs", backends.Request{Prompt: ten, MaxTokens: 5, TopLogprobs: backends.MaxTopLogprobs + 1}, backends.ErrInvalidRequest},
		{"bad temperature", backends.Request{Prompt: ten, MaxTokens: 5, Sampling: backends.Params{Temperature: 3}}, backends.ErrInvalidRequest},
		{"bias outside vocab", backends.Request{Prompt: ten, MaxTokens: 5, Sampling: backends.Params{LogitBias: map[tokenizer.ID]float32{vocab: 1}}}, backends.ErrInvalidRequest},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := e.Submit(context.Background(), c.r)
			if !errors.Is(err, c.want) || s != nil {
				t.Errorf("Submit: %v, want %v", err, c.want)
			}
		})
	}
	var pe *backends.ParamError
	if _, err := e.Submit(context.Background(), backends.Request{Prompt: ten, MaxTokens: 5, Sampling: backends.Params{TopP: 2}}); !errors.As(err, &pe) || pe.Param != "top_p" {
		t.Errorf("Submit with top_p 2: %v, want a ParamError of top_p", err)
	}
	// The largest request that fits runs to its end.
	res := collect(t, submit(t, e, backends.Request{Prompt: ten, MaxTokens: 54}), 1)[0]
	if len(res.tokens) != 54 || res.finish != "length" {
		t.Errorf("10 + 54 tokens in a context of 64: %d tokens, finish %q, err %v", len(res.tokens), res.finish, res.err)
	}
	if _, err := e.Embed(context.Background(), make([]tokenizer.ID, 65)); !errors.Is(err, backends.ErrContextLength) {
		t.Errorf("Embed of 65 tokens: %v, want ErrContextLength", err)
	}
	if _, err := e.Embed(context.Background(), nil); !errors.Is(err, backends.ErrInvalidRequest) {
		t.Errorf("Embed of nothing: %v, want ErrInvalidRequest", err)
	}
}

func TestEngineQueueFull(t *testing.T) {
	w := &watched{Backend: openTiny(t), gate: make(chan struct{})}
	e := newEngine(t, w, backends.EngineOptions{Parallel: 1, QueueSize: 1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := backends.Request{Prompt: []tokenizer.ID{1}, MaxTokens: 8}
	// The gate holds the loop in its first call: the first request runs,
	// the second waits, the third finds the queue full. (Before the loop
	// takes the first, the free slot counts as room as well.)
	first, err := e.Submit(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	for e.Stats().Running == 0 {
		time.Sleep(time.Millisecond)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	second, err := e.Submit(ctx2, r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Submit(ctx, r); !errors.Is(err, backends.ErrQueueFull) {
		t.Fatalf("third request: %v, want ErrQueueFull", err)
	}
	if _, err := e.Embed(ctx, []tokenizer.ID{1}); !errors.Is(err, backends.ErrQueueFull) {
		t.Fatalf("embedding: %v, want ErrQueueFull", err)
	}
	if st := e.Stats(); st.Queued != 1 || st.Running != 1 {
		t.Errorf("stats with one request running and one queued: %+v", st)
	}
	// Cancelled while queued, the second request ends without a slot (the
	// loop sees it after the call it is in).
	cancel2()
	w.gate <- struct{}{}
	if res := collect(t, second, 1)[0]; len(res.tokens) != 0 || !errors.Is(res.err, context.Canceled) {
		t.Errorf("cancelled queued request: %d tokens, finish %q, err %v", len(res.tokens), res.finish, res.err)
	}
	third, err := e.Submit(ctx, r)
	if err != nil {
		t.Fatalf("request after the queue emptied: %v", err)
	}
	close(w.gate)
	for i, s := range []*backends.Stream{first, third} {
		if res := collect(t, s, 1)[0]; len(res.tokens) != 8 {
			t.Errorf("request %d: %d tokens, finish %q, err %v", i, len(res.tokens), res.finish, res.err)
		}
	}
	// With both done, there is room again.
	if res := collect(t, submit(t, e, r), 1)[0]; len(res.tokens) != 8 {
		t.Errorf("request after the queue drained: %d tokens, err %v", len(res.tokens), res.err)
	}
}

func TestEngineCancel(t *testing.T) {
	b := openTiny(t)
	greedy, _ := directGreedy(t, b, []tokenizer.ID{1}, 5)
	for _, c := range []struct {
		name  string
		steps int // forward calls the gate lets through before the cancellation
	}{
		{"while queued or prefilling", 0},
		{"while decoding", 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			// The gate sets the pace, so that the request cannot end by itself
			// before the cancellation, however the goroutines are scheduled.
			w := &watched{Backend: b, gate: make(chan struct{})}
			e := newEngine(t, w, backends.EngineOptions{Parallel: 1, MaxLen: 512})
			ctx, cancel := context.WithCancel(context.Background())
			s, err := e.Submit(ctx, backends.Request{Prompt: []tokenizer.ID{1}, MaxTokens: 500})
			if err != nil {
				t.Fatal(err)
			}
			for range c.steps {
				w.gate <- struct{}{}
				<-s.Events
			}
			before := e.Stats().GeneratedTokens
			cancel()
			close(w.gate)
			res := collect(t, s, 1)[0]
			if !errors.Is(res.err, context.Canceled) || res.finish != "" {
				t.Errorf("final event: finish %q, err %v; want context.Canceled", res.finish, res.err)
			}
			// The call the loop was in when cancel returned may still make a
			// token; none after it.
			if extra := e.Stats().GeneratedTokens - before; extra > 1 {
				t.Errorf("%d tokens generated after the cancellation, want at most 1", extra)
			}
			if st := e.Stats(); st.Running != 0 || st.Queued != 0 {
				t.Errorf("after the stream closed: %+v", st)
			}
			// The slot is free for the next request.
			res = collect(t, submit(t, e, backends.Request{Prompt: []tokenizer.ID{1}, MaxTokens: 5}), 1)[0]
			if !slices.Equal(res.ids(), greedy) {
				t.Errorf("after the cancellation: %v, err %v", res.ids(), res.err)
			}
		})
	}
	e := newEngine(t, b, backends.EngineOptions{Parallel: 1})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.Submit(ctx, backends.Request{Prompt: []tokenizer.ID{1}, MaxTokens: 5}); !errors.Is(err, context.Canceled) {
		t.Errorf("Submit with a done context: %v", err)
	}
	if _, err := e.Embed(ctx, []tokenizer.ID{1}); !errors.Is(err, context.Canceled) {
		t.Errorf("Embed with a done context: %v", err)
	}
}

func TestEngineFinishReasons(t *testing.T) {
	b := openTiny(t)
	greedy, _ := directGreedy(t, b, []tokenizer.ID{1}, 20)
	// The end-of-generation token of the first cases is the latest of the
	// first five greedy tokens that no earlier one repeats: the tokens before
	// it are sent, it ends the choice.
	k := 4
	for k > 0 && slices.Index(greedy, greedy[k]) != k {
		k--
	}
	if k == 0 {
		t.Fatalf("the greedy continuation %v repeats its first token: no case would end on a later one", greedy)
	}
	isToken := func(tok tokenizer.ID) func(tokenizer.ID) bool {
		return func(id tokenizer.ID) bool { return id == tok }
	}
	for _, c := range []struct {
		name      string
		eog       func(tokenizer.ID) bool
		maxTokens int
		want      []tokenizer.ID
		finish    string
	}{
		{"eog", isToken(greedy[k]), 20, greedy[:k], "stop"},
		{"eog on the first token", isToken(greedy[0]), 20, nil, "stop"},
		{"max tokens", nil, 5, greedy[:5], "length"},
		{"one token", nil, 1, greedy[:1], "length"},
		{"eog after max tokens", isToken(greedy[k]), k, greedy[:k], "length"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEngine(t, b, backends.EngineOptions{Parallel: 1, IsEOG: c.eog})
			res := collect(t, submit(t, e, backends.Request{Prompt: []tokenizer.ID{1}, MaxTokens: c.maxTokens}), 1)[0]
			if !slices.Equal(res.ids(), c.want) || res.finish != c.finish || res.err != nil {
				t.Errorf("tokens %v, finish %q, err %v; want %v, %q", res.ids(), res.finish, res.err, c.want, c.finish)
			}
		})
	}
}

func TestEngineMinTokensAndIgnoreEOS(t *testing.T) {
	b := openTiny(t)
	greedy, _ := directGreedy(t, b, []tokenizer.ID{1}, 20)
	// End-of-generation is the first greedy token: unbanned, a choice ends
	// at once.
	eog := greedy[0]
	e := newEngine(t, b, backends.EngineOptions{Parallel: 1, IsEOG: func(id tokenizer.ID) bool { return id == eog }})
	for _, c := range []struct {
		name       string
		req        backends.Request
		atLeast    int
		wantFinish string
	}{
		{"none", backends.Request{MaxTokens: 12}, 0, "stop"},
		{"min tokens", backends.Request{MaxTokens: 12, MinTokens: 4}, 4, ""},
		{"ignore eos", backends.Request{MaxTokens: 12, IgnoreEOS: true}, 12, "length"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.req.Prompt = []tokenizer.ID{1}
			res := collect(t, submit(t, e, c.req), 1)[0]
			if res.err != nil {
				t.Fatal(res.err)
			}
			ids := res.ids()
			if len(ids) < c.atLeast {
				t.Errorf("%d tokens %v, want at least %d", len(ids), ids, c.atLeast)
			}
			if i := slices.Index(ids, eog); i >= 0 {
				t.Errorf("the end-of-generation token was sent at %d: %v", i, ids)
			}
			if c.wantFinish != "" && res.finish != c.wantFinish {
				t.Errorf("finish %q, want %q", res.finish, c.wantFinish)
			}
		})
	}
}

func TestEngineLogprobs(t *testing.T) {
	b := openTiny(t)
	greedy, _ := directGreedy(t, b, []tokenizer.ID{1}, 6)
	e := newEngine(t, b, backends.EngineOptions{})
	for _, top := range []int{-1, 0, 3, backends.MaxTopLogprobs} {
		t.Run(fmt.Sprintf("top=%d", top), func(t *testing.T) {
			res := collect(t, submit(t, e, backends.Request{Prompt: []tokenizer.ID{1}, MaxTokens: len(greedy), TopLogprobs: top}), 1)[0]
			if !slices.Equal(res.ids(), greedy) {
				t.Fatalf("tokens %v, want %v", res.ids(), greedy)
			}
			for i, tok := range res.tokens {
				if len(tok.Top) != max(top, 0) {
					t.Fatalf("token %d: %d alternatives, want %d", i, len(tok.Top), max(top, 0))
				}
				if top < 0 {
					if tok.Logprob != 0 {
						t.Errorf("token %d: logprob %v without logprobs asked", i, tok.Logprob)
					}
					continue
				}
				if !(tok.Logprob <= 0) || tok.Logprob < -20 {
					t.Errorf("token %d: logprob %v", i, tok.Logprob)
				}
				if top > 0 {
					// Greedy: the chosen token is the most likely one.
					if tok.Top[0].ID != tok.ID || tok.Top[0].Logprob != tok.Logprob {
						t.Errorf("token %d (%d, %v): top %+v", i, tok.ID, tok.Logprob, tok.Top[0])
					}
					if !slices.IsSortedFunc(tok.Top, func(a, b backends.TokenLogprob) int { return -cmpF(a.Logprob, b.Logprob) }) {
						t.Errorf("token %d: alternatives out of order: %+v", i, tok.Top)
					}
				}
			}
		})
	}
}

func cmpF(a, b float32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// directSample runs prompt then n tokens straight on the backend with a
// sampler of p that accepts each generated token.
func directSample(tb testing.TB, b backends.Backend, p backends.Params, prompt []tokenizer.ID, n int) []tokenizer.ID {
	tb.Helper()
	seq, err := b.NewSequence(backends.SequenceOptions{MaxLen: len(prompt) + n})
	if err != nil {
		tb.Fatal(err)
	}
	defer seq.Close()
	smp := backends.NewSampler(p, b.Model().VocabSize)
	logits := make([]float32, b.Model().VocabSize)
	toks := slices.Clone(prompt)
	var out []tokenizer.ID
	for range n {
		if err := b.Forward([]backends.Step{{Seq: seq, Tokens: toks, Logits: logits}}); err != nil {
			tb.Fatal(err)
		}
		id := smp.Sample(logits)
		smp.Accept(id)
		out = append(out, id)
		toks = []tokenizer.ID{id}
	}
	return out
}

func TestEngineSamplingMatchesDirect(t *testing.T) {
	b := openTiny(t)
	seed := int64(7)
	prompt := []tokenizer.ID{1, 403, 407}
	const n = 30
	cases := []struct {
		name string
		p    backends.Params
	}{
		{"greedy with penalties", backends.Params{FrequencyPenalty: 1.5, PresencePenalty: 0.5, RepeatPenalty: 1.3, RepeatLastN: -1}},
		{"seeded llama.cpp defaults", func() backends.Params { p := backends.DefaultParams(); p.Seed = &seed; return p }()},
		{"logit bias", backends.Params{LogitBias: map[tokenizer.ID]float32{261: -100, 286: 5}}},
	}
	want := make([][]tokenizer.ID, len(cases))
	for i, c := range cases {
		want[i] = directSample(t, b, c.p, prompt, n)
	}
	plain, _ := directGreedy(t, b, prompt, n)
	// All at once, in one engine whose slots are reused by the next case:
	// each slot's sampler must take its request's parameters afresh.
	e := newEngine(t, b, backends.EngineOptions{Parallel: 2})
	streams := make([]*backends.Stream, len(cases))
	for i, c := range cases {
		streams[i] = submit(t, e, backends.Request{Prompt: prompt, MaxTokens: n, Sampling: c.p})
	}
	for i, c := range cases {
		if got := collect(t, streams[i], 1)[0].ids(); !slices.Equal(got, want[i]) {
			t.Errorf("%s:\n got %v\nwant %v", c.name, got, want[i])
		}
	}
	if slices.Equal(want[0], plain) {
		t.Error("the penalties changed nothing: the case tests nothing")
	}
}

func TestEngineChoices(t *testing.T) {
	b := openTiny(t)
	seed := int64(42)
	r := backends.Request{
		Prompt:    []tokenizer.ID{1, 403, 407},
		MaxTokens: 24,
		N:         3,
		Sampling:  backends.Params{Temperature: 1.5, Seed: &seed},
	}
	// Two slots for three choices: the third starts when one ends.
	e := newEngine(t, b, backends.EngineOptions{Parallel: 2})
	run := func(r backends.Request) [][]tokenizer.ID {
		var out [][]tokenizer.ID
		for i, c := range collect(t, submit(t, e, r), max(r.N, 1)) {
			if c.finish != "length" || len(c.tokens) != r.MaxTokens {
				t.Fatalf("choice %d: %d tokens, finish %q, err %v", i, len(c.tokens), c.finish, c.err)
			}
			out = append(out, c.ids())
		}
		return out
	}
	a := run(r)
	if slices.Equal(a[0], a[1]) && slices.Equal(a[1], a[2]) {
		t.Errorf("three identical choices at temperature 1.5: %v", a[0])
	}
	if b := run(r); !slices.EqualFunc(a, b, slices.Equal) {
		t.Errorf("the same seed gave other choices:\n%v\n%v", a, b)
	}
	// Choice 0 draws from the seed itself, as a single choice does.
	one := r
	one.N = 1
	if b := run(one); !slices.Equal(a[0], b[0]) {
		t.Errorf("choice 0 of three %v differs from the single choice %v", a[0], b[0])
	}
}

func TestEnginePrefixReuse(t *testing.T) {
	b := openTiny(t)
	first := backends.Request{Prompt: []tokenizer.ID{1, 403, 407}, MaxTokens: 20}
	run := func(noReuse bool) (out1, out2 []tokenizer.ID, cached int, st backends.EngineStats) {
		e := newEngine(t, b, backends.EngineOptions{Parallel: 2, NoPrefixReuse: noReuse})
		out1 = collect(t, submit(t, e, first), 1)[0].ids()
		// A second turn: the first prompt, its answer and a few more tokens.
		second := backends.Request{Prompt: slices.Concat(first.Prompt, out1, []tokenizer.ID{13, 261}), MaxTokens: 20}
		s := submit(t, e, second)
		out2 = collect(t, s, 1)[0].ids()
		st = e.Stats()
		e.Close()
		return out1, out2, s.CachedTokens, st
	}
	a1, a2, cached, st := run(false)
	b1, b2, noCached, _ := run(true)
	// The slot holds the prompt and every generated token but the last,
	// which was never fed back.
	if want := len(first.Prompt) + len(a1) - 1; cached != want {
		t.Errorf("cached tokens %d, want %d", cached, want)
	}
	if st.CachedTokens != uint64(cached) {
		t.Errorf("stats count %d cached tokens, the stream %d", st.CachedTokens, cached)
	}
	if noCached != 0 {
		t.Errorf("NoPrefixReuse: %d cached tokens", noCached)
	}
	if !slices.Equal(a1, b1) || !slices.Equal(a2, b2) {
		t.Errorf("with reuse %v %v, without %v %v", a1, a2, b1, b2)
	}

	// The same prompt again recomputes its last token and gives the same.
	e := newEngine(t, b, backends.EngineOptions{Parallel: 1})
	collect(t, submit(t, e, first), 1)
	s := submit(t, e, first)
	if got := collect(t, s, 1)[0].ids(); !slices.Equal(got, a1) || s.CachedTokens != len(first.Prompt)-1 {
		t.Errorf("repeated prompt: %v with %d cached, want %v with %d", got, s.CachedTokens, a1, len(first.Prompt)-1)
	}
}

func norm(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

func TestEngineEmbed(t *testing.T) {
	b := openTiny(t)
	e := newEngine(t, b, backends.EngineOptions{Parallel: 2, Batch: 3})
	ctx := context.Background()
	in := []tokenizer.ID{1, 403, 407, 261, 378, 432, 383}
	a, err := e.Embed(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != b.Model().Dim || math.Abs(norm(a)-1) > 1e-5 {
		t.Fatalf("embedding of %d values with norm %v", len(a), norm(a))
	}
	again, err := e.Embed(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a, again) {
		t.Error("the same input gave another embedding")
	}
	other, err := e.Embed(ctx, []tokenizer.ID{1, 300, 17, 45})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(a, other) {
		t.Error("different inputs gave the same embedding")
	}

	// Mean pooling: the embedding is the direction of the sum of the final
	// hidden states, computed here in one call.
	seq, err := b.NewSequence(backends.SequenceOptions{MaxLen: len(in)})
	if err != nil {
		t.Fatal(err)
	}
	dim := b.Model().Dim
	hidden := make([]float32, len(in)*dim)
	e.Close() // the backend is ours again
	if err := b.Forward([]backends.Step{{Seq: seq, Tokens: slices.Clone(in), Outputs: backends.AllTokens, Hidden: hidden}}); err != nil {
		t.Fatal(err)
	}
	mean := make([]float32, dim)
	for r := range len(in) {
		for j := range dim {
			mean[j] += hidden[r*dim+j]
		}
	}
	n := norm(mean)
	for j := range mean {
		if d := math.Abs(float64(mean[j])/n - float64(a[j])); d > 1e-5 {
			t.Fatalf("element %d: %v, want %v", j, a[j], float64(mean[j])/n)
		}
	}
}

func TestEngineEmbedWhileGenerating(t *testing.T) {
	b := openTiny(t)
	greedy, margins := directGreedy(t, b, []tokenizer.ID{1}, 40)
	e := newEngine(t, b, backends.EngineOptions{Parallel: 3, Batch: 4})
	in := []tokenizer.ID{1, 403, 407, 261, 378, 432, 383}
	alone, err := e.Embed(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	s := submit(t, e, backends.Request{Prompt: []tokenizer.ID{1}, MaxTokens: 40})
	<-s.Events
	mixed, err := e.Embed(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	for j := range alone {
		if math.Abs(float64(alone[j]-mixed[j])) > 1e-5 {
			t.Fatalf("element %d: %v in a batch, %v alone", j, mixed[j], alone[j])
		}
	}
	if err := sameGreedy(collect(t, s, 1)[0].ids(), greedy[1:], margins[1:]); err != nil {
		t.Errorf("generation beside an embedding: %v", err)
	}
}

func TestEngineClose(t *testing.T) {
	w := &watched{Backend: openTiny(t), gate: make(chan struct{})}
	before := runtime.NumGoroutine()
	e, err := backends.NewEngine(w, backends.EngineOptions{Parallel: 1, QueueSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	running := submit(t, e, backends.Request{Prompt: []tokenizer.ID{1}, MaxTokens: 400})
	queued, err := e.Submit(ctx, backends.Request{Prompt: []tokenizer.ID{1}, MaxTokens: 400, N: 2})
	if err != nil {
		t.Fatal(err)
	}
	w.gate <- struct{}{}
	<-running.Events
	// Close while the loop waits in its second call; then let it go on.
	closed := make(chan error)
	go func() { closed <- e.Close() }()
	for {
		if _, err := e.Submit(context.Background(), backends.Request{Prompt: []tokenizer.ID{1}, MaxTokens: 4}); errors.Is(err, backends.ErrClosed) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(w.gate)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	for i, s := range []struct {
		*backends.Stream
		n int
	}{{running, 1}, {queued, 2}} {
		for j, c := range collect(t, s.Stream, s.n) {
			if !errors.Is(c.err, backends.ErrClosed) {
				t.Errorf("stream %d choice %d: %d tokens, finish %q, err %v; want ErrClosed", i, j, len(c.tokens), c.finish, c.err)
			}
		}
	}
	if _, err := e.Embed(context.Background(), []tokenizer.ID{1}); !errors.Is(err, backends.ErrClosed) {
		t.Errorf("Embed after Close: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after Close, %d before NewEngine", n, before)
	}
}

// fakeBackend is a deterministic model without weights: the next token is a
// function of the last token and its position, and the hidden state of a
// token a function of it and its position. It checks Forward's contract
// and allocates nothing, so that the engine's own allocations show.
type fakeBackend struct {
	vocab, dim, ctx int
	call            int
	failAt          int // the call that fails, if > 0
	// kvTokens, if > 0, is the room of a KV cache all sequences share:
	// a call that would hold more fails as a full pool does.
	kvTokens  int
	seqs      []*fakeSeq
	prefilled int // tokens of steps of two or more
}

var errFake = errors.New("fake: injected failure")

type fakeSeq struct {
	tokens []tokenizer.ID
	call   int
}

func (f *fakeBackend) Threads() int { return 1 }

func (f *fakeBackend) Model() backends.ModelInfo {
	return backends.ModelInfo{Arch: "fake", VocabSize: f.vocab, Dim: f.dim, Layers: 1, ContextLength: f.ctx}
}

func (f *fakeBackend) NewSequence(o backends.SequenceOptions) (backends.Sequence, error) {
	n := o.MaxLen
	if n == 0 {
		n = f.ctx
	}
	s := &fakeSeq{tokens: make([]tokenizer.ID, 0, n)}
	f.seqs = append(f.seqs, s)
	return s, nil
}

func (f *fakeBackend) next(tok, pos int) int { return (7*tok + 3*pos + 1) % f.vocab }

func (f *fakeBackend) Forward(steps []backends.Step) error {
	f.call++
	if f.call == f.failAt {
		return errFake
	}
	for i, st := range steps {
		s := st.Seq.(*fakeSeq)
		if s.call == f.call || len(st.Tokens) == 0 || len(s.tokens)+len(st.Tokens) > cap(s.tokens) {
			return fmt.Errorf("fake: bad step %d", i)
		}
		s.call = f.call
	}
	if f.kvTokens > 0 {
		held := 0
		for _, s := range f.seqs {
			held += len(s.tokens)
		}
		for _, st := range steps {
			held += len(st.Tokens)
		}
		if held > f.kvTokens {
			return fmt.Errorf("fake: %d tokens in a cache of %d: %w", held, f.kvTokens, backends.ErrNoRoom)
		}
	}
	for _, st := range steps {
		s := st.Seq.(*fakeSeq)
		if len(st.Tokens) > 1 {
			f.prefilled += len(st.Tokens)
		}
		for j, tok := range st.Tokens {
			pos := len(s.tokens)
			s.tokens = append(s.tokens, tok)
			row := -1
			switch {
			case st.Outputs == backends.AllTokens:
				row = j
			case j == len(st.Tokens)-1:
				row = 0
			}
			if row < 0 {
				continue
			}
			if st.Logits != nil {
				l := st.Logits[row*f.vocab : (row+1)*f.vocab]
				clear(l)
				l[f.next(int(tok), pos)] = 10
			}
			if st.Hidden != nil {
				for k := range f.dim {
					st.Hidden[row*f.dim+k] = float32((int(tok)+1)*(k+1)%5) + float32(pos%3)
				}
			}
		}
	}
	return nil
}

func (f *fakeBackend) Close() error { return nil }

func (s *fakeSeq) Len() int               { return len(s.tokens) }
func (s *fakeSeq) MaxLen() int            { return cap(s.tokens) }
func (s *fakeSeq) Tokens() []tokenizer.ID { return s.tokens }
func (s *fakeSeq) Truncate(n int) error   { s.tokens = s.tokens[:n]; return nil }
func (s *fakeSeq) Reset()                 { s.tokens = s.tokens[:0] }
func (s *fakeSeq) Reuse(tokens []tokenizer.ID, limit int) int {
	n := 0
	for n < min(len(s.tokens), len(tokens), limit) && s.tokens[n] == tokens[n] {
		n++
	}
	s.tokens = s.tokens[:n]
	return n
}
func (s *fakeSeq) ShareFrom(src backends.Sequence) error {
	o := src.(*fakeSeq)
	if len(o.tokens) > cap(s.tokens) {
		return backends.ErrContextFull
	}
	s.tokens = append(s.tokens[:0], o.tokens...)
	return nil
}
func (s *fakeSeq) CacheBytes() int64 { return int64(cap(s.tokens)) }
func (s *fakeSeq) Close() error      { return nil }

// greedy is the fake model's greedy continuation of prompt.
func (f *fakeBackend) greedy(prompt []tokenizer.ID, n int) []tokenizer.ID {
	tok, pos := int(prompt[len(prompt)-1]), len(prompt)-1
	var out []tokenizer.ID
	for range n {
		tok = f.next(tok, pos)
		pos++
		out = append(out, tokenizer.ID(tok))
	}
	return out
}

func TestEngineSlowConsumer(t *testing.T) {
	f := &fakeBackend{vocab: 97, dim: 4, ctx: 12000}
	e := newEngine(t, f, backends.EngineOptions{Parallel: 2})
	// Nobody reads the long stream for a while: it fills its buffer and
	// waits, while the short one runs to its end.
	long := submit(t, e, backends.Request{Prompt: []tokenizer.ID{5}, MaxTokens: 10000})
	short := submit(t, e, backends.Request{Prompt: []tokenizer.ID{6}, MaxTokens: 50})
	if got := collect(t, short, 1)[0].ids(); !slices.Equal(got, f.greedy([]tokenizer.ID{6}, 50)) {
		t.Errorf("short stream: %v", got)
	}
	res := collect(t, long, 1)[0]
	if !slices.Equal(res.ids(), f.greedy([]tokenizer.ID{5}, 10000)) || res.finish != "length" {
		t.Errorf("long stream: %d tokens, finish %q, err %v", len(res.tokens), res.finish, res.err)
	}

	// A stream nobody reads fills its buffer and waits; cancelled then, it
	// still gets its final event.
	ctx, cancel := context.WithCancel(context.Background())
	before := e.Stats().GeneratedTokens
	s, err := e.Submit(ctx, backends.Request{Prompt: []tokenizer.ID{5}, MaxTokens: 10000, N: 2})
	if err != nil {
		t.Fatal(err)
	}
	for last := uint64(0); ; {
		time.Sleep(20 * time.Millisecond)
		n := e.Stats().GeneratedTokens - before
		if n == last {
			break
		}
		last = n
	}
	cancel()
	// Read only once the loop has ended both choices on the full buffer.
	for e.Stats().Running > 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(10 * time.Millisecond)
	total := 0
	for _, c := range collect(t, s, 2) {
		total += len(c.tokens)
		if !errors.Is(c.err, context.Canceled) {
			t.Errorf("final event %q, %v; want context.Canceled", c.finish, c.err)
		}
	}
	if total >= 2*10000 {
		t.Errorf("%d tokens: the stream never waited for its reader", total)
	}
}

func TestEngineDecodeAllocatesNothing(t *testing.T) {
	f := &fakeBackend{vocab: 1000, dim: 4, ctx: 4100}
	e := newEngine(t, f, backends.EngineOptions{Parallel: 2})
	const n = 4000
	s := submit(t, e, backends.Request{Prompt: []tokenizer.ID{5}, MaxTokens: n})
	<-s.Events
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	count := 1
	for range s.Events {
		count++
	}
	runtime.ReadMemStats(&m1)
	if count != n+1 {
		t.Fatalf("%d events, want %d", count, n+1)
	}
	// Tokens come in blocks of 256: about 16 allocations, plus noise.
	if allocs := m1.Mallocs - m0.Mallocs; allocs > n/100 {
		t.Errorf("%d allocations for %d decode steps", allocs, n)
	}
}

func TestEngineFakeBatching(t *testing.T) {
	f := &fakeBackend{vocab: 101, dim: 8, ctx: 256}
	e := newEngine(t, f, backends.EngineOptions{Parallel: 3, QueueSize: 16, Batch: 5})
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Go(func() {
			prompt := make([]tokenizer.ID, 1+i*3)
			for j := range prompt {
				prompt[j] = tokenizer.ID((i*13 + j*7) % 101)
			}
			s, err := e.Submit(context.Background(), backends.Request{Prompt: prompt, MaxTokens: 30, N: 1 + i%3})
			if err != nil {
				t.Error(err)
				return
			}
			res, err := drain(s, 1+i%3)
			if err != nil {
				t.Error(err)
				return
			}
			for c, r := range res {
				if !slices.Equal(r.ids(), f.greedy(prompt, 30)) {
					t.Errorf("request %d choice %d: %v", i, c, r.ids())
				}
			}
			if i%4 == 0 {
				v, err := e.Embed(context.Background(), prompt)
				if err != nil || math.Abs(norm(v)-1) > 1e-5 {
					t.Errorf("embedding %d: norm %v, err %v", i, norm(v), err)
				}
			}
		})
	}
	wg.Wait()
	if st := e.Stats(); st.Running != 0 || st.Queued != 0 {
		t.Errorf("stats after all requests: %+v", st)
	}
}

// TestEnginePreemption: three choices that together need more KV room than
// there is all finish with the tokens they would have made alone; the
// engine drops and recomputes caches to get there.
func TestEnginePreemption(t *testing.T) {
	f := &fakeBackend{vocab: 97, dim: 4, ctx: 100, kvTokens: 50}
	e := newEngine(t, f, backends.EngineOptions{Parallel: 3})
	prompts := [][]tokenizer.ID{{1, 2, 3, 4, 5}, {6, 7, 8}, {9, 10, 11, 12}}
	var streams []*backends.Stream
	for _, p := range prompts {
		streams = append(streams, submit(t, e, backends.Request{Prompt: p, MaxTokens: 40}))
	}
	for i, s := range streams {
		c := collect(t, s, 1)[0]
		if c.err != nil || c.finish != "length" || !slices.Equal(c.ids(), f.greedy(prompts[i], 40)) {
			t.Errorf("stream %d: finish %q, err %v\n got %v\nwant %v", i, c.finish, c.err, c.ids(), f.greedy(prompts[i], 40))
		}
	}
	if st := e.Stats(); st.Preemptions == 0 {
		t.Errorf("no preemption counted: %+v", st)
	}
}

// TestEnginePreemptionNative: four greedy streams through a KV pool that
// holds less than half of what they need all get the tokens they get with
// room to spare, within a bounded number of preemptions.
func TestEnginePreemptionNative(t *testing.T) {
	run := func(kvTokens int) ([][]tokenizer.ID, backends.EngineStats) {
		b := openTinyWith(t, backends.Options{Threads: 1, KVTokens: kvTokens})
		e := newEngine(t, b, backends.EngineOptions{Parallel: 4, MaxLen: 256})
		var streams []*backends.Stream
		for i := range 4 {
			streams = append(streams, submit(t, e, backends.Request{Prompt: []tokenizer.ID{1, 403, 407, tokenizer.ID(261 + i)}, MaxTokens: 200}))
		}
		var out [][]tokenizer.ID
		for i, s := range streams {
			c := collect(t, s, 1)[0]
			if c.err != nil || c.finish != "length" {
				t.Fatalf("kv %d, stream %d: finish %q, err %v", kvTokens, i, c.finish, c.err)
			}
			out = append(out, c.ids())
		}
		return out, e.Stats()
	}
	want, _ := run(1024)
	got, st := run(320)
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("stream %d differs with a small pool:\n got %v\nwant %v", i, got[i], want[i])
		}
	}
	if st.Preemptions == 0 || st.Preemptions > 100 {
		t.Errorf("%d preemptions", st.Preemptions)
	}
}

// TestEngineChoicesSharePrompt: the choices of one request prefill the
// prompt once; the others share it and its first logits.
func TestEngineChoicesSharePrompt(t *testing.T) {
	for _, noReuse := range []bool{false, true} {
		t.Run(fmt.Sprintf("noReuse=%v", noReuse), func(t *testing.T) {
			f := &fakeBackend{vocab: 97, dim: 4, ctx: 100}
			e := newEngine(t, f, backends.EngineOptions{Parallel: 3, NoPrefixReuse: noReuse})
			prompt := []tokenizer.ID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
			for i, c := range collect(t, submit(t, e, backends.Request{Prompt: prompt, MaxTokens: 8, N: 3}), 3) {
				if c.err != nil || !slices.Equal(c.ids(), f.greedy(prompt, 8)) {
					t.Errorf("choice %d: err %v, %v", i, c.err, c.ids())
				}
			}
			want := len(prompt)
			if noReuse {
				want *= 3
			}
			if f.prefilled != want {
				t.Errorf("%d prompt tokens prefilled, want %d", f.prefilled, want)
			}
			if st := e.Stats(); !noReuse && st.CachedTokens != uint64(2*len(prompt)) {
				t.Errorf("cached tokens %d, want %d", st.CachedTokens, 2*len(prompt))
			}
		})
	}
}

func TestEngineBackendError(t *testing.T) {
	f := &fakeBackend{vocab: 50, dim: 4, ctx: 100, failAt: 5}
	e := newEngine(t, f, backends.EngineOptions{Parallel: 2})
	// Both choices are in the failing call: both end with its error.
	for i, c := range collect(t, submit(t, e, backends.Request{Prompt: []tokenizer.ID{3}, MaxTokens: 20, N: 2}), 2) {
		if !errors.Is(c.err, errFake) || len(c.tokens) >= 20 {
			t.Errorf("choice %d: %d tokens, finish %q, err %v; want the backend's error", i, len(c.tokens), c.finish, c.err)
		}
	}
	// The engine goes on.
	if got := collect(t, submit(t, e, backends.Request{Prompt: []tokenizer.ID{3}, MaxTokens: 20}), 1)[0].ids(); !slices.Equal(got, f.greedy([]tokenizer.ID{3}, 20)) {
		t.Errorf("after the failure: %v", got)
	}
}
