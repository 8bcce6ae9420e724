package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/signal"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/kvcache"
	"github.com/ruvllm/ruvllm/lora"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

func init() {
	register("perplexity", "measure perplexity over a text file as llama-perplexity does", runPerplexity)
}

func runPerplexity(e *env, args []string) error {
	fs := newFlags("perplexity", "--model PATH --file TEXT.txt [--ctx N] [--lora A.gguf] [--kv f16|q8|q4|tiered] [--threads T]")
	src := addModelFlags(fs)
	file := fs.String("file", "", "text file to score")
	nCtx := fs.Int("ctx", 512, "window size in tokens")
	fs.IntVar(nCtx, "c", 512, "same as --ctx")
	bf := addBackendFlags(fs, true)
	adapterPath := fs.String("lora", "", "score with this LoRA adapter (a GGUF file or a PEFT directory)")
	kf := addKVFlags(fs, defaultToolKV)
	if _, err := fs.parse(args, e.stdout); err != nil {
		return err
	}
	if err := kf.check(); err != nil {
		return err
	}
	if *file == "" {
		return fmt.Errorf("%w: --file is required", errUsage)
	}
	text, err := os.ReadFile(*file)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	o := backends.Options{}
	kf.apply(&o)
	m, b, err := openModel(ctx, e.log, src, bf, o)
	if err != nil {
		return err
	}
	defer m.Close()
	defer b.Close()
	var adapter *lora.Adapter
	if *adapterPath != "" {
		if adapter, err = lora.Load(*adapterPath, m.Config, m.File); err != nil {
			return fmt.Errorf("--lora %s: %w", *adapterPath, err)
		}
	}
	tokens := m.Tokenizer.Encode(string(text), tokenizer.EncodeOptions{AddSpecial: true})
	res, err := perplexity(ctx, b, adapter, kf.precision, tokens, *nCtx, m.Tokenizer.Vocab().BOS, m.Tokenizer.Vocab().AddBOS, func(chunk int, ppl float64) {
		fmt.Fprintf(e.stdout, "[%d]%.4f,", chunk+1, ppl)
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "\n%d chunks of %d tokens, %d tokens scored\n", res.chunks, *nCtx, res.scored)
	fmt.Fprintf(e.stdout, "kv_bytes_per_token = %d\n", res.kvBytesPerToken)
	fmt.Fprintf(e.stdout, "ppl = %.4f\n", math.Exp(res.nll/float64(res.scored)))
	return nil
}

type pplResult struct {
	chunks, scored int
	nll            float64
	// kvBytesPerToken is the KV memory the last window's sequence held,
	// as its pool counts it, over its tokens.
	kvBytesPerToken int64
}

// perplexity follows llama-perplexity: the tokens are cut into windows of
// nCtx, each window starts with BOS (replacing its first token) when the
// vocab adds one, and only the second half of each window is scored, so every
// scored token has at least nCtx/2 tokens of context.
func perplexity(ctx context.Context, b backends.Backend, adapter *lora.Adapter, kv kvcache.Precision, tokens []tokenizer.ID, nCtx int, bos tokenizer.ID, addBOS bool, progress func(int, float64)) (pplResult, error) {
	var r pplResult
	chunks := len(tokens) / nCtx
	if chunks == 0 {
		return r, fmt.Errorf("the text has %d tokens, fewer than one window of --ctx %d", len(tokens), nCtx)
	}
	vocab := b.Model().VocabSize
	seq, err := b.NewSequence(backends.SequenceOptions{MaxLen: nCtx, KV: kv})
	if err != nil {
		return r, err
	}
	defer seq.Close()
	if adapter != nil {
		as, ok := seq.(backends.AdapterSequence)
		if !ok {
			return r, fmt.Errorf("this backend does not run LoRA adapters")
		}
		if err := as.SetAdapter(adapter, 1); err != nil {
			return r, err
		}
	}
	window := make([]tokenizer.ID, nCtx)
	logits := make([]float32, nCtx*vocab)
	first := nCtx / 2
	for c := 0; c < chunks; c++ {
		if err := ctx.Err(); err != nil {
			return r, err
		}
		for i := range window {
			window[i] = tokens[c*nCtx+i]
		}
		if addBOS && bos >= 0 {
			window[0] = bos
		}
		seq.Reset()
		if err := b.Forward([]backends.Step{{Seq: seq, Tokens: window, Outputs: backends.AllTokens, Logits: logits}}); err != nil {
			return r, err
		}
		for j := first; j < nCtx-1; j++ {
			row := logits[j*vocab : (j+1)*vocab]
			next := tokens[c*nCtx+j+1]
			r.nll += logSumExp(row) - float64(row[next])
			r.scored++
		}
		r.chunks++
		r.kvBytesPerToken = seq.CacheBytes() / int64(seq.Len())
		if progress != nil {
			progress(c, math.Exp(r.nll/float64(r.scored)))
		}
	}
	return r, nil
}

func logSumExp(x []float32) float64 {
	m := math.Inf(-1)
	for _, v := range x {
		m = math.Max(m, float64(v))
	}
	var s float64
	for _, v := range x {
		s += math.Exp(float64(v) - m)
	}
	return m + math.Log(s)
}
