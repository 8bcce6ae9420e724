package serving

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/ruvllm/ruvllm/api"
	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/backends/gorgonia"
	"github.com/ruvllm/ruvllm/lora"
	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/session"
)

// servedModel is a model the server serves: its file (tokenizer,
// template, adapters) is open from the start, its engine loaded on demand
// (load).
type servedModel struct {
	model *models.Model
	api   *session.Model
	micro *gorgonia.MicroLoRA
	// backend runs it (its ModelSpec's name, else Config.Backend's); opt
	// and engineOpt are what load opens it with.
	backend   Backend
	opt       backends.Options
	engineOpt backends.EngineOptions
	// draft is the Spec.Draft model, whose backend each load opens beside
	// the model's; nil without one. draftThreads are its threads (0: the
	// model's).
	draft        *models.Model
	draftThreads int
	// log is the server's logger.
	log zerolog.Logger
}

// close closes the model's file; the server has unloaded its engine.
func (s *servedModel) close() {
	if s.micro != nil {
		if err := s.micro.Close(); err != nil {
			s.log.Error().Err(err).Str("model", s.api.ID).Msg("saving MicroLoRA adapters")
		}
	}
	if s.model != nil {
		s.model.Close()
	}
	if s.draft != nil {
		s.draft.Close()
	}
}

// loadedEngine is a model's engine with the backend under it; closing it
// unloads the model: the engine, the backend (the KV pool and buffers),
// and the weights' pages.
type loadedEngine struct {
	*backends.Engine
	backend backends.Backend
	file    *models.Model
	draft   backends.Backend // nil without a draft model
}

func (e *loadedEngine) Close() error {
	e.Engine.Close()
	if e.draft != nil {
		e.draft.Close()
	}
	err := e.backend.Close()
	e.file.File.ReleasePages()
	return err
}

// load opens the model's backend and starts its engine: session.Loader.
func (s *servedModel) load() (session.LoadedEngine, error) {
	start := time.Now()
	b, err := s.backend.Open(s.model, s.opt)
	if err != nil {
		return nil, err
	}
	eo := s.engineOpt
	var draft backends.Backend
	if s.draft != nil {
		threads := cmp.Or(s.draftThreads, s.backend.Threads, s.opt.Threads)
		if draft, err = backends.Open(backends.DefaultBackend, s.draft, backends.Options{Threads: threads, KVTokens: s.opt.KVTokens}); err != nil {
			b.Close()
			return nil, fmt.Errorf("draft model: %w", err)
		}
		eo.Spec.Draft = draft
	}
	eng, err := backends.NewEngine(b, eo)
	if err != nil {
		if draft != nil {
			draft.Close()
		}
		b.Close()
		return nil, err
	}
	backend, _, _ := s.backend.Choose(s.model)
	s.log.Info().Str("model", s.api.ID).Str("backend", backend).Int("ctx", eng.MaxLen()).Int("parallel", s.engineOpt.Parallel).
		Int64("kv_bytes", eng.Stats().KVBytes).Dur("took_ms", time.Since(start)).Msg("model loaded")
	return &loadedEngine{Engine: eng, backend: b, file: s.model, draft: draft}, nil
}

// loadModels opens the models' files one after the other (pulling those
// named by hf) and serves each as a model on demand as soon as it is open,
// then loads the first ones — as many as API.MaxLoaded allows, all without
// it — so that they answer at once. The caller closes what it returns,
// also on an error.
func loadModels(ctx context.Context, c *Config, srv *api.Server) ([]*servedModel, error) {
	var served []*servedModel
	several := len(c.Models) > 1
	for _, spec := range c.Models {
		sm, err := openModel(ctx, c, spec)
		if err != nil {
			if !several || ctx.Err() != nil {
				return served, err
			}
			// One model of several that cannot be opened is reported, and
			// the others are served.
			id := spec.reportedID()
			c.Log.Error().Str("model", id).Err(err).Msg("the model cannot be opened; the other models are served")
			srv.AddFailedModel(id, err.Error())
			continue
		}
		if c.LoRA != "" && len(served) == 0 {
			// llama-server's --lora: the first model's requests run with it
			// unless they name another adapter.
			if sm.api.Adapter, err = lora.Load(c.LoRA, sm.model.Config, sm.model.File); err != nil {
				sm.close()
				return served, fmt.Errorf("--lora %s: %w", c.LoRA, err)
			}
		}
		served = append(served, sm)
		if err := srv.AddModel(sm.api); err != nil {
			return served, fmt.Errorf("%w: %v", ErrUsage, err)
		}
	}
	preload := len(served)
	if c.API.MaxLoaded > 0 {
		preload = min(preload, c.API.MaxLoaded)
	}
	if len(served) == 0 {
		return served, fmt.Errorf("none of the %d models can be opened", len(c.Models))
	}
	for _, sm := range served[:preload] {
		if err := srv.LoadModel(ctx, sm.api.ID); err != nil {
			if !several || ctx.Err() != nil {
				return served, err
			}
			// It stays a model on demand: a request tries again.
			c.Log.Error().Str("model", sm.api.ID).Err(err).Msg("the model cannot be loaded; the other models are served")
			continue
		}
		c.Log.Info().Str("model", sm.api.ID).Int("parallel", c.Parallel).Msg("model ready")
		// /health is ok once the first model is loaded; the others follow.
		srv.SetStarting(false)
	}
	return served, nil
}

// KVShare is the KV memory of each loaded model: KVMemory split evenly
// among the models that may be loaded at once, so that they never hold
// more than it in total; 0 (without KVMemory) leaves each its default.
func (c *Config) KVShare() int64 {
	if c.KVMemory == 0 {
		return 0
	}
	slots := len(c.Models)
	if c.API.MaxLoaded > 0 {
		slots = min(slots, c.API.MaxLoaded)
	}
	return c.KVMemory / int64(max(slots, 1))
}

// contextOf is a sequence's context for a model trained on trained tokens.
func (c *Config) contextOf(path string, trained int) int {
	switch {
	case c.Ctx == 0:
		return min(DefaultCtx, trained)
	case c.Ctx < 0:
		return trained
	case c.Ctx > trained:
		c.Log.Warn().Str("path", path).Int("ctx", c.Ctx).Int("trained", trained).Msg("--ctx is larger than the model's trained context; quality may suffer past it")
	}
	return c.Ctx
}

// openModel finds the model file (downloading it if it is named by hf or
// is the default), opens it and its adapters, and prepares how its engine
// is loaded.
func openModel(ctx context.Context, c *Config, spec ModelSpec) (_ *servedModel, err error) {
	path, err := ResolveModelFile(ctx, c.Log, spec.Path, spec.HF)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	s := &servedModel{backend: c.Backend, log: c.Log}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if spec.Backend != "" {
		s.backend.Name = spec.Backend
	}
	template := spec.ChatTemplate
	if template == "" {
		template = c.ChatTemplate
	}
	if s.model, err = models.Load(path, models.LoadOptions{ChatTemplate: template, Logger: c.Log}); err != nil {
		return nil, err
	}
	if s.model.Config == nil {
		return nil, fmt.Errorf("%s: the file holds no runnable model (a vocabulary only?)", path)
	}
	trained := s.model.Config.ContextLength
	maxLen := c.contextOf(path, trained)
	// Without KVMemory every slot can fill its context at once; the
	// blocks the slots do not hold keep earlier prompts for prefix reuse.
	s.opt = backends.Options{MaxBatch: c.Batch, KVBytes: c.KVShare(), KVTokens: c.Parallel * maxLen, KVSequences: c.Parallel,
		KVStoreDir: c.Store, KVStoreMax: c.StoreMax, KVHotTokens: c.KVHot, KVWarmTokens: c.KVWarm}
	tok := s.model.Tokenizer
	s.engineOpt = backends.EngineOptions{
		Parallel:  c.Parallel,
		QueueSize: c.Queue,
		MaxLen:    maxLen,
		Batch:     c.Batch,
		KV:        c.KV,
		IsEOG:     tok.IsEOG,
		Spec:      c.Spec.For(s.model, nil),
	}
	if c.Spec.Draft != "" {
		if s.draft, err = models.Load(c.Spec.Draft, models.LoadOptions{Logger: c.Log}); err != nil {
			return nil, fmt.Errorf("--draft: %w", err)
		}
		s.draftThreads = c.Spec.DraftThreads
		if err := SameVocab(s.model, s.draft); err != nil {
			return nil, fmt.Errorf("%w: --draft %s for %s: %v", ErrUsage, c.Spec.Draft, path, err)
		}
	}
	id := spec.Name
	if id == "" {
		id = strings.TrimSuffix(filepath.Base(path), ".gguf")
	}
	s.api = &session.Model{ID: id, Tokenizer: tok, Chat: s.model, Load: s.load, MaxLen: maxLen, Path: path, TrainedContext: trained}
	if info, err := s.model.Info(); err == nil {
		s.api.Info = &info
	} else {
		c.Log.Warn().Str("model", id).Err(err).Msg("describing the model file")
	}
	c.Log.Info().Str("model", id).Str("path", path).Str("arch", s.model.Config.Arch).Dur("took_ms", time.Since(start)).Msg("model opened")
	if spec.AdapterDir != "" {
		if err := openAdapters(c, spec.AdapterDir, s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// openAdapters opens a model's adapter directory, loading the adapters in
// it; one that does not fit the model is logged and left out.
func openAdapters(c *Config, dir string, s *servedModel) error {
	reg, err := lora.NewRegistry(lora.RegistryOptions{
		Dir:            dir,
		Config:         s.model.Config,
		Base:           s.model.File,
		BaseModel:      s.api.ID,
		MaxResident:    c.MaxAdapters,
		MaxUploadBytes: c.MaxAdapterBytes,
	})
	if err != nil {
		return fmt.Errorf("adapter directory of %s: %w", s.api.ID, err)
	}
	for name, why := range reg.Skipped() {
		c.Log.Warn().Str("model", s.api.ID).Str("entry", name).Err(why).Msg("adapter directory: entry left out")
	}
	names := []string{}
	for _, in := range reg.List() {
		names = append(names, in.Name)
	}
	c.Log.Info().Str("model", s.api.ID).Str("dir", reg.Dir()).Strs("adapters", names).Int("max_resident", c.MaxAdapters).
		Int64("max_upload_mb", c.MaxAdapterBytes>>20).Msg("adapters loaded")
	s.api.Adapters, s.api.MaxAdapterBytes = reg, c.MaxAdapterBytes
	if c.Micro.On {
		startMicroLoRA(c.Micro, s)
	}
	return nil
}
