package main

import (
	"fmt"
	"time"

	"github.com/ruvllm/ruvllm/lora"
	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/models/gguf"
)

func init() {
	register("lora-merge", "write a model with a LoRA adapter (PEFT directory or GGUF) merged into its weights", runLoRAMerge)
}

func runLoRAMerge(e *env, args []string) error {
	fs := newFlags("lora-merge", "--model BASE.gguf --adapter DIR|A.gguf --out MERGED.gguf [--type F16] [--scale S] [--threads T]")
	in := fs.String("model", "", "base model")
	adapter := fs.String("adapter", "", "LoRA adapter: a PEFT directory (adapter_config.json + adapter_model.safetensors) or a GGUF LoRA file")
	out := fs.String("out", "", "file to write")
	typ := fs.String("type", "", "format of the updated weights (F32, F16, BF16, Q8_0, ...); default: each weight's own")
	scale := fs.Float64("scale", 1, "multiplier of the adapter's updates (as a request's lora_scale)")
	threads := addThreadsFlag(fs)
	if _, err := fs.parse(args, e.stdout); err != nil {
		return err
	}
	if *in == "" || *adapter == "" || *out == "" {
		return fmt.Errorf("%w: --model, --adapter and --out are required", errUsage)
	}
	if *scale == 0 {
		return fmt.Errorf("%w: --scale 0 would merge nothing", errUsage)
	}
	f, err := gguf.Open(*in)
	if err != nil {
		return err
	}
	defer f.Close()
	cfg, err := models.ReadConfig(f)
	if err != nil {
		return err
	}
	a, err := lora.Load(*adapter, cfg, f)
	if err != nil {
		return fmt.Errorf("adapter %s: %w", *adapter, err)
	}
	start := time.Now()
	if err := lora.Merge(f, a, *out, lora.MergeOptions{Type: *typ, Scale: float32(*scale), Threads: *threads}); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "merged %s adapter (rank %d, %d weights) into %s in %.1f s\n",
		a.Format, a.Rank(), len(a.Targets()), *out, time.Since(start).Seconds())
	return nil
}
