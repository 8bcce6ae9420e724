package backends_test

import (
	"bytes"
	"context"
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

func slotOf(i int) *int { return &i }

// Slots reports each slot's context, whether it runs a choice, and what it
// ran last; a request that names a slot runs there.
func TestEngineSlots(t *testing.T) {
	w := &watched{Backend: openTiny(t), gate: make(chan struct{})}
	e := newEngine(t, w, backends.EngineOptions{Parallel: 2, MaxLen: 64})
	st := e.Slots()
	if len(st) != 2 || st[0].ID != 0 || st[1].ID != 1 || st[1].MaxLen != 64 || st[0].Processing || st[1].Processing {
		t.Fatalf("idle slots %+v", st)
	}
	seed := int64(7)
	prompt := []tokenizer.ID{1, 403, 407}
	s := submit(t, e, backends.Request{Prompt: prompt, MaxTokens: 5, Slot: slotOf(1),
		Sampling: backends.Params{Temperature: 0.5, Seed: &seed}})
	// The first Forward call waits at the gate: the choice runs.
	deadline := time.Now().Add(10 * time.Second)
	for !e.Slots()[1].Processing {
		if time.Now().After(deadline) {
			t.Fatal("slot 1 never ran the request")
		}
		time.Sleep(time.Millisecond)
	}
	st = e.Slots()
	if st[0].Processing || st[1].PromptTokens != 3 || st[1].MaxTokens != 5 || st[1].Params.Seed == nil || *st[1].Params.Seed != 7 || st[1].Params.Temperature != 0.5 {
		t.Errorf("running slots %+v", st)
	}
	close(w.gate)
	res := collect(t, s, 1)[0]
	if st = e.Slots(); st[1].Processing || st[1].Cached != len(prompt)+len(res.tokens)-1 || st[0].Cached != 0 {
		t.Errorf("after the request: %+v (generated %d)", st, len(res.tokens))
	}

	if _, err := e.Submit(context.Background(), backends.Request{Prompt: prompt, MaxTokens: 1, Slot: slotOf(2)}); !errors.Is(err, backends.ErrNoSlot) || !errors.Is(err, backends.ErrInvalidRequest) {
		t.Errorf("slot 2 of 2: %v", err)
	}
}

// A request naming a busy slot waits for it, while later requests take the
// free slots; NoCache prefills the whole prompt.
func TestEngineSlotPinning(t *testing.T) {
	b := openTiny(t)
	e := newEngine(t, b, backends.EngineOptions{Parallel: 2, MaxLen: 64})
	prompt := []tokenizer.ID{1, 403, 407, 261}
	first := collect(t, submit(t, e, backends.Request{Prompt: prompt, MaxTokens: 4, Slot: slotOf(0)}), 1)[0].ids()
	// Slot 0 holds the prompt; a request pinned to slot 1 finds nothing
	// of it there (the prompt is shorter than a block of the index).
	s := submit(t, e, backends.Request{Prompt: prompt, MaxTokens: 4, Slot: slotOf(1)})
	if got := collect(t, s, 1)[0].ids(); !slices.Equal(got, first) || s.CachedTokens != 0 {
		t.Errorf("slot 1: %v with %d cached, want %v with 0", got, s.CachedTokens, first)
	}
	s = submit(t, e, backends.Request{Prompt: prompt, MaxTokens: 4, Slot: slotOf(0)})
	if got := collect(t, s, 1)[0].ids(); !slices.Equal(got, first) || s.CachedTokens != len(prompt)-1 {
		t.Errorf("slot 0 again: %v with %d cached, want %v with %d", got, s.CachedTokens, first, len(prompt)-1)
	}
	s = submit(t, e, backends.Request{Prompt: prompt, MaxTokens: 4, Slot: slotOf(0), NoCache: true})
	if got := collect(t, s, 1)[0].ids(); !slices.Equal(got, first) || s.CachedTokens != 0 {
		t.Errorf("no cache: %v with %d cached, want %v with 0", got, s.CachedTokens, first)
	}

	// Two requests for slot 0 and one for any slot: the second waits, the
	// third runs in slot 1 meanwhile.
	long := submit(t, e, backends.Request{Prompt: prompt, MaxTokens: 30, Slot: slotOf(0)})
	waiting := submit(t, e, backends.Request{Prompt: prompt, MaxTokens: 2, Slot: slotOf(0)})
	other := submit(t, e, backends.Request{Prompt: []tokenizer.ID{1, 5}, MaxTokens: 2})
	collect(t, other, 1)
	collect(t, long, 1)
	if r := collect(t, waiting, 1)[0]; r.err != nil || len(r.tokens) != 2 {
		t.Errorf("the waiting request: %+v", r)
	}
}

// A slot's cache saved, erased and restored into another slot continues
// as the original would: the restored keys and values are the ones the
// model computed.
func TestEngineSlotSaveRestore(t *testing.T) {
	b := openTiny(t)
	e := newEngine(t, b, backends.EngineOptions{Parallel: 2, MaxLen: 128})
	prompt := []tokenizer.ID{1, 403, 407, 261, 378, 432, 383}
	gen := collect(t, submit(t, e, backends.Request{Prompt: prompt, MaxTokens: 40, Slot: slotOf(0), IgnoreEOS: true}), 1)[0].ids()
	held := slices.Concat(prompt, gen[:len(gen)-1])

	var file bytes.Buffer
	var saved int
	ctx := context.Background()
	err := e.SlotDo(ctx, 0, func(seq backends.Sequence) error {
		saved = seq.Len()
		_, err := seq.(backends.StateSequence).SaveState(&file)
		return err
	})
	if err != nil || saved != len(held) {
		t.Fatalf("save: %v, %d tokens, want %d", err, saved, len(held))
	}
	if err := e.SlotDo(ctx, 0, func(seq backends.Sequence) error { seq.Reset(); return nil }); err != nil || e.Slots()[0].Cached != 0 {
		t.Fatalf("erase: %v, %+v", err, e.Slots()[0])
	}
	var restored int
	err = e.SlotDo(ctx, 1, func(seq backends.Sequence) error {
		n, read, err := seq.(backends.StateSequence).LoadState(bytes.NewReader(file.Bytes()))
		if read != int64(file.Len()) {
			t.Errorf("read %d bytes of %d", read, file.Len())
		}
		restored = n
		return err
	})
	if err != nil || restored != len(held) || e.Slots()[1].Cached != len(held) {
		t.Fatalf("restore: %v, %d tokens, %+v", err, restored, e.Slots()[1])
	}
	next := slices.Concat(held, []tokenizer.ID{gen[len(gen)-1]})
	s := submit(t, e, backends.Request{Prompt: next, MaxTokens: 8, Slot: slotOf(1), IgnoreEOS: true})
	got := collect(t, s, 1)[0].ids()
	if s.CachedTokens != len(held) {
		t.Errorf("after restore %d tokens were cached, want %d", s.CachedTokens, len(held))
	}
	fresh := submit(t, e, backends.Request{Prompt: next, MaxTokens: 8, Slot: slotOf(0), NoCache: true, IgnoreEOS: true})
	if want := collect(t, fresh, 1)[0].ids(); !slices.Equal(got, want) {
		t.Errorf("continued from the restored cache %v, computed afresh %v", got, want)
	}

	if err := e.SlotDo(ctx, 2, func(backends.Sequence) error { return nil }); !errors.Is(err, backends.ErrNoSlot) {
		t.Errorf("slot 2 of 2: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	// A task whose context has ended may still run if the loop took it
	// first; either way SlotDo returns.
	if err := e.SlotDo(cctx, 0, func(backends.Sequence) error { return nil }); err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled task: %v", err)
	}
	e.Close()
	if err := e.SlotDo(ctx, 0, func(backends.Sequence) error { return nil }); !errors.Is(err, backends.ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
}

// PostSampling reports the distribution the draw came from: a greedy
// choice has all the mass.
func TestEnginePostSampling(t *testing.T) {
	e := newEngine(t, openTiny(t), backends.EngineOptions{Parallel: 1})
	s := submit(t, e, backends.Request{Prompt: []tokenizer.ID{1, 403}, MaxTokens: 3, TopLogprobs: 5, PostSampling: true})
	for _, tok := range collect(t, s, 1)[0].tokens {
		if tok.Logprob != 0 || len(tok.Top) != 5 || tok.Top[0].ID != tok.ID || tok.Top[0].Logprob != 0 {
			t.Fatalf("greedy token %+v", tok)
		}
		for _, alt := range tok.Top[1:] {
			if !math.IsInf(float64(alt.Logprob), -1) {
				t.Fatalf("greedy alternative %+v", alt)
			}
		}
	}
}

// PostLogprobs of a sampler with top-k: the kept tokens' probabilities at
// the temperature sum to one, the others are impossible.
func TestSamplerPostLogprobs(t *testing.T) {
	logits := []float32{1, 3, 2, 0.5, 2.5}
	seed := int64(1)
	s := backends.NewSampler(backends.Params{Temperature: 0.5, TopK: 3, Seed: &seed}, len(logits))
	id := s.Sample(logits)
	lp, top := s.PostLogprobs(logits, id, 5, nil)
	if len(top) != 3 || top[0].ID != 1 || top[1].ID != 4 || top[2].ID != 2 {
		t.Fatalf("top %+v", top)
	}
	var sum float64
	for _, x := range top {
		sum += math.Exp(float64(x.Logprob))
	}
	// softmax([3, 2.5, 2] / 0.5)
	z := math.Exp(6) + math.Exp(5) + math.Exp(4)
	if math.Abs(sum-1) > 1e-5 || math.Abs(math.Exp(float64(top[0].Logprob))-math.Exp(6)/z) > 1e-5 {
		t.Errorf("probabilities %+v sum to %g", top, sum)
	}
	if want := top[slices.IndexFunc(top, func(x backends.TokenLogprob) bool { return x.ID == id })].Logprob; lp != want {
		t.Errorf("chosen %d: %g, want %g", id, lp, want)
	}
	if lp, _ := s.PostLogprobs(logits, 0, 0, nil); !math.IsInf(float64(lp), -1) {
		t.Errorf("a token top-k drops: %g", lp)
	}
}
