package serving

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

// ResolveModelFile returns the path of a model file named by its path, by
// a Hugging Face file to pull (hf), or by neither (the default model),
// downloading it when needed. A path that is no file but a Hugging Face
// name (see HubName) is pulled as hf would be.
func ResolveModelFile(ctx context.Context, log zerolog.Logger, path, hf string) (string, error) {
	if path != "" {
		if hf != "" {
			return "", fmt.Errorf("%w: give --model or --hf, not both", ErrUsage)
		}
		if ref, ok := HubName(path); ok {
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
			return "", fmt.Errorf("%w: --hf: %v", ErrUsage, err)
		}
		ref = r
	} else {
		log.Info().Str("model", ref.String()).Msg("no --model given: using the default model")
	}
	return (&hub.Client{}).Pull(ctx, ref)
}

// HubName reads a model argument that names no file as a Hugging Face
// name, as llama-server's -hf and ollama take them: OWNER/REPO[:QUANT],
// OWNER/REPO/FILE.gguf, hf.co/OWNER/REPO:QUANT or a URL of the Hub. A
// value that is a file, or reads as a path (absolute, ./, ../, ~, a first
// element that is a directory here, OWNER/REPO ending in .gguf), is not
// one, so that a mistyped path says "no such file" rather than going to
// the network.
func HubName(s string) (hub.Ref, bool) {
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

// Backend chooses what runs a model: the backend by name, the sparsity
// of a sparsified file, the threads, and whether it may keep repacked
// copies of weights.
type Backend struct {
	// Name is the backend ("": the sparse backend for a sparsified file,
	// else backends.DefaultBackend).
	Name string
	// Sparsity, when set, runs a sparsified file at this sparsity instead
	// of its calibrated one (0 runs it dense).
	Sparsity *float64
	// Threads, when > 0, overrides the options' threads.
	Threads int
	// NoRepack keeps only the file's layout of the weights.
	NoRepack bool
}

// Open runs m on the chosen backend; o gives the rest of its options.
func (b Backend) Open(m *models.Model, o backends.Options) (backends.Backend, error) {
	if b.Threads > 0 {
		o.Threads = b.Threads
	}
	name, sparsity, err := b.Choose(m)
	if err != nil {
		return nil, err
	}
	o.Sparsity = sparsity
	o.NoRepack = o.NoRepack || b.NoRepack
	return backends.Open(name, m, o)
}

// Choose picks the backend and the sparsity its options get: a
// sparsified file runs sparsely unless Name or a Sparsity of 0 says
// otherwise.
func (b Backend) Choose(m *models.Model) (string, float64, error) {
	s, name := -1.0, b.Name // -1: not given
	if b.Sparsity != nil {
		s = *b.Sparsity
	}
	_, sparsified := sparse.ReadInfo(m.File)
	switch {
	case s != -1 && !(s >= 0 && s < 1):
		return "", 0, fmt.Errorf("%w: --sparsity %g is not a fraction in [0, 1)", ErrUsage, s)
	case s > 0 && !sparsified:
		return "", 0, fmt.Errorf("%w: --sparsity: %s is not sparsified (make it with ruvllm-serve sparsify)", ErrUsage, m.Path)
	case s > 0 && name != "" && name != native.SparseBackend:
		return "", 0, fmt.Errorf("%w: --sparsity runs on --backend %s, not %s", ErrUsage, native.SparseBackend, name)
	case s == 0 && name == native.SparseBackend:
		return "", 0, fmt.Errorf("%w: --sparsity 0 is the dense model: use --backend %s", ErrUsage, backends.DefaultBackend)
	case name != "":
	case sparsified && s != 0:
		name = native.SparseBackend
	default:
		name = backends.DefaultBackend
	}
	return name, max(s, 0), nil
}
