package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"syscall"
	"time"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/kvcache"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// specResult is an A/B of speculative decoding: the same generation
// through the engine without drafts (off) and with them, run in turns so
// that the machine's load falls on both alike.
type specResult struct {
	Test    string  `json:"test"`
	Spec    string  `json:"spec"`
	Streams int     `json:"streams"`
	Gen     int     `json:"n_gen"`
	Threads int     `json:"threads"`
	Temp    float64 `json:"temp"`
	// TokensPerS and OffTokensPerS are the medians of the runs with drafts
	// and without (aggregate over the streams); Speedup their ratio, with
	// the smallest and largest ratio of a round's pair beside it.
	TokensPerS    float64   `json:"tokens_per_s"`
	OffTokensPerS float64   `json:"off_tokens_per_s"`
	Speedup       float64   `json:"speedup"`
	SpeedupMin    float64   `json:"speedup_min"`
	SpeedupMax    float64   `json:"speedup_max"`
	Samples       []float64 `json:"samples_tokens_per_s"`
	OffSamples    []float64 `json:"off_samples_tokens_per_s"`
	// CPUTokensPerS, OffCPUTokensPerS and CPUSpeedup are the same over
	// the process's CPU time of each run (prefill included) instead of
	// the wall clock: on a machine shared with other work, the wall clock
	// counts the time the others ran, the CPU time only ours.
	CPUTokensPerS    float64 `json:"cpu_tokens_per_s"`
	OffCPUTokensPerS float64 `json:"off_cpu_tokens_per_s"`
	CPUSpeedup       float64 `json:"cpu_speedup"`
	CPUSpeedupMin    float64 `json:"cpu_speedup_min"`
	CPUSpeedupMax    float64 `json:"cpu_speedup_max"`
	// AcceptRate is accepted over drafted tokens of every run with drafts.
	AcceptRate float64 `json:"accept_rate"`
	Drafted    uint64  `json:"draft_n"`
	Accepted   uint64  `json:"draft_n_accepted"`
}

// benchGenerate runs streams requests of n tokens at once through a new
// engine with spec, each after the prompt (random tokens of stream i when
// prompt is nil), sampled with p (choice i's seed is p.Seed+i), and
// returns the generated tokens per second over them all (decode: from
// the first token of any stream to the last), the generated tokens per
// second of the process's CPU time from submitting to the end, and the
// engine's counts of drafts.
func benchGenerate(ctx context.Context, b backends.Backend, kv kvcache.Precision, spec backends.SpecOptions, prompt []tokenizer.ID,
	streams, n int, p backends.Params) (tps, cpuTPS float64, drafted, accepted uint64, err error) {
	maxLen := n + 17
	if prompt != nil {
		maxLen = len(prompt) + n + 1
	}
	e, err := backends.NewEngine(b, backends.EngineOptions{Parallel: streams, MaxLen: maxLen, KV: kv, Spec: spec})
	if err != nil {
		return 0, 0, 0, 0, err
	}
	defer e.Close()
	vocab := b.Model().VocabSize
	rng := rand.New(rand.NewPCG(3, 4))
	var mu sync.Mutex
	var first, last time.Time
	total := 0
	errs := make([]error, streams)
	var wg sync.WaitGroup
	cpu0 := cpuTime()
	for i := range streams {
		pr := prompt
		if pr == nil {
			pr = make([]tokenizer.ID, 16)
			for j := range pr {
				pr[j] = tokenizer.ID(rng.IntN(vocab))
			}
		}
		sp := p
		if p.Seed != nil {
			s := *p.Seed + int64(i)
			sp.Seed = &s
		}
		s, err := e.Submit(ctx, backends.Request{Prompt: pr, MaxTokens: n, TopLogprobs: -1, Sampling: sp})
		if err != nil {
			return 0, 0, 0, 0, err
		}
		wg.Go(func() {
			got := 0
			var f, l time.Time
			for ev := range s.Events {
				if ev.Err != nil {
					errs[i] = ev.Err
				}
				if ev.Token != nil {
					if got == 0 {
						f = time.Now()
					}
					l = time.Now()
					got++
				}
			}
			mu.Lock()
			if first.IsZero() || f.Before(first) {
				first = f
			}
			if l.After(last) {
				last = l
			}
			total += max(got-1, 0)
			mu.Unlock()
		})
	}
	wg.Wait()
	cpu := cpuTime() - cpu0
	for _, err := range errs {
		if err != nil {
			return 0, 0, 0, 0, err
		}
	}
	st := e.Stats()
	if d := last.Sub(first); d > 0 {
		tps = float64(total) / d.Seconds()
	}
	if cpu > 0 {
		cpuTPS = float64(total) / cpu.Seconds()
	}
	return tps, cpuTPS, st.SpecDrafted, st.SpecAccepted, nil
}

// cpuTime is the CPU time the process has used (user and system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchSpecAB runs the A/B of r: reps rounds (after one untimed of each),
// each without drafts then with them.
func benchSpecAB(ctx context.Context, b backends.Backend, kv kvcache.Precision, spec backends.SpecOptions, prompt []tokenizer.ID,
	p backends.Params, reps int, r specResult) (specResult, error) {
	var ratios, cpuRatios, cpuOn, cpuOff []float64
	for round := -1; round < reps; round++ {
		off, offCPU, _, _, err := benchGenerate(ctx, b, kv, backends.SpecOptions{}, prompt, r.Streams, r.Gen, p)
		if err != nil {
			return r, err
		}
		on, onCPU, d, a, err := benchGenerate(ctx, b, kv, spec, prompt, r.Streams, r.Gen, p)
		if err != nil {
			return r, err
		}
		if round < 0 {
			continue
		}
		r.OffSamples = append(r.OffSamples, off)
		r.Samples = append(r.Samples, on)
		r.Drafted += d
		r.Accepted += a
		if off > 0 {
			ratios = append(ratios, on/off)
		}
		cpuOn, cpuOff = append(cpuOn, onCPU), append(cpuOff, offCPU)
		if offCPU > 0 {
			cpuRatios = append(cpuRatios, onCPU/offCPU)
		}
	}
	r.CPUTokensPerS, r.OffCPUTokensPerS = median(cpuOn), median(cpuOff)
	if r.OffCPUTokensPerS > 0 {
		r.CPUSpeedup = r.CPUTokensPerS / r.OffCPUTokensPerS
	}
	r.CPUSpeedupMin, r.CPUSpeedupMax = span(cpuRatios)
	r.TokensPerS, r.OffTokensPerS = median(r.Samples), median(r.OffSamples)
	if r.OffTokensPerS > 0 {
		r.Speedup = r.TokensPerS / r.OffTokensPerS
	}
	r.SpeedupMin, r.SpeedupMax = span(ratios)
	if r.Drafted > 0 {
		r.AcceptRate = float64(r.Accepted) / float64(r.Drafted)
	}
	return r, nil
}

// span is the least and the largest of xs (0, 0 when empty).
func span(xs []float64) (lo, hi float64) {
	for i, x := range xs {
		if i == 0 {
			lo, hi = x, x
		}
		lo, hi = min(lo, x), max(hi, x)
	}
	return lo, hi
}

func printSpecResults(w io.Writer, rs []specResult) {
	fmt.Fprintf(w, "\n| threads | test | streams | spec | temp | off t/s | spec t/s | speedup (min–max) | CPU speedup (min–max) | accept_rate | drafted |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		fmt.Fprintf(w, "| %d | %s | %d | %s | %g | %.2f | %.2f | %.2fx (%.2f–%.2f) | %.2fx (%.2f–%.2f) | %.2f | %d |\n", r.Threads, r.Test, r.Streams, r.Spec, r.Temp,
			r.OffTokensPerS, r.TokensPerS, r.Speedup, r.SpeedupMin, r.SpeedupMax, r.CPUSpeedup, r.CPUSpeedupMin, r.CPUSpeedupMax, r.AcceptRate, r.Drafted)
	}
}
