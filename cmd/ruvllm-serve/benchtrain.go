package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/backends/gorgonia"
	"github.com/ruvllm/ruvllm/kvcache"
	"github.com/ruvllm/ruvllm/lora"
	"github.com/ruvllm/ruvllm/models"
)

// trainWhileResult is C streams' decode speed with the MicroLoRA trainer
// idle and busy, measured in alternation.
type trainWhileResult struct {
	Streams  int       `json:"streams"`
	Idle     []float64 `json:"idle_tokens_per_s"`
	Training []float64 `json:"training_tokens_per_s"`
	Updates  int64     `json:"updates"`
}

// benchTrainWhile runs c streams of n tokens r times without and r times
// with a MicroLoRA trainer (at cpuShare of a core, its thread at the
// lowest priority) fed the pairs of the preference set at path without
// pause, in alternation: how much the online trainer slows serving.
func benchTrainWhile(ctx context.Context, m *models.Model, b backends.Backend, kv kvcache.Precision, path string, c, n, reps int, cpuShare float64) (trainWhileResult, error) {
	res := trainWhileResult{Streams: c}
	set, err := readPreferences(path)
	if err != nil {
		return res, err
	}
	dir, err := os.MkdirTemp("", "ruvllm-bench-adapters-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	reg, err := lora.NewRegistry(lora.RegistryOptions{Dir: dir, Config: m.Config, Base: m.File, BaseModel: m.ID()})
	if err != nil {
		return res, err
	}
	micro := gorgonia.NewMicroLoRA(m.File, m.Config, reg, gorgonia.MicroOptions{CPUShare: cpuShare})
	defer micro.Close()
	// The first event makes the adapter (and dequantizes the model) before
	// any measurement.
	examples := make([]gorgonia.Example, len(set.Train))
	for i, it := range set.Train {
		examples[i] = it.example(m.Tokenizer)
	}
	if err := micro.Submit(gorgonia.MicroEvent{Adapter: "bench", Objective: gorgonia.Margin, Example: examples[0]}); err != nil {
		return res, err
	}
	for !micro.Idle() {
		time.Sleep(10 * time.Millisecond)
	}
	for r := -1; r < reps; r++ {
		for _, training := range []bool{false, true} {
			stop := make(chan struct{})
			var wg sync.WaitGroup
			if training {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						if micro.Idle() {
							micro.Submit(gorgonia.MicroEvent{Adapter: "bench", Objective: gorgonia.Margin, Example: examples[i%len(examples)]})
						}
						time.Sleep(time.Millisecond)
					}
				}()
			}
			cr, err := benchConcurrency(ctx, b, kv, c, 16, n)
			close(stop)
			wg.Wait()
			if err != nil {
				return res, err
			}
			if r < 0 {
				continue // warm-up
			}
			if training {
				res.Training = append(res.Training, cr.AggregateTPS)
			} else {
				res.Idle = append(res.Idle, cr.AggregateTPS)
			}
		}
	}
	st, _ := micro.Stats("bench")
	res.Updates = st.Updates
	return res, nil
}

// printTrainWhile prints the alternated measurements: the ratio of the
// medians, and the median of the ratios of each training run to the idle
// run just before it, which load from other processes, slower than one
// pair of runs, moves less.
func printTrainWhile(w io.Writer, r trainWhileResult) {
	ratios := make([]float64, min(len(r.Idle), len(r.Training)))
	for i := range ratios {
		ratios[i] = r.Training[i] / r.Idle[i]
	}
	fmt.Fprintf(w, "\n%d streams, aggregate t/s with the MicroLoRA trainer idle: %.1f (%s); training: %.1f (%s); %+.1f%% (medians), %.3fx (median of the %d paired ratios); %d updates\n",
		r.Streams, median(r.Idle), floatsList(r.Idle), median(r.Training), floatsList(r.Training), 100*(median(r.Training)/median(r.Idle)-1),
		median(ratios), len(ratios), r.Updates)
}

func floatsList(xs []float64) string {
	s := ""
	for i, x := range xs {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%.1f", x)
	}
	return s
}
