package backends_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// BenchmarkEngineStreams measures the aggregate decode throughput of 1, 4
// and 8 concurrent greedy streams of 64 tokens: what continuous batching
// buys over running the streams one after another. One op is one round of
// all streams; tok/s counts generated tokens of all streams.
func BenchmarkEngineStreams(b *testing.B) {
	const tokens = 64
	for _, m := range []struct {
		name  string
		parts []string
	}{
		{"stories260K", []string{"models", "stories260K.gguf"}},
		{"mini-llama-Q8_0", []string{"models", "mini", "mini-llama-Q8_0.gguf"}},
	} {
		b.Run(m.name, func(b *testing.B) {
			be := openModel(b, m.parts...)
			for _, streams := range []int{1, 4, 8} {
				b.Run(fmt.Sprintf("streams=%d", streams), func(b *testing.B) {
					e := newEngine(b, be, backends.EngineOptions{Parallel: streams, MaxLen: 2 + tokens})
					reqs := make([]backends.Request, streams)
					for i := range reqs {
						reqs[i] = backends.Request{Prompt: []tokenizer.ID{1, tokenizer.ID(10 + i)}, MaxTokens: tokens, TopLogprobs: -1}
					}
					out := make([]*backends.Stream, streams)
					rounds := 0
					b.ReportAllocs()
					start := time.Now()
					for b.Loop() {
						for i, r := range reqs {
							s, err := e.Submit(context.Background(), r)
							if err != nil {
								b.Fatal(err)
							}
							out[i] = s
						}
						for _, s := range out {
							n := 0
							for ev := range s.Events {
								if ev.Token != nil {
									n++
								} else if ev.Err != nil {
									b.Fatal(ev.Err)
								}
							}
							if n != tokens {
								b.Fatalf("%d tokens, want %d", n, tokens)
							}
						}
						rounds++
					}
					elapsed := time.Since(start)
					b.ReportMetric(float64(rounds*streams*tokens)/elapsed.Seconds(), "tok/s")
				})
			}
		})
	}
}
