package main

import (
	"fmt"
	"strconv"

	"github.com/rs/zerolog"
	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/internal/serving"
	"github.com/ruvllm/ruvllm/models"
)

// defaultSpec is the draft source of serve and generate when --spec is
// not given (and no --draft model is): measured in docs/speculative.md.
const defaultSpec = "ngram"

// specFlags are the flags of speculative decoding: the draft source, the
// draft lengths, the server-wide cutoff and the draft model, with
// llama-server's spellings (--draft-max, --draft-n, --draft-min,
// --draft-n-min, -md, --model-draft, -td, --threads-draft; its --draft N
// is --draft-max N), so that its command lines run here.
type specFlags struct {
	source     string
	max, min   int
	batch      int
	draft      string
	threads    int // the draft model's; 0: the model's
	sourceSet  bool
	defaultSrc string
}

// addSpecFlags registers the flags; def is the source when neither --spec
// nor --draft is given.
func addSpecFlags(fs *flagSet, def string) *specFlags {
	f := &specFlags{defaultSrc: def}
	fs.Func("spec", "speculative decoding's draft source: ngram (prompt lookup in the sequence), suffix (and the model's recent outputs), "+
		"draft (a --draft model) or off (default "+def+", off for a model under 16 MiB, draft with --draft)", func(v string) error {
		if _, err := backends.ParseSpecSource(v); err != nil {
			return err
		}
		f.source, f.sourceSet = v, true
		return nil
	})
	fs.IntVar(&f.max, "spec-max", backends.DefaultSpecMax, fmt.Sprintf("most tokens drafted for a sequence in one step (1 … %d); each sequence's draft length adapts below it", backends.MaxSpecTokens))
	fs.IntVar(&f.max, "draft-max", backends.DefaultSpecMax, "same as --spec-max (llama-server's)")
	fs.IntVar(&f.max, "draft-n", backends.DefaultSpecMax, "same as --spec-max (llama-server's)")
	fs.IntVar(&f.min, "spec-min", 1, "fewest drafted tokens worth verifying; shorter drafts are dropped")
	fs.IntVar(&f.min, "draft-min", 1, "same as --spec-min (llama-server's)")
	fs.IntVar(&f.min, "draft-n-min", 1, "same as --spec-min (llama-server's)")
	fs.Func("draft-p-min", "llama-server's least draft probability: accepted and ignored (a draft model here drafts its argmax, and the draft length adapts to each sequence's acceptance instead)", func(v string) error {
		if p, err := strconv.ParseFloat(v, 64); err != nil || !(p >= 0 && p <= 1) {
			return fmt.Errorf("%q is not a probability between 0 and 1", v)
		}
		return nil
	})
	fs.IntVar(&f.threads, "threads-draft", 0, "threads of the --draft model's forward pass (default: the model's)")
	fs.IntVar(&f.threads, "td", 0, "same as --threads-draft (llama-server's)")
	fs.IntVar(&f.batch, "spec-batch", backends.DefaultSpecBatch, "no drafts in a step that would hold more tokens (decode tokens and drafts of all sequences): past it a forward pass is bound by arithmetic, not memory (-1: no limit)")
	fs.Func("draft", "the draft model of --spec draft (a GGUF file of the same vocabulary); a number is llama-server's --draft N, --draft-max", func(v string) error {
		if n, err := strconv.Atoi(v); err == nil {
			f.max = n
			return nil
		}
		f.draft = v
		return nil
	})
	fs.StringVar(&f.draft, "model-draft", "", "same as --draft MODEL (llama-server's)")
	fs.StringVar(&f.draft, "md", "", "same as --draft MODEL (llama-server's)")
	return f
}

// sourceName is the source the flags choose.
func (f *specFlags) sourceName() string {
	switch {
	case f.sourceSet:
		return f.source
	case f.draft != "":
		return "draft"
	}
	return f.defaultSrc
}

// check validates the flags without opening anything.
func (f *specFlags) check() error {
	src, err := backends.ParseSpecSource(f.sourceName())
	if err != nil {
		return fmt.Errorf("%w: --spec: %v", errUsage, err)
	}
	switch {
	case f.max < 1 || f.max > backends.MaxSpecTokens:
		return fmt.Errorf("%w: --spec-max %d is outside 1 … %d", errUsage, f.max, backends.MaxSpecTokens)
	case f.min < 1 || f.min > f.max:
		return fmt.Errorf("%w: --spec-min %d is outside 1 … %d (--spec-max)", errUsage, f.min, f.max)
	case f.threads < 0:
		return fmt.Errorf("%w: --threads-draft %d is negative", errUsage, f.threads)
	case f.batch < -1 || f.batch == 0:
		return fmt.Errorf("%w: --spec-batch %d must be -1 (no limit) or positive", errUsage, f.batch)
	case src == backends.SpecDraft && f.draft == "":
		return fmt.Errorf("%w: --spec draft needs a draft model: --draft MODEL.gguf", errUsage)
	}
	return nil
}

// value is the configuration the flags give.
func (f *specFlags) value() serving.Spec {
	src, _ := backends.ParseSpecSource(f.sourceName())
	return serving.Spec{Source: src, Max: f.max, Min: f.min, MaxBatchTokens: f.batch, Chosen: f.sourceSet || f.draft != "",
		Draft: f.draft, DraftThreads: f.threads}
}

// options are the engine's SpecOptions for model m, with the draft model
// d (nil without one): serving.Spec.For.
func (f *specFlags) options(m *models.Model, d backends.Backend) backends.SpecOptions {
	return f.value().For(m, d)
}

// openDraft loads the --draft model (logging to log), checks that its vocabulary is the
// target's token for token, and opens it on the native backend with
// threads (unless --threads-draft says otherwise) and room for kvTokens
// tokens. It returns nil, nil, nil without
// --draft. The caller closes the backend, then the model.
func (f *specFlags) openDraft(log zerolog.Logger, target *models.Model, threads, kvTokens int) (*models.Model, backends.Backend, error) {
	if f.draft == "" {
		return nil, nil, nil
	}
	d, err := models.Load(f.draft, models.LoadOptions{Logger: log})
	if err != nil {
		return nil, nil, fmt.Errorf("--draft: %w", err)
	}
	if err := serving.SameVocab(target, d); err != nil {
		d.Close()
		return nil, nil, fmt.Errorf("%w: --draft %s: %v", errUsage, f.draft, err)
	}
	if f.threads > 0 {
		threads = f.threads
	}
	o := backends.Options{Threads: threads, KVTokens: kvTokens}
	b, err := backends.Open(backends.DefaultBackend, d, o)
	if err != nil {
		d.Close()
		return nil, nil, fmt.Errorf("--draft: %w", err)
	}
	return d, b, nil
}
