package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/ruvllm/ruvllm/backends"
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
		path: fs.String("model", "", "GGUF model file (default: pull "+hub.DefaultModel.String()+" on first use)"),
		hf:   fs.String("hf", "", hfHelp),
	}
}

// resolve returns the path of the model file, downloading it when needed.
func (s *modelSource) resolve(ctx context.Context) (string, error) {
	return resolveModelFile(ctx, *s.path, *s.hf)
}

// resolveModelFile returns the path of a model file named by its path, by
// a Hugging Face file to pull (hf), or by neither (the default model),
// downloading it when needed.
func resolveModelFile(ctx context.Context, path, hf string) (string, error) {
	if path != "" {
		if hf != "" {
			return "", fmt.Errorf("%w: give --model or --hf, not both", errUsage)
		}
		return path, nil
	}
	ref := hub.DefaultModel
	if hf != "" {
		r, err := hub.ParseRef(hf)
		if err != nil {
			return "", fmt.Errorf("%w: --hf: %v", errUsage, err)
		}
		ref = r
	} else {
		logger.Info().Str("model", ref.String()).Msg("no --model given: using the default model")
	}
	return (&hub.Client{}).Pull(ctx, ref)
}

// load resolves and loads the model.
func (s *modelSource) load(ctx context.Context, o models.LoadOptions) (*models.Model, error) {
	path, err := s.resolve(ctx)
	if err != nil {
		return nil, err
	}
	return models.Load(path, o)
}

// backendFlags choose what runs a command's model: the backend, by name,
// and (unless the command takes a list of them) its threads.
type backendFlags struct {
	name    *string
	threads *int // nil: the command sets Options.Threads itself
}

// addBackendFlags registers --backend, and -t/--threads when threads is set.
func addBackendFlags(fs *flagSet, threads bool) *backendFlags {
	bf := &backendFlags{
		name: fs.String("backend", backends.DefaultBackend, "the backend that runs the model ("+strings.Join(backends.Names(), ", ")+")"),
	}
	if threads {
		bf.threads = addThreadsFlag(fs)
	}
	return bf
}

// open runs m on the chosen backend, with the chosen threads when the
// flags have them; o gives the rest of the backend's options.
func (bf *backendFlags) open(m *models.Model, o backends.Options) (backends.Backend, error) {
	return bf.openNamed(*bf.name, m, o)
}

// openNamed is open on the backend registered as name rather than
// --backend's: a model that names its own.
func (bf *backendFlags) openNamed(name string, m *models.Model, o backends.Options) (backends.Backend, error) {
	if bf.threads != nil {
		o.Threads = *bf.threads
	}
	return backends.Open(name, m, o)
}

// openModel is how a command gets its model running: it finds and loads the
// model, then opens it on the chosen backend. The caller closes the backend,
// then the model.
func openModel(ctx context.Context, src *modelSource, bf *backendFlags, o backends.Options) (*models.Model, backends.Backend, error) {
	m, err := src.load(ctx, models.LoadOptions{Logger: logger})
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
