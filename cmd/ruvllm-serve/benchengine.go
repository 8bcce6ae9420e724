package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/kvcache"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// concurrencyResult is C streams generating at once through the engine.
type concurrencyResult struct {
	Streams        int       `json:"streams"`
	Gen            int       `json:"n_gen"`
	Threads        int       `json:"threads"`
	AggregateTPS   float64   `json:"aggregate_tokens_per_s"`
	PerStreamTPS   float64   `json:"per_stream_tokens_per_s"` // median over streams
	StreamSamples  []float64 `json:"per_stream_samples"`
	WallSeconds    float64   `json:"wall_s"`
	PromptTokens   int       `json:"n_prompt"`
	SingleStreamTS float64   `json:"single_stream_tokens_per_s,omitempty"`
}

// benchConcurrency runs c streams of n generated tokens after a p-token
// prompt each, all submitted at once to an engine with c slots.
func benchConcurrency(ctx context.Context, b backends.Backend, kv kvcache.Precision, c, p, n int) (concurrencyResult, error) {
	r := concurrencyResult{Streams: c, Gen: n, PromptTokens: p}
	e, err := backends.NewEngine(b, backends.EngineOptions{Parallel: c, MaxLen: p + n + 1, KV: kv})
	if err != nil {
		return r, err
	}
	defer e.Close()
	vocab := b.Model().VocabSize
	rng := rand.New(rand.NewPCG(3, 4))
	reqs := make([]backends.Request, c)
	for i := range reqs {
		prompt := make([]tokenizer.ID, max(p, 1))
		for j := range prompt {
			prompt[j] = tokenizer.ID(rng.IntN(vocab))
		}
		reqs[i] = backends.Request{Prompt: prompt, MaxTokens: n, TopLogprobs: -1}
	}
	per := make([]float64, c)
	errs := make([]error, c)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range reqs {
		s, err := e.Submit(ctx, reqs[i])
		if err != nil {
			return r, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var first, last time.Time
			got := 0
			for ev := range s.Events {
				if ev.Err != nil {
					errs[i] = ev.Err
				}
				if ev.Token != nil {
					if got == 0 {
						first = time.Now()
					}
					last = time.Now()
					got++
				}
			}
			// Decode speed of this stream: tokens after the first over the
			// time they took (the first token's time is prefill).
			if got > 1 {
				per[i] = float64(got-1) / last.Sub(first).Seconds()
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	for _, err := range errs {
		if err != nil {
			return r, err
		}
	}
	r.WallSeconds = wall.Seconds()
	r.AggregateTPS = float64(c*n) / wall.Seconds()
	r.StreamSamples = per
	r.PerStreamTPS = median(per)
	return r, nil
}

// prefixTurn is one turn of the simulated chat.
type prefixTurn struct {
	Turn         int     `json:"turn"`
	PromptTokens int     `json:"n_prompt"`
	CachedTokens int     `json:"n_cached"`
	TTFTms       float64 `json:"ttft_ms"`
	TTFTmsNoReus float64 `json:"ttft_ms_no_reuse"`
}

// benchPrefixReuse simulates a chat of turns turns in which every turn
// resends the whole history plus perTurn new tokens and generates gen
// tokens, and times the first token of each turn with prefix reuse and with
// it disabled.
func benchPrefixReuse(ctx context.Context, b backends.Backend, kv kvcache.Precision, turns, perTurn, gen int) ([]prefixTurn, error) {
	out := make([]prefixTurn, turns)
	maxLen := turns * (perTurn + gen)
	for pass, noReuse := range []bool{false, true} {
		e, err := backends.NewEngine(b, backends.EngineOptions{Parallel: 1, MaxLen: maxLen, NoPrefixReuse: noReuse, KV: kv})
		if err != nil {
			return nil, err
		}
		rng := rand.New(rand.NewPCG(5, 6))
		vocab := b.Model().VocabSize
		var history []tokenizer.ID
		for t := 0; t < turns; t++ {
			for i := 0; i < perTurn; i++ {
				history = append(history, tokenizer.ID(rng.IntN(vocab)))
			}
			start := time.Now()
			s, err := e.Submit(ctx, backends.Request{Prompt: slices.Clone(history), MaxTokens: gen, TopLogprobs: -1})
			if err != nil {
				e.Close()
				return nil, err
			}
			var ttft time.Duration
			for ev := range s.Events {
				if ev.Err != nil {
					e.Close()
					return nil, ev.Err
				}
				if ev.Token != nil {
					if ttft == 0 {
						ttft = time.Since(start)
					}
					history = append(history, ev.Token.ID)
				}
			}
			out[t].Turn, out[t].PromptTokens = t+1, len(history)-gen
			if pass == 0 {
				out[t].TTFTms, out[t].CachedTokens = ms(ttft), s.CachedTokens
			} else {
				out[t].TTFTmsNoReus = ms(ttft)
			}
		}
		e.Close()
	}
	return out, nil
}

func printPrefixTurns(w interface{ Write([]byte) (int, error) }, turns []prefixTurn) {
	fmt.Fprintf(w, "| turn | prompt tokens | cached | TTFT reuse (ms) | TTFT no reuse (ms) | ratio |\n|---|---|---|---|---|---|\n")
	for _, t := range turns {
		fmt.Fprintf(w, "| %d | %d | %d | %.1f | %.1f | %.2f |\n", t.Turn, t.PromptTokens, t.CachedTokens, t.TTFTms, t.TTFTmsNoReus, t.TTFTms/t.TTFTmsNoReus)
	}
}
