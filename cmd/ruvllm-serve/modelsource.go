package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/rs/zerolog"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/backends/native"
	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/models/hub"
	"github.com/ruvllm/ruvllm/sparse"
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
	return resolveModelFile(ctx, log, *s.path, *s.hf)
}

// resolveModelFile returns the path of a model file named by its path, by
// a Hugging Face file to pull (hf), or by neither (the default model),
// downloading it when needed. A path that is no file but a Hugging Face
// name (see hubName) is pulled as hf would be.
func resolveModelFile(ctx context.Context, log zerolog.Logger, path, hf string) (string, error) {
	if path != "" {
		if hf != "" {
			return "", fmt.Errorf("%w: give --model or --hf, not both", errUsage)
		}
		if ref, ok := hubName(path); ok {
			log.Info().Str("model", ref.String()).Msg("no such file: pulling it from the Hugging Face Hub (or taking it from the cache)")
			return (&hub.Client{}).Pull(ctx, ref)
		}
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("no model file %s (a model on the Hugging Face Hub is pulled by its name: --model OWNER/REPO[:QUANT], or ruvllm-serve pull OWNER/REPO[:QUANT] ahead of time)", path)
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
		log.Info().Str("model", ref.String()).Msg("no --model given: using the default model")
	}
	return (&hub.Client{}).Pull(ctx, ref)
}

// hubName reads a model argument that names no file as a Hugging Face
// name, as llama-server's -hf and ollama take them: OWNER/REPO[:QUANT],
// OWNER/REPO/FILE.gguf, hf.co/OWNER/REPO:QUANT or a URL of the Hub. A
// value that is a file, or reads as a path (absolute, ./, ../, ~, a first
// element that is a directory here, OWNER/REPO ending in .gguf), is not
// one, so that a mistyped path says "no such file" rather than going to
// the network.
func hubName(s string) (hub.Ref, bool) {
	if s == "" || strings.ContainsRune(s, '\\') {
		return hub.Ref{}, false
	}
	if _, err := os.Stat(s); err == nil {
		return hub.Ref{}, false
	}
	ref, err := hub.ParseRef(s)
	if err != nil {
		return hub.Ref{}, false
	}
	lower := strings.ToLower(s)
	for _, host := range []string{"hf.co/", "huggingface.co/", "https://", "http://"} {
		if strings.HasPrefix(lower, host) {
			return ref, true
		}
	}
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "~") || filepath.IsAbs(s) {
		return hub.Ref{}, false
	}
	first, _, _ := strings.Cut(s, "/")
	if st, err := os.Stat(first); err == nil && st.IsDir() {
		return hub.Ref{}, false
	}
	if ref.File != "" {
		return ref, strings.HasSuffix(strings.ToLower(ref.File), ".gguf")
	}
	return ref, !strings.HasSuffix(strings.ToLower(ref.Repo), ".gguf")
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
	name, sparsity, err := bf.choose(name, m)
	if err != nil {
		return nil, err
	}
	o.Sparsity = sparsity
	o.NoRepack = o.NoRepack || *bf.noRepack
	return backends.Open(name, m, o)
}

// choose picks the backend and the sparsity its options get, name being
// the one asked for ("" for none): a sparsified file runs sparsely unless
// the name or --sparsity 0 says otherwise.
func (bf *backendFlags) choose(name string, m *models.Model) (string, float64, error) {
	s := *bf.sparsity
	_, sparsified := sparse.ReadInfo(m.File)
	switch {
	case s != -1 && !(s >= 0 && s < 1):
		return "", 0, fmt.Errorf("%w: --sparsity %g is not a fraction in [0, 1)", errUsage, s)
	case s > 0 && !sparsified:
		return "", 0, fmt.Errorf("%w: --sparsity: %s is not sparsified (make it with ruvllm-serve sparsify)", errUsage, m.Path)
	case s > 0 && name != "" && name != native.SparseBackend:
		return "", 0, fmt.Errorf("%w: --sparsity runs on --backend %s, not %s", errUsage, native.SparseBackend, name)
	case s == 0 && name == native.SparseBackend:
		return "", 0, fmt.Errorf("%w: --sparsity 0 is the dense model: use --backend %s", errUsage, backends.DefaultBackend)
	case name != "":
	case sparsified && s != 0:
		name = native.SparseBackend
	default:
		name = backends.DefaultBackend
	}
	return name, max(s, 0), nil
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
