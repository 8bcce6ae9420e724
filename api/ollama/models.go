package ollama

import (
	"cmp"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ruvllm/ruvllm/api/jsonhttp"
	"github.com/ruvllm/ruvllm/models/gguf"
	"github.com/ruvllm/ruvllm/session"
)

// detailsOf are a model's details, from what its file says of it.
func detailsOf(m *session.Model) details {
	d := details{Format: "gguf", Families: []string{}}
	if in := m.Info; in != nil {
		d.Family = in.Arch
		if in.Arch != "" {
			d.Families = []string{in.Arch}
		}
		if in.Parameters > 0 {
			d.ParameterSize = humanCount(in.Parameters)
		}
		d.QuantizationLevel = in.FileType
	}
	return d
}

// humanCount writes a parameter count as ollama does: "494.03M", "7.6B",
// "8B", "135K".
func humanCount(n uint64) string {
	trim := func(v float64, decimals int, unit string) string {
		if v == math.Floor(v) {
			return strconv.FormatFloat(v, 'f', 0, 64) + unit
		}
		return strconv.FormatFloat(v, 'f', decimals, 64) + unit
	}
	switch {
	case n >= 1e9:
		return trim(float64(n)/1e9, 1, "B")
	case n >= 1e6:
		return trim(float64(n)/1e6, 2, "M")
	case n >= 1e3:
		return strconv.FormatFloat(float64(n)/1e3, 'f', 0, 64) + "K"
	}
	return strconv.FormatUint(n, 10)
}

// tags serves GET /api/tags: the served models, the default first, then
// each model's adapters as "MODEL:ADAPTER".
func (a *API) tags(w http.ResponseWriter, r *http.Request) error {
	list := a.Models.List()
	out := make([]listModel, 0, len(list))
	for _, m := range list {
		lm := listModel{Name: modelName(m.ID), Model: modelName(m.ID), ModifiedAt: m.Created, Details: detailsOf(m)}
		if in := m.Info; in != nil {
			lm.Size, lm.Digest = in.Size, in.Digest
			if !in.Modified.IsZero() {
				lm.ModifiedAt = in.Modified
			}
		}
		out = append(out, lm)
	}
	for _, m := range list {
		if m.Adapters == nil {
			continue
		}
		for _, in := range m.Adapters.List() {
			name := m.ID + ":" + in.Name
			d := detailsOf(m)
			d.ParentModel = modelName(m.ID)
			out = append(out, listModel{Name: name, Model: name, ModifiedAt: in.Created, Size: in.FileBytes, Details: d})
		}
	}
	jsonhttp.WriteJSON(w, http.StatusOK, map[string]any{"models": out})
	return nil
}

// ps serves GET /api/ps: the models loaded now, with when each will be
// unloaded if no request comes (the one that will stay longest first). A
// model kept until another needs its place, or loaded for good, expires
// as far ahead as ollama's "forever" does. Its size is the file's and the
// KV cache's; no memory is a GPU's.
func (a *API) ps(w http.ResponseWriter, r *http.Request) error {
	out := []runningModel{}
	now := time.Now()
	for _, m := range a.Models.List() {
		at, forever, ok := a.Models.Expiry(m)
		if !ok {
			continue
		}
		if forever {
			at = now.Add(math.MaxInt64)
		}
		rm := runningModel{Name: modelName(m.ID), Model: modelName(m.ID), Details: detailsOf(m), ExpiresAt: at,
			Size: m.Engine.Stats().KVBytes, ContextLength: m.Engine.MaxLen()}
		if in := m.Info; in != nil {
			rm.Size += in.Size
			rm.Digest = in.Digest
		}
		out = append(out, rm)
	}
	slices.SortStableFunc(out, func(x, y runningModel) int { return y.ExpiresAt.Compare(x.ExpiresAt) })
	jsonhttp.WriteJSON(w, http.StatusOK, map[string]any{"models": out})
	return nil
}

// show serves POST /api/show: a model's details, its chat template, its
// file's metadata (arrays of more than 5 values shown empty unless
// verbose, as ollama does), its tensors and what it can do.
func (a *API) show(w http.ResponseWriter, r *http.Request) error {
	f, err := jsonhttp.Read(r)
	if err != nil {
		return err
	}
	name, err := requestedModel(f)
	if err != nil {
		return err
	}
	verbose, _, err := f.Bool("verbose")
	if err != nil {
		return err
	}
	t, _, err := a.resolve(name)
	if err != nil {
		return err
	}
	m := t.Model
	if m == nil {
		return notFound(name)
	}
	resp := showResponse{Template: m.TemplateSource(), Details: detailsOf(m), ModelInfo: map[string]any{}, ModifiedAt: m.Created,
		Capabilities: capabilities(m)}
	if t.Adapter != "" {
		resp.Details.ParentModel = modelName(m.ID)
	}
	resp.Parameters = a.parameters(m)
	resp.Modelfile = fmt.Sprintf("# Modelfile of %s as ruvllm serves it\nFROM %s\n", name, m.ID)
	for line := range strings.Lines(resp.Parameters) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), " ")
		resp.Modelfile += "PARAMETER " + k + " " + strings.TrimSpace(v) + "\n"
	}
	if in := m.Info; in != nil {
		if !in.Modified.IsZero() {
			resp.ModifiedAt = in.Modified
		}
		for _, kv := range in.Metadata {
			switch kv.Key {
			case "general.name", "tokenizer.chat_template":
				continue
			case "general.license":
				resp.License, _ = kv.Value.Str()
			}
			resp.ModelInfo[kv.Key] = metadataValue(kv.Value, verbose)
		}
		resp.Tensors = make([]tensor, len(in.Tensors))
		for i, t := range in.Tensors {
			resp.Tensors[i] = tensor{Name: t.Name, Type: t.Type.String(), Shape: t.Dims}
		}
	}
	jsonhttp.WriteJSON(w, http.StatusOK, resp)
	return nil
}

// capabilities are what ollama calls a model's capabilities: completion
// (any model that is not an embedding model), tools (a template that shows
// them), thinking (a template that teaches reasoning), embedding (a file
// that gives a pooling type).
func capabilities(m *session.Model) []string {
	embedding := m.Info != nil && m.Info.Embedding
	caps := []string{}
	if !embedding {
		caps = append(caps, "completion")
	}
	if m.KnowsTools() {
		caps = append(caps, "tools")
	}
	if m.Thinks() {
		caps = append(caps, "thinking")
	}
	if embedding {
		caps = append(caps, "embedding")
	}
	return caps
}

// parameters are what a request that sets no option gets: the served
// context and the server's default sampling, as ollama's Modelfile
// parameters list them.
func (a *API) parameters(m *session.Model) string {
	p := a.Models.Sampling()
	lines := []struct {
		k string
		v any
	}{
		{"num_ctx", m.Engine.MaxLen()}, {"temperature", p.Temperature}, {"top_k", p.TopK}, {"top_p", p.TopP}, {"min_p", p.MinP},
		{"repeat_penalty", cmp.Or(p.RepeatPenalty, 1)},
	}
	var b strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&b, "%-30s %v\n", l.k, l.v)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// metadataValue is a metadata value as JSON shows it; an array of more
// than 5 values is empty unless verbose.
func metadataValue(v gguf.Value, verbose bool) any {
	if v.Type == gguf.TypeArray && !verbose && v.Len() > 5 {
		return []any{}
	}
	switch x := v.Any().(type) {
	case []uint8:
		// Not the base64 string JSON makes of bytes.
		out := make([]int, len(x))
		for i, b := range x {
			out[i] = int(b)
		}
		return out
	case []gguf.Value:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = metadataValue(e, verbose)
		}
		return out
	case float32:
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return nil
		}
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil
		}
	case []float32:
		if slices.ContainsFunc(x, func(f float32) bool { return math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) }) {
			return nil
		}
	case []float64:
		if slices.ContainsFunc(x, func(f float64) bool { return math.IsNaN(f) || math.IsInf(f, 0) }) {
			return nil
		}
	}
	return v.Any()
}
