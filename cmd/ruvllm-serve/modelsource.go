package main

import (
	"context"
	"fmt"

	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/models/hub"
)

// modelSource is where a command gets its model: a file (--model), a
// Hugging Face file pulled by name (--hf), or else the default model.
type modelSource struct {
	path, hf *string
}

func addModelFlags(fs *flagSet) *modelSource {
	return &modelSource{
		path: fs.String("model", "", "GGUF model file (default: pull "+hub.DefaultModel.String()+" on first use)"),
		hf:   fs.String("hf", "", "pull this Hugging Face file (OWNER/REPO/FILE.gguf or OWNER/REPO:QUANT) into the cache and use it"),
	}
}

// resolve returns the path of the model file, downloading it when needed.
func (s *modelSource) resolve(ctx context.Context) (string, error) {
	if *s.path != "" {
		if *s.hf != "" {
			return "", fmt.Errorf("%w: give --model or --hf, not both", errUsage)
		}
		return *s.path, nil
	}
	ref := hub.DefaultModel
	if *s.hf != "" {
		r, err := hub.ParseRef(*s.hf)
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
