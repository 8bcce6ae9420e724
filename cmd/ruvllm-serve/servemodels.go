package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/internal/serving"
	"github.com/ruvllm/ruvllm/models/hub"
)

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
func parseModelFlag(v string) (serving.ModelSpec, error) {
	name, path, named := strings.Cut(v, "=")
	switch {
	case !named:
		return serving.ModelSpec{Path: v}, nil
	case name == "":
		return serving.ModelSpec{}, fmt.Errorf("%q: the name before = is empty (give NAME=PATH, or PATH alone)", v)
	case path == "":
		return serving.ModelSpec{}, fmt.Errorf("%q: the path after = is empty (give NAME=PATH)", v)
	}
	if err := checkModelName(name); err != nil {
		return serving.ModelSpec{}, err
	}
	return serving.ModelSpec{Name: name, Path: path}, nil
}

// modelsKey is the --config key of the list of models; it is not a flag.
const modelsKey = "models"

// parseModelList reads the models: list of a --config file: each entry
// {name, path} or {name, hf} (name may be left out with path), and
// optionally chat_template, adapter_dir and backend.
func parseModelList(v any, dir string) ([]serving.ModelSpec, error) {
	list, ok := v.([]any)
	if !ok || len(list) == 0 {
		return nil, errors.New("models must be a list of {name, path} or {name, hf} entries")
	}
	specs := make([]serving.ModelSpec, len(list))
	for i, e := range list {
		where := fmt.Sprintf("models[%d]", i)
		entry, ok := e.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s must be a {name, path} or {name, hf} entry", where)
		}
		spec := &specs[i]
		for key, val := range entry {
			dst, known := map[string]*string{
				"name": &spec.Name, "path": &spec.Path, "hf": &spec.HF, "chat_template": &spec.ChatTemplate, "adapter_dir": &spec.AdapterDir,
				"backend": &spec.Backend,
			}[strings.ReplaceAll(key, "-", "_")]
			if !known {
				return nil, fmt.Errorf("%s: unknown key %q (name, path, hf, chat_template, adapter_dir, backend)", where, key)
			}
			if *dst, ok = val.(string); !ok {
				return nil, fmt.Errorf("%s.%s must be a string", where, key)
			}
		}
		switch {
		case (spec.Path == "") == (spec.HF == ""):
			return nil, fmt.Errorf("%s needs path or hf, one of them", where)
		case spec.HF != "" && spec.Name == "":
			return nil, fmt.Errorf("%s needs a name: a pulled file's name is not known before it is pulled", where)
		}
		// A config file's paths are the file's: relative ones are taken
		// from its directory.
		spec.Path, spec.AdapterDir = relativeTo(dir, spec.Path), relativeTo(dir, spec.AdapterDir)
		if t := relativeTo(dir, spec.ChatTemplate); t != spec.ChatTemplate && fileExists(t) {
			spec.ChatTemplate = t
		}
		if spec.HF != "" {
			if _, err := hub.ParseRef(spec.HF); err != nil {
				return nil, fmt.Errorf("%s.hf: %v", where, err)
			}
		}
		if spec.Name != "" {
			if err := checkModelName(spec.Name); err != nil {
				return nil, fmt.Errorf("%s.name: %v", where, err)
			}
		}
		if spec.Backend != "" && !slices.Contains(backends.Names(), spec.Backend) {
			return nil, fmt.Errorf("%s.backend: no backend %q (known: %s)", where, spec.Backend, strings.Join(backends.Names(), ", "))
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
		c.models = []serving.ModelSpec{{HF: c.hf}}
		first = "--hf"
	} else if c.hf != "" {
		return fmt.Errorf("%w: give --model (or models in --config) or --hf, not both", errUsage)
	}
	if c.alias != "" {
		if len(c.models) > 1 || c.models[0].Name != "" {
			return fmt.Errorf("%w: --alias names the one model of %s; with several, name each (--model NAME=PATH, or name in models)", errUsage, first)
		}
		c.models[0].Name = c.alias
	}
	if c.adapterDir != "" {
		if c.models[0].AdapterDir != "" {
			return fmt.Errorf("%w: --adapter-dir is the first model's adapter directory, which its adapter_dir in --config already sets", errUsage)
		}
		c.models[0].AdapterDir = c.adapterDir
	}
	var ids, dirs []string
	for _, m := range c.models {
		if id := m.ID(); id != "" {
			if slices.Contains(ids, id) {
				return fmt.Errorf("%w: two models are named %q; tell them apart with --model NAME=PATH (or name in models)", errUsage, id)
			}
			ids = append(ids, id)
		}
		if m.AdapterDir != "" {
			d, err := filepath.Abs(m.AdapterDir)
			if err != nil {
				return err
			}
			if slices.Contains(dirs, d) {
				return fmt.Errorf("%w: two models have the adapter directory %s; give each its own", errUsage, m.AdapterDir)
			}
			dirs = append(dirs, d)
		}
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
