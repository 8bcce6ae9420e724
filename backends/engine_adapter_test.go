package backends_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/internal/testmodel"
	"github.com/ruvllm/ruvllm/lora"
	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// openTinyConfig is openTiny with the model's hyperparameters, which random
// adapters are made for.
func openTinyConfig(tb testing.TB) (backends.Backend, *models.Config) {
	tb.Helper()
	m := testmodel.Tiny(tb)
	return testmodel.Backend(tb, "native", m, backends.Options{Threads: 1}), m.Config
}

// strongAdapter is a random adapter on every linear layer, large enough to
// change the model's greedy continuation.
func strongAdapter(tb testing.TB, cfg *models.Config, rank int, seed uint64) *lora.Adapter {
	tb.Helper()
	a, err := lora.Random(cfg, lora.RandomSpec{Rank: rank, Seed: seed, Amplitude: 0.1})
	if err != nil {
		tb.Fatal(err)
	}
	a.Name = fmt.Sprintf("random-%d", seed)
	return a
}

// adapterPrompt is a prompt of eleven tokens, a story opening in
// stories260K's vocabulary.
var adapterPrompt = []tokenizer.ID{1, 415, 278, 396, 259, 375, 290, 437, 398, 358, 350}

// sameResult compares two runs token by token, logprobs included, within
// tol. An adapter's update of a row depends on that row alone, so a
// sequence gets the same tokens whatever else is in its batch; the logprobs
// may differ in the last bits where the backend's attention takes another
// path for a batch than for one row.
func sameResult(got, want choiceResult, tol float64) error {
	if err := sameTokens(got, want); err != nil {
		return err
	}
	for i := range got.tokens {
		if d := math.Abs(float64(got.tokens[i].Logprob - want.tokens[i].Logprob)); d > tol {
			return fmt.Errorf("token %d: logprob %v, want %v", i, got.tokens[i].Logprob, want.tokens[i].Logprob)
		}
	}
	return nil
}

// sameTokens compares two runs' tokens and finish.
func sameTokens(got, want choiceResult) error {
	if got.finish != want.finish || got.err != nil || want.err != nil {
		return fmt.Errorf("finish %q (err %v), want %q (err %v)", got.finish, got.err, want.finish, want.err)
	}
	if !slices.Equal(got.ids(), want.ids()) {
		return fmt.Errorf("tokens\n got %v\nwant %v", got.ids(), want.ids())
	}
	return nil
}

// TestEngineAdaptersBatchedMatchAlone runs requests with adapter A,
// adapter B, no adapter and A at half scale in one batch, and checks that
// each gets exactly the tokens it gets alone.
func TestEngineAdaptersBatchedMatchAlone(t *testing.T) {
	b, cfg := openTinyConfig(t)
	aA, aB := strongAdapter(t, cfg, 4, 1), strongAdapter(t, cfg, 8, 2)
	const n = 16
	reqs := []backends.Request{
		{Prompt: adapterPrompt, MaxTokens: n, Adapter: aA},
		{Prompt: adapterPrompt, MaxTokens: n, Adapter: aB},
		{Prompt: adapterPrompt, MaxTokens: n},
		{Prompt: adapterPrompt, MaxTokens: n, Adapter: aA, AdapterScale: 0.5},
	}
	alone := make([]choiceResult, len(reqs))
	for i, r := range reqs {
		e := newEngine(t, b, backends.EngineOptions{Parallel: 1})
		alone[i] = collect(t, submit(t, e, r), 1)[0]
		e.Close()
	}
	// The adapters make a difference, or the comparison proves nothing.
	for _, pair := range [][2]int{{0, 2}, {1, 2}, {0, 1}, {0, 3}} {
		if slices.Equal(alone[pair[0]].ids(), alone[pair[1]].ids()) {
			t.Fatalf("requests %d and %d give the same tokens %v: the adapters change nothing", pair[0], pair[1], alone[pair[0]].ids())
		}
	}

	w := &watched{Backend: b, gate: make(chan struct{})}
	e := newEngine(t, w, backends.EngineOptions{Parallel: len(reqs)})
	streams := make([]*backends.Stream, len(reqs))
	for i, r := range reqs {
		streams[i] = submit(t, e, r)
	}
	close(w.gate)
	for i, s := range streams {
		if err := sameResult(collect(t, s, 1)[0], alone[i], 1e-3); err != nil {
			t.Errorf("request %d batched: %v", i, err)
		}
	}
	most := 0
	for _, call := range w.snapshot() {
		most = max(most, len(call))
	}
	if most != len(reqs) {
		t.Errorf("at most %d sequences in one forward call, want %d", most, len(reqs))
	}
}

// TestEngineAdapterPrefixReuse checks that cached tokens are reused only by
// a request with the same adapter and scale, and that a slot running the
// request's adapter is preferred.
func TestEngineAdapterPrefixReuse(t *testing.T) {
	b, cfg := openTinyConfig(t)
	aA, aB := strongAdapter(t, cfg, 4, 1), strongAdapter(t, cfg, 8, 2)
	run := func(e *backends.Engine, r backends.Request) (choiceResult, int) {
		t.Helper()
		s := submit(t, e, r)
		res := collect(t, s, 1)[0]
		return res, s.CachedTokens
	}
	req := func(a *lora.Adapter, scale float32) backends.Request {
		return backends.Request{Prompt: adapterPrompt, MaxTokens: 4, Adapter: a, AdapterScale: scale}
	}
	full := len(adapterPrompt) - 1 // the last prompt token is always recomputed

	t.Run("one slot", func(t *testing.T) {
		e := newEngine(t, b, backends.EngineOptions{Parallel: 1})
		want := map[string]choiceResult{}
		for _, c := range []struct {
			name   string
			r      backends.Request
			cached int
		}{
			{"A", req(aA, 1), 0},
			{"A again", req(aA, 0), full}, // scale 0 means 1
			{"base after A", req(nil, 0), 0},
			{"base again", req(nil, 0), full},
			{"A after base", req(aA, 1), 0},
			{"A at half scale", req(aA, 0.5), 0},
			{"B", req(aB, 1), 0},
			{"B again", req(aB, 1), full},
		} {
			res, cached := run(e, c.r)
			if cached != c.cached {
				t.Errorf("%s: %d cached tokens, want %d", c.name, cached, c.cached)
			}
			// A run after another adapter gives what a fresh run gives,
			// bit for bit (both prefill the whole prompt); a run reusing the
			// cache the same tokens.
			compare := func(got, want choiceResult) error { return sameResult(got, want, 0) }
			if cached > 0 {
				compare = sameTokens
			}
			key := fmt.Sprintf("%p/%v", c.r.Adapter, c.r.AdapterScale)
			if c.r.AdapterScale == 0 && c.r.Adapter != nil {
				key = fmt.Sprintf("%p/1", c.r.Adapter)
			}
			if w, ok := want[key]; ok {
				if err := compare(res, w); err != nil {
					t.Errorf("%s: %v", c.name, err)
				}
			} else {
				fresh := newEngine(t, b, backends.EngineOptions{Parallel: 1})
				w, _ := run(fresh, c.r)
				fresh.Close()
				if err := compare(res, w); err != nil {
					t.Errorf("%s against a fresh engine: %v", c.name, err)
				}
				want[key] = res
			}
		}
	})

	t.Run("the slot with the adapter is preferred", func(t *testing.T) {
		e := newEngine(t, b, backends.EngineOptions{Parallel: 3})
		// Three slots: one runs A, one B, one none, all with the prompt.
		for _, r := range []backends.Request{req(aA, 1), req(aB, 1), req(nil, 0)} {
			if _, cached := run(e, r); cached != 0 {
				t.Fatalf("first run of each: %d cached tokens", cached)
			}
		}
		// Each now finds its own slot, whichever was used least recently.
		for _, r := range []backends.Request{req(aB, 1), req(nil, 0), req(aA, 1), req(aA, 1)} {
			if _, cached := run(e, r); cached != full {
				name := "none"
				if r.Adapter != nil {
					name = r.Adapter.Name
				}
				t.Errorf("adapter %s: %d cached tokens, want %d", name, cached, full)
			}
		}
	})
}

// TestEngineEmbedAfterAdapter checks that an embedding never runs with the
// adapter a slot's previous request used.
func TestEngineEmbedAfterAdapter(t *testing.T) {
	b, cfg := openTinyConfig(t)
	a := strongAdapter(t, cfg, 4, 1)
	base := newEngine(t, b, backends.EngineOptions{Parallel: 1})
	want, err := base.Embed(context.Background(), adapterPrompt)
	if err != nil {
		t.Fatal(err)
	}
	base.Close()
	e := newEngine(t, b, backends.EngineOptions{Parallel: 1})
	collect(t, submit(t, e, backends.Request{Prompt: adapterPrompt, MaxTokens: 2, Adapter: a}), 1)
	got, err := e.Embed(context.Background(), adapterPrompt)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("embedding after an adapter request differs from the base model's")
	}
}

func TestEngineAdapterRejects(t *testing.T) {
	b, cfg := openTinyConfig(t)
	a := strongAdapter(t, cfg, 4, 1)
	e := newEngine(t, b, backends.EngineOptions{Parallel: 1})
	for _, scale := range []float32{float32(math.NaN()), float32(math.Inf(1))} {
		if _, err := e.Submit(context.Background(), backends.Request{Prompt: adapterPrompt, MaxTokens: 2, Adapter: a, AdapterScale: scale}); !errors.Is(err, backends.ErrInvalidRequest) {
			t.Errorf("scale %v: %v, want ErrInvalidRequest", scale, err)
		}
	}

	// An adapter for another shape of model fails when its choice starts
	// (the backend checks it), and the engine goes on.
	other := *cfg
	other.FFN *= 2
	misfit, err := lora.Random(&other, lora.RandomSpec{Rank: 2, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	res := collect(t, submit(t, e, backends.Request{Prompt: adapterPrompt, MaxTokens: 2, Adapter: misfit}), 1)[0]
	if !errors.Is(res.err, backends.ErrInvalidRequest) || !errors.Is(res.err, lora.ErrInvalid) || len(res.tokens) != 0 {
		t.Errorf("misfit adapter: %d tokens, err %v; want ErrInvalidRequest wrapping lora.ErrInvalid", len(res.tokens), res.err)
	}
	if st := e.Stats(); st.Running != 0 {
		t.Errorf("stats after the failed start: %+v", st)
	}
	if res := collect(t, submit(t, e, backends.Request{Prompt: adapterPrompt, MaxTokens: 2, Adapter: a}), 1)[0]; res.err != nil || len(res.tokens) != 2 {
		t.Errorf("after the failed start: %d tokens, err %v", len(res.tokens), res.err)
	}

	// A backend without adapters refuses them at once.
	fe := newEngine(t, &fakeBackend{vocab: 50, dim: 4, ctx: 64}, backends.EngineOptions{Parallel: 1})
	if _, err := fe.Submit(context.Background(), backends.Request{Prompt: []tokenizer.ID{1}, MaxTokens: 2, Adapter: a}); !errors.Is(err, backends.ErrInvalidRequest) {
		t.Errorf("fake backend with an adapter: %v, want ErrInvalidRequest", err)
	}
}

// TestEngineStatsAdapters checks the adapter names Stats reports while the
// loop is held in a Forward call: the running choice's, and every queued
// request's once, sorted; and none once all have ended.
func TestEngineStatsAdapters(t *testing.T) {
	b, cfg := openTinyConfig(t)
	w := &watched{Backend: b, gate: make(chan struct{})}
	e := newEngine(t, w, backends.EngineOptions{Parallel: 1, QueueSize: 4})
	aA, aB := strongAdapter(t, cfg, 4, 1), strongAdapter(t, cfg, 4, 2)
	reqs := []backends.Request{
		{Prompt: adapterPrompt, MaxTokens: 2, Adapter: aB},
		{Prompt: adapterPrompt, MaxTokens: 2, Adapter: aA},
		{Prompt: adapterPrompt, MaxTokens: 2},
		{Prompt: adapterPrompt, MaxTokens: 2, Adapter: aB},
	}
	streams := []*backends.Stream{submit(t, e, reqs[0])}
	for e.Stats().Running == 0 {
		time.Sleep(time.Millisecond)
	}
	for _, r := range reqs[1:] {
		streams = append(streams, submit(t, e, r))
	}
	st := e.Stats()
	if !slices.Equal(st.RunningAdapters, []string{aB.Name}) || !slices.Equal(st.WaitingAdapters, []string{aA.Name, aB.Name}) {
		t.Errorf("running adapters %q, waiting %q; want [%s] and [%s %s]", st.RunningAdapters, st.WaitingAdapters, aB.Name, aA.Name, aB.Name)
	}
	close(w.gate) // let every call through
	for i, s := range streams {
		if res := collect(t, s, 1)[0]; res.err != nil {
			t.Fatalf("request %d: %v", i, res.err)
		}
	}
	// The idle slots keep their caches for prefix reuse, which no running
	// choice holds.
	if st := e.Stats(); st.RunningAdapters != nil || st.WaitingAdapters != nil || st.Running != 0 || st.RunningKVBytes != 0 || st.KVBytes == 0 {
		t.Errorf("after every request ended: running adapters %q, waiting %q, running %d, running KV %d bytes of %d",
			st.RunningAdapters, st.WaitingAdapters, st.Running, st.RunningKVBytes, st.KVBytes)
	}
}
