package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/rs/zerolog"

	"github.com/ruvllm/ruvllm/api"
	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/backends/gorgonia"
	"github.com/ruvllm/ruvllm/kvcache"
	"github.com/ruvllm/ruvllm/lora"
	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/models/hub"
	"github.com/ruvllm/ruvllm/session"
)

// modelSpec is one model the server serves: where its file is, and what is
// set for it alone.
type modelSpec struct {
	// name is the id clients use; "" takes the file name without .gguf.
	name string
	// path or hf is the file: a path, or a Hugging Face file to pull;
	// neither is the default model.
	path, hf string
	// chatTemplate overrides --chat-template; adapterDir is the model's
	// adapter directory ("" for none); backend overrides --backend.
	chatTemplate, adapterDir, backend string
}

// id is the model's id as far as it is known before its file is found: a
// pulled file's name is known once it is pulled.
func (m modelSpec) id() string {
	if m.name != "" || m.path == "" {
		return m.name
	}
	return strings.TrimSuffix(filepath.Base(m.path), ".gguf")
}

// maxModelName bounds a model's name.
const maxModelName = 256

// checkModelName refuses a name that clients could not send as "model" or
// read back in a listing.
func checkModelName(name string) error {
	if len(name) > maxModelName {
		return fmt.Errorf("the model name %.32q... is longer than %d bytes", name, maxModelName)
	}
	if strings.IndexFunc(name, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		return fmt.Errorf("the model name %q holds a space or a control character", name)
	}
	return nil
}

// parseModelFlag reads one --model: PATH, or NAME=PATH. Only the first =
// splits, so that NAME=PATH serves a file whose name holds one.
func parseModelFlag(v string) (modelSpec, error) {
	name, path, named := strings.Cut(v, "=")
	switch {
	case !named:
		return modelSpec{path: v}, nil
	case name == "":
		return modelSpec{}, fmt.Errorf("%q: the name before = is empty (give NAME=PATH, or PATH alone)", v)
	case path == "":
		return modelSpec{}, fmt.Errorf("%q: the path after = is empty (give NAME=PATH)", v)
	}
	if err := checkModelName(name); err != nil {
		return modelSpec{}, err
	}
	return modelSpec{name: name, path: path}, nil
}

// modelsKey is the --config key of the list of models; it is not a flag.
const modelsKey = "models"

// parseModelList reads the models: list of a --config file: each entry
// {name, path} or {name, hf} (name may be left out with path), and
// optionally chat_template, adapter_dir and backend.
func parseModelList(v any, dir string) ([]modelSpec, error) {
	list, ok := v.([]any)
	if !ok || len(list) == 0 {
		return nil, errors.New("models must be a list of {name, path} or {name, hf} entries")
	}
	specs := make([]modelSpec, len(list))
	for i, e := range list {
		where := fmt.Sprintf("models[%d]", i)
		entry, ok := e.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s must be a {name, path} or {name, hf} entry", where)
		}
		spec := &specs[i]
		for key, val := range entry {
			dst, known := map[string]*string{
				"name": &spec.name, "path": &spec.path, "hf": &spec.hf, "chat_template": &spec.chatTemplate, "adapter_dir": &spec.adapterDir,
				"backend": &spec.backend,
			}[strings.ReplaceAll(key, "-", "_")]
			if !known {
				return nil, fmt.Errorf("%s: unknown key %q (name, path, hf, chat_template, adapter_dir, backend)", where, key)
			}
			if *dst, ok = val.(string); !ok {
				return nil, fmt.Errorf("%s.%s must be a string", where, key)
			}
		}
		switch {
		case (spec.path == "") == (spec.hf == ""):
			return nil, fmt.Errorf("%s needs path or hf, one of them", where)
		case spec.hf != "" && spec.name == "":
			return nil, fmt.Errorf("%s needs a name: a pulled file's name is not known before it is pulled", where)
		}
		// A config file's paths are the file's: relative ones are taken
		// from its directory.
		spec.path, spec.adapterDir = relativeTo(dir, spec.path), relativeTo(dir, spec.adapterDir)
		if t := relativeTo(dir, spec.chatTemplate); t != spec.chatTemplate && fileExists(t) {
			spec.chatTemplate = t
		}
		if spec.hf != "" {
			if _, err := hub.ParseRef(spec.hf); err != nil {
				return nil, fmt.Errorf("%s.hf: %v", where, err)
			}
		}
		if spec.name != "" {
			if err := checkModelName(spec.name); err != nil {
				return nil, fmt.Errorf("%s.name: %v", where, err)
			}
		}
		if spec.backend != "" && !slices.Contains(backends.Names(), spec.backend) {
			return nil, fmt.Errorf("%s.backend: no backend %q (known: %s)", where, spec.backend, strings.Join(backends.Names(), ", "))
		}
	}
	return specs, nil
}

// finishModels settles what is served once flags and file are read: the
// default model when none is given, --alias and --adapter-dir on the first
// model, and no two models with one id or one adapter directory.
func (c *serveConfig) finishModels() error {
	first := "--model"
	if len(c.models) == 0 {
		c.models = []modelSpec{{hf: c.hf}}
		first = "--hf"
	} else if c.hf != "" {
		return fmt.Errorf("%w: give --model (or models in --config) or --hf, not both", errUsage)
	}
	if c.alias != "" {
		if len(c.models) > 1 || c.models[0].name != "" {
			return fmt.Errorf("%w: --alias names the one model of %s; with several, name each (--model NAME=PATH, or name in models)", errUsage, first)
		}
		c.models[0].name = c.alias
	}
	if c.adapterDir != "" {
		if c.models[0].adapterDir != "" {
			return fmt.Errorf("%w: --adapter-dir is the first model's adapter directory, which its adapter_dir in --config already sets", errUsage)
		}
		c.models[0].adapterDir = c.adapterDir
	}
	var ids, dirs []string
	for _, m := range c.models {
		if id := m.id(); id != "" {
			if slices.Contains(ids, id) {
				return fmt.Errorf("%w: two models are named %q; tell them apart with --model NAME=PATH (or name in models)", errUsage, id)
			}
			ids = append(ids, id)
		}
		if m.adapterDir != "" {
			d, err := filepath.Abs(m.adapterDir)
			if err != nil {
				return err
			}
			if slices.Contains(dirs, d) {
				return fmt.Errorf("%w: two models have the adapter directory %s; give each its own", errUsage, m.adapterDir)
			}
			dirs = append(dirs, d)
		}
	}
	return nil
}

// servedModel is a model the server serves: its file (tokenizer,
// template, adapters) is open from the start, its engine loaded on demand
// (load).
type servedModel struct {
	model *models.Model
	api   *session.Model
	micro *gorgonia.MicroLoRA
	// backend is the backend that runs it (its models: entry's, else
	// --backend); maxLen its context; opt and engineOpt what load opens it
	// with.
	backend   string
	opt       backends.Options
	engineOpt backends.EngineOptions
	bf        *backendFlags
	// draft is the --draft model, whose backend each load opens beside
	// the model's; nil without one.
	draft *models.Model
	// draftThreads are --threads-draft (0: the model's threads).
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
	b, err := s.bf.openNamed(s.backend, s.model, s.opt)
	if err != nil {
		return nil, err
	}
	eo := s.engineOpt
	var draft backends.Backend
	if s.draft != nil {
		threads := s.opt.Threads
		if s.bf.threads != nil {
			threads = *s.bf.threads
		}
		if s.draftThreads > 0 {
			threads = s.draftThreads
		}
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
	backend := s.backend
	if backend == "" {
		backend, _, _ = s.bf.choose("", s.model)
	}
	s.log.Info().Str("model", s.api.ID).Str("backend", backend).Int("ctx", eng.MaxLen()).Int("parallel", s.engineOpt.Parallel).
		Int64("kv_bytes", eng.Stats().KVBytes).Dur("took_ms", time.Since(start)).Msg("model loaded")
	return &loadedEngine{Engine: eng, backend: b, file: s.model, draft: draft}, nil
}

// loadServeModels opens the models' files one after the other (pulling
// those named by hf) and serves each as a model on demand as soon as it is
// open, then loads the first ones — as many as --max-loaded allows, all
// without it — so that they answer at once. The caller closes what it
// returns, also on an error.
func loadServeModels(ctx context.Context, c *serveConfig, kv kvcache.Precision, srv *api.Server) ([]*servedModel, error) {
	var served []*servedModel
	several := len(c.models) > 1
	for _, spec := range c.models {
		sm, err := openServeModel(ctx, c, spec, kv)
		if err != nil {
			if !several || ctx.Err() != nil {
				return served, err
			}
			// One model of several that cannot be opened is reported, and
			// the others are served.
			id := specID(spec)
			c.log.Error().Str("model", id).Err(err).Msg("the model cannot be opened; the other models are served")
			srv.AddFailedModel(id, err.Error())
			continue
		}
		if lora := c.llamaCompat.lora; len(lora) > 0 && len(served) == 0 {
			// llama-server's --lora: the first model's requests run with it
			// unless they name another adapter.
			if sm.api.Adapter, err = loraLoad(lora[0], sm.model); err != nil {
				sm.close()
				return served, fmt.Errorf("--lora %s: %w", lora[0], err)
			}
		}
		served = append(served, sm)
		if err := srv.AddModel(sm.api); err != nil {
			return served, fmt.Errorf("%w: %v", errUsage, err)
		}
	}
	preload := len(served)
	if c.maxLoaded > 0 {
		preload = min(preload, c.maxLoaded)
	}
	if len(served) == 0 {
		return served, fmt.Errorf("none of the %d models can be opened", len(c.models))
	}
	for _, sm := range served[:preload] {
		if err := srv.LoadModel(ctx, sm.api.ID); err != nil {
			if !several || ctx.Err() != nil {
				return served, err
			}
			// It stays a model on demand: a request tries again.
			c.log.Error().Str("model", sm.api.ID).Err(err).Msg("the model cannot be loaded; the other models are served")
			continue
		}
		c.log.Info().Str("model", sm.api.ID).Int("parallel", c.parallel).Msg("model ready")
		// /health is ok once the first model is loaded; the others follow.
		srv.SetStarting(false)
	}
	return served, nil
}

// kvShare is the KV memory of each loaded model: --kv-memory split evenly
// among the models that may be loaded at once, so that they never hold
// more than it in total; 0 (without --kv-memory) leaves each its default.
func (c *serveConfig) kvShare() int64 {
	if c.kvMemory == 0 {
		return 0
	}
	slots := len(c.models)
	if c.maxLoaded > 0 {
		slots = min(slots, c.maxLoaded)
	}
	return c.kvMemory / int64(max(slots, 1))
}

// openServeModel finds the model file (downloading it if it is named by
// hf or is the default), opens it and its adapters, and prepares how its
// engine is loaded.
func openServeModel(ctx context.Context, c *serveConfig, spec modelSpec, kv kvcache.Precision) (_ *servedModel, err error) {
	path, err := resolveModelFile(ctx, c.log, spec.path, spec.hf)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	s := &servedModel{bf: c.backend, backend: spec.backend, log: c.log}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if s.backend == "" {
		s.backend = *c.backend.name
	}
	template := spec.chatTemplate
	if template == "" {
		template = c.chatTemplate
	}
	if s.model, err = models.Load(path, models.LoadOptions{ChatTemplate: template, Logger: c.log}); err != nil {
		return nil, err
	}
	if s.model.Config == nil {
		return nil, fmt.Errorf("%s: the file holds no runnable model (a vocabulary only?)", path)
	}
	trained := s.model.Config.ContextLength
	maxLen := c.ctx
	switch {
	case !c.ctxSet:
		maxLen = min(defaultServeCtx, trained)
	case maxLen == 0:
		maxLen = trained
	case maxLen > trained:
		c.log.Warn().Str("path", path).Int("ctx", maxLen).Int("trained", trained).Msg("--ctx is larger than the model's trained context; quality may suffer past it")
	}
	// Without --kv-memory every slot can fill its context at once; the
	// blocks the slots do not hold keep earlier prompts for prefix reuse.
	s.opt = backends.Options{MaxBatch: c.batch, KVBytes: c.kvShare(), KVTokens: c.parallel * maxLen, KVSequences: c.parallel,
		KVStoreDir: c.store, KVStoreMax: c.storeMax}
	c.kv.apply(&s.opt)
	tok := s.model.Tokenizer
	s.engineOpt = backends.EngineOptions{
		Parallel:  c.parallel,
		QueueSize: c.queue,
		MaxLen:    maxLen,
		Batch:     c.batch,
		KV:        kv,
		IsEOG:     tok.IsEOG,
		Spec:      c.spec.options(s.model, nil),
	}
	if c.spec.draft != "" {
		if s.draft, err = models.Load(c.spec.draft, models.LoadOptions{Logger: c.log}); err != nil {
			return nil, fmt.Errorf("--draft: %w", err)
		}
		s.draftThreads = c.spec.threads
		if err := sameVocab(s.model, s.draft); err != nil {
			return nil, fmt.Errorf("%w: --draft %s for %s: %v", errUsage, c.spec.draft, path, err)
		}
	}
	id := spec.name
	if id == "" {
		id = strings.TrimSuffix(filepath.Base(path), ".gguf")
	}
	s.api = &session.Model{ID: id, Tokenizer: tok, Chat: s.model, Load: s.load, MaxLen: maxLen, Path: path, TrainedContext: trained}
	if info, err := s.model.Info(); err == nil {
		s.api.Info = &info
	} else {
		c.log.Warn().Str("model", id).Err(err).Msg("describing the model file")
	}
	c.log.Info().Str("model", id).Str("path", path).Str("arch", s.model.Config.Arch).Dur("took_ms", time.Since(start)).Msg("model opened")
	if spec.adapterDir != "" {
		if err := openAdapters(c, spec.adapterDir, s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// openAdapters opens a model's adapter directory, loading the adapters in
// it; one that does not fit the model is logged and left out.
func openAdapters(c *serveConfig, dir string, s *servedModel) error {
	maxBytes := c.maxAdapterMB << 20
	reg, err := lora.NewRegistry(lora.RegistryOptions{
		Dir:            dir,
		Config:         s.model.Config,
		Base:           s.model.File,
		BaseModel:      s.api.ID,
		MaxResident:    c.maxAdapters,
		MaxUploadBytes: maxBytes,
	})
	if err != nil {
		return fmt.Errorf("adapter directory of %s: %w", s.api.ID, err)
	}
	for name, why := range reg.Skipped() {
		c.log.Warn().Str("model", s.api.ID).Str("entry", name).Err(why).Msg("adapter directory: entry left out")
	}
	names := []string{}
	for _, in := range reg.List() {
		names = append(names, in.Name)
	}
	c.log.Info().Str("model", s.api.ID).Str("dir", reg.Dir()).Strs("adapters", names).Int("max_resident", c.maxAdapters).
		Int64("max_upload_mb", c.maxAdapterMB).Msg("adapters loaded")
	s.api.Adapters, s.api.MaxAdapterBytes = reg, maxBytes
	if c.micro.on {
		startMicroLoRA(&c.micro, s)
	}
	return nil
}

// relativeTo is path taken from dir when it is relative (and not empty).
func relativeTo(dir, path string) string {
	if path == "" || dir == "" || filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(dir, path)
}

// fileExists reports whether path names a file.
func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir()
}

// specID is the id a models entry would be served under, for reporting
// one that cannot be opened.
func specID(spec modelSpec) string {
	switch {
	case spec.name != "":
		return spec.name
	case spec.path != "":
		return strings.TrimSuffix(filepath.Base(spec.path), ".gguf")
	}
	return spec.hf
}
