package main

import (
	"context"
	"strings"

	"github.com/rs/zerolog"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/backends/native"
	"github.com/ruvllm/ruvllm/internal/serving"
	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/models/hub"
)

// modelSource is where a command gets its model: a file (--model), a
// Hugging Face file pulled by name (--hf), or else the default model.
type modelSource struct {
	path, hf *string
}

// hfHelp is the help of --hf, which serve registers apart from the other
// commands' model flags.
const hfHelp = "pull this Hugging Face file (OWNER/REPO/FILE.gguf or OWNER/REPO:QUANT) into the cache and use it"

func addModelFlags(fs *flagSet) *modelSource {
	return &modelSource{
		path: fs.String("model", "", "GGUF model file, or a Hugging Face name to pull (OWNER/REPO[:QUANT], OWNER/REPO/FILE.gguf) (default: pull "+hub.DefaultModel.String()+" on first use)"),
		hf:   fs.String("hf", "", hfHelp),
	}
}

// resolve returns the path of the model file, downloading it when needed.
func (s *modelSource) resolve(ctx context.Context, log zerolog.Logger) (string, error) {
	return serving.ResolveModelFile(ctx, log, *s.path, *s.hf)
}

// load resolves and loads the model, logging to o.Logger.
func (s *modelSource) load(ctx context.Context, o models.LoadOptions) (*models.Model, error) {
	path, err := s.resolve(ctx, o.Logger)
	if err != nil {
		return nil, err
	}
	return models.Load(path, o)
}

// backendFlags choose what runs a command's model: the backend, by name,
// the sparsity of a sparsified file, whether it may keep repacked copies
// of weights, and (unless the command takes a list of them) its threads.
type backendFlags struct {
	name     *string
	sparsity *float64 // -1: not given
	threads  *int     // nil: the command sets Options.Threads itself
	noRepack *bool
}

// addBackendFlags registers --backend, --sparsity and --no-repack, and -t/--threads when
// threads is set.
func addBackendFlags(fs *flagSet, threads bool) *backendFlags {
	bf := &backendFlags{
		name: fs.String("backend", "", "the backend that runs the model ("+strings.Join(backends.Names(), ", ")+
			"; default: "+native.SparseBackend+" for a sparsified file, else "+backends.DefaultBackend+")"),
		sparsity: fs.Float64("sparsity", -1, "run a sparsified file at this sparsity (0 … 0.99; 0 runs it dense) instead of the one it was calibrated for"),
		noRepack: fs.Bool("no-repack", false, "keep only the file's layout of the weights: no interleaved copy of Q4_0, Q4_K and Q5_K matrices "+
			"in place of the file's (slower decode, batches and prompts), no stacking of a sparsified file's q, k, v and gate, up (slower sparse decode)"),
	}
	if threads {
		bf.threads = addThreadsFlag(fs)
	}
	return bf
}

// choice is the backend the flags choose.
func (bf *backendFlags) choice() serving.Backend {
	b := serving.Backend{Name: *bf.name, NoRepack: *bf.noRepack}
	if *bf.sparsity != -1 {
		b.Sparsity = bf.sparsity
	}
	if bf.threads != nil {
		b.Threads = *bf.threads
	}
	return b
}

// open runs m on the chosen backend, with the chosen threads when the
// flags have them; o gives the rest of the backend's options.
func (bf *backendFlags) open(m *models.Model, o backends.Options) (backends.Backend, error) {
	return bf.choice().Open(m, o)
}

// openModel is how a command gets its model running: it finds and loads the
// model, then opens it on the chosen backend. The caller closes the backend,
// then the model.
func openModel(ctx context.Context, log zerolog.Logger, src *modelSource, bf *backendFlags, o backends.Options) (*models.Model, backends.Backend, error) {
	m, err := src.load(ctx, models.LoadOptions{Logger: log})
	if err != nil {
		return nil, nil, err
	}
	b, err := bf.open(m, o)
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	return m, b, nil
}
