package api

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/ruvllm/ruvllm/api/jsonhttp"
	"github.com/ruvllm/ruvllm/lora"
	"github.com/ruvllm/ruvllm/session"
)

// Error codes of the adapter routes.
const (
	codeAdaptersOff    = "adapters_disabled"
	codeAdapterMissing = "adapter_not_found"
	codeAdapterExists  = "adapter_exists"
	codeAdapterInUse   = "adapter_in_use"
	codeInvalidAdapter = "invalid_adapter"
	codeAdapterName    = "invalid_adapter_name"
	codeAdapterPath    = "invalid_adapter_path"
	codeBaseMismatch   = "base_model_mismatch"
	codeMultipart      = "invalid_multipart"
)

// adapterObject is an adapter as the adapter routes describe it.
type adapterObject struct {
	ID        string      `json:"id"`
	Object    string      `json:"object"`
	Created   int64       `json:"created"`
	BaseModel string      `json:"base_model"`
	Format    lora.Format `json:"format"`
	Rank      int         `json:"rank"`
	Alpha     float32     `json:"alpha"`
	Targets   int         `json:"targets"`
	FileBytes int64       `json:"file_bytes"`
	// Resident says whether the adapter is in memory now (MemoryBytes);
	// one that is not is read again when a request names it.
	Resident    bool  `json:"resident"`
	MemoryBytes int64 `json:"memory_bytes"`
	// InUse counts the requests running with the adapter.
	InUse int `json:"in_use"`
	// A MicroLoRA trained from feedback shows its training: feedback
	// events received, updates trained into it, the last update's loss and
	// its version (each update publishes one).
	Feedback *int64   `json:"feedback,omitempty"`
	Updates  *int64   `json:"updates,omitempty"`
	Loss     *float64 `json:"loss,omitempty"`
	Version  *int64   `json:"version,omitempty"`
}

// withTraining shows tr in o.
func (o adapterObject) withTraining(tr lora.Training) adapterObject {
	o.Feedback, o.Updates, o.Loss, o.Version = &tr.Feedback, &tr.Updates, &tr.Loss, &tr.Version
	return o
}

// training is the live training state of the adapter of m, from the sink
// that trains it, else as its registry last saw it.
func (s *Server) training(m *session.Model, in lora.Info) (lora.Training, bool) {
	for _, sink := range append(append([]session.FeedbackSink(nil), m.Feedback...), s.opt.Feedback...) {
		if at, ok := sink.(session.AdapterTrainer); ok {
			if tr, ok := at.Training(m.ID, in.Name); ok {
				return tr, true
			}
		}
	}
	if in.Training != nil {
		return *in.Training, true
	}
	return lora.Training{}, false
}

type adapterList struct {
	Object string          `json:"object"`
	Data   []adapterObject `json:"data"`
}

type adapterDeleted struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Deleted bool   `json:"deleted"`
}

func adapterObjectOf(in lora.Info) adapterObject {
	o := adapterObject{
		ID: in.Name, Object: "lora_adapter", BaseModel: in.BaseModel, Format: in.Format,
		Rank: in.Rank, Alpha: in.Alpha, Targets: in.Targets, FileBytes: in.FileBytes,
		Resident: in.Resident, MemoryBytes: in.MemoryBytes, InUse: in.InUse,
	}
	if !in.Created.IsZero() {
		o.Created = in.Created.Unix()
	}
	return o
}

// adapterParams name the request fields an adapter error is about.
type adapterParams struct {
	name, file string
}

// adapterError maps a registry error to its HTTP error.
func adapterError(err error, p adapterParams) error {
	e := func(status int, param, code string) error {
		return &session.Error{Status: status, Type: session.TypeInvalidRequest, Param: param, Code: code, Message: err.Error()}
	}
	switch {
	case errors.Is(err, lora.ErrNotFound):
		return e(http.StatusNotFound, p.name, codeAdapterMissing)
	case errors.Is(err, lora.ErrInUse):
		return e(http.StatusConflict, p.name, codeAdapterInUse)
	case errors.Is(err, lora.ErrExists):
		return e(http.StatusConflict, p.name, codeAdapterExists)
	case errors.Is(err, lora.ErrTooLarge):
		return e(http.StatusRequestEntityTooLarge, p.file, jsonhttp.CodeTooLarge)
	case errors.Is(err, lora.ErrBadName):
		return e(http.StatusBadRequest, p.name, codeAdapterName)
	case errors.Is(err, lora.ErrBadPath):
		return e(http.StatusBadRequest, p.file, codeAdapterPath)
	case errors.Is(err, lora.ErrBaseMismatch):
		return e(http.StatusBadRequest, "base_model", codeBaseMismatch)
	case errors.Is(err, lora.ErrInvalid):
		return e(http.StatusBadRequest, p.file, codeInvalidAdapter)
	}
	return session.Internal("adapter: %v", err)
}

// adaptersOff is the 404 of the adapter routes on a server none of whose
// models has an adapter directory.
func adaptersOff() error {
	return &session.Error{Status: http.StatusNotFound, Type: session.TypeInvalidRequest, Code: codeAdaptersOff,
		Message: "LoRA adapters are disabled on this server: it was started without an adapter directory " +
			"(ruvllm-serve --adapter-dir DIR for the first model, or adapter_dir in a models: entry of --config)"}
}

// adapterModel picks the model whose adapters a route adds to. base, when
// it is a served model's ID, picks that model (param names the field that
// carries it). Otherwise it is the default model when that has adapters,
// else the one model that has them; a base that is no ID is left for the
// registry to judge (an upload's base_model may be the model's
// general.name).
func (s *Server) adapterModel(base, param string) (*session.Model, error) {
	list := s.models.List()
	if m, ok := s.models.Get(base); ok {
		if m.Adapters == nil {
			return nil, &session.Error{Status: http.StatusNotFound, Type: session.TypeInvalidRequest, Param: param, Code: codeAdaptersOff,
				Message: "the model " + session.Quote(m.ID) + " has no adapter directory, so it takes no adapters"}
		}
		return m, nil
	}
	if len(list) > 0 && list[0].Adapters != nil {
		return list[0], nil
	}
	var with []*session.Model
	for _, m := range list {
		if m.Adapters != nil {
			with = append(with, m)
		}
	}
	switch len(with) {
	case 0:
		return nil, adaptersOff()
	case 1:
		return with[0], nil
	}
	return nil, session.Invalid(param, session.CodeMissing, "%s must name the model the adapter is for: %s take adapters", param, session.ModelIDs(with))
}

// adapterByName finds the adapter a route names (in the field param), as
// "ADAPTER", which must belong to one model only, or "MODEL:ADAPTER".
func (s *Server) adapterByName(name, param string) (session.Target, error) {
	if !s.models.HasAdapters() {
		return session.Target{}, adaptersOff()
	}
	found := s.models.FindAdapter(name)
	switch len(found) {
	case 0:
		return session.Target{}, adapterError(fmt.Errorf("%w: %q", lora.ErrNotFound, name), adapterParams{name: param})
	case 1:
		return found[0], nil
	}
	return session.Target{}, session.AmbiguousAdapter(found, param)
}

// listAdapters serves GET /v1/adapters: every model's adapters, in the
// order of the models.
func (s *Server) listAdapters(w http.ResponseWriter, r *http.Request) error {
	if !s.models.HasAdapters() {
		return adaptersOff()
	}
	l := adapterList{Object: "list", Data: []adapterObject{}}
	for _, m := range s.models.List() {
		if m.Adapters == nil {
			continue
		}
		for _, in := range m.Adapters.List() {
			o := adapterObjectOf(in)
			if tr, ok := s.training(m, in); ok {
				o = o.withTraining(tr)
			}
			l.Data = append(l.Data, o)
		}
	}
	jsonhttp.WriteJSON(w, http.StatusOK, l)
	return nil
}

// getAdapter serves GET /v1/adapters/{name}.
func (s *Server) getAdapter(w http.ResponseWriter, r *http.Request) error {
	t, aerr := s.adapterByName(chi.URLParam(r, "name"), "")
	if aerr != nil {
		return aerr
	}
	in, err := t.Model.Adapters.Get(t.Adapter)
	if err != nil {
		return adapterError(err, adapterParams{})
	}
	o := adapterObjectOf(in)
	if tr, ok := s.training(t.Model, in); ok {
		o = o.withTraining(tr)
	}
	jsonhttp.WriteJSON(w, http.StatusOK, o)
	return nil
}

// deleteAdapter serves DELETE /v1/adapters/{name}: it unregisters the
// adapter and removes its files from the adapter directory. While a request
// runs with the adapter the registry refuses (409) rather than waits, so
// the client knows at once whether the adapter is gone.
func (s *Server) deleteAdapter(w http.ResponseWriter, r *http.Request) error {
	t, aerr := s.adapterByName(chi.URLParam(r, "name"), "")
	if aerr != nil {
		return aerr
	}
	if err := t.Model.Adapters.Delete(t.Adapter); err != nil {
		return adapterError(err, adapterParams{})
	}
	s.opt.Logger.Info().Str("model", t.Model.ID).Str("adapter", t.Adapter).Msg("adapter deleted")
	jsonhttp.WriteJSON(w, http.StatusOK, adapterDeleted{ID: t.Adapter, Object: "lora_adapter", Deleted: true})
	return nil
}

// loadLoRAAdapter serves vLLM's POST /v1/load_lora_adapter
// {"lora_name","lora_path"[,"load_inplace"]}: it registers the adapter at
// lora_path, which must lie in the adapter directory (a relative path is
// taken from it). As vLLM, it answers 200 with a plain-text message, 400
// when the name is taken (unless load_inplace replaces it) and 404 when
// the path does not exist. Beyond vLLM, "base_model" names the model whose
// adapter directory it is, when several models have one.
func (s *Server) loadLoRAAdapter(w http.ResponseWriter, r *http.Request) error {
	if !s.models.HasAdapters() {
		return adaptersOff()
	}
	f, err := jsonhttp.Read(r)
	if err != nil {
		return err
	}
	name, _, err := f.Str("lora_name")
	if err != nil {
		return err
	}
	path, _, err := f.Str("lora_path")
	if err != nil {
		return err
	}
	inplace, _, err := f.Bool("load_inplace")
	if err != nil {
		return err
	}
	if is3D, _, err := f.Bool("is_3d_lora_weight"); err != nil {
		return err
	} else if is3D {
		return session.Unsupported("is_3d_lora_weight", "3D (mixture-of-experts) LoRA weights are not supported")
	}
	base, hasBase, err := f.Str("base_model")
	if err != nil {
		return err
	}
	if err := f.Unknown(); err != nil {
		return err
	}
	if name == "" || path == "" {
		param := "lora_name"
		if name != "" {
			param = "lora_path"
		}
		return session.Invalid(param, session.CodeMissing, "both lora_name and lora_path must be provided")
	}
	if _, ok := s.models.Get(base); hasBase && !ok {
		_, err := s.models.Resolve(base, "base_model")
		if err == nil {
			err = session.NotFound("base_model", session.CodeModelNotFound, "the model %s does not exist", session.Quote(base))
		}
		return err
	}
	m, aerr := s.adapterModel(base, "base_model")
	if aerr != nil {
		return aerr
	}
	reg := m.Adapters
	if inplace {
		if err := reg.Unload(name); err != nil && !errors.Is(err, lora.ErrNotFound) {
			return adapterError(err, adapterParams{name: "lora_name", file: "lora_path"})
		}
	}
	info, lerr := reg.LoadPath(name, path)
	if errors.Is(lerr, lora.ErrExists) {
		return session.Invalid("lora_name", codeAdapterExists, "the adapter %s has already been loaded; set load_inplace to true to replace it", session.Quote(name))
	}
	if errors.Is(lerr, lora.ErrNotFound) {
		// LoadPath's only "not found" is the path. Outside the directory
		// the answer is the same whether the path exists or not, so that
		// clients cannot probe the server's files.
		if outside(reg.Dir(), path) {
			lerr = fmt.Errorf("%w: %q", lora.ErrBadPath, path)
		}
		return adapterError(lerr, adapterParams{name: "lora_path", file: "lora_path"})
	}
	if lerr != nil {
		return adapterError(lerr, adapterParams{name: "lora_name", file: "lora_path"})
	}
	s.opt.Logger.Info().Str("model", m.ID).Str("adapter", info.Name).Str("path", path).Int("rank", info.Rank).Msg("adapter loaded")
	writeText(w, http.StatusOK, "Success: LoRA adapter '"+name+"' added successfully.")
	return nil
}

// outside reports whether path, taken from dir when relative, is outside
// dir by its spelling alone.
func outside(dir, path string) bool {
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	rel, err := filepath.Rel(dir, filepath.Clean(path))
	return err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// unloadLoRAAdapter serves vLLM's POST /v1/unload_lora_adapter
// {"lora_name"}: the adapter leaves the registry and memory; its files stay.
// As vLLM, it answers 200 with a plain-text message and 404 for an unknown
// name; unlike vLLM it refuses (409) while a request uses the adapter.
func (s *Server) unloadLoRAAdapter(w http.ResponseWriter, r *http.Request) error {
	if !s.models.HasAdapters() {
		return adaptersOff()
	}
	f, err := jsonhttp.Read(r)
	if err != nil {
		return err
	}
	name, _, err := f.Str("lora_name")
	if err != nil {
		return err
	}
	// vLLM's numeric id of an adapter; names are what identify one here.
	if _, _, err := f.Integer("lora_int_id"); err != nil {
		return err
	}
	if err := f.Unknown(); err != nil {
		return err
	}
	if name == "" {
		return session.Invalid("lora_name", session.CodeMissing, "lora_name must be provided to unload an adapter")
	}
	t, aerr := s.adapterByName(name, "lora_name")
	if aerr != nil {
		return aerr
	}
	if err := t.Model.Adapters.Unload(t.Adapter); err != nil {
		return adapterError(err, adapterParams{name: "lora_name"})
	}
	s.opt.Logger.Info().Str("model", t.Model.ID).Str("adapter", t.Adapter).Msg("adapter unloaded")
	writeText(w, http.StatusOK, "Success: LoRA adapter '"+name+"' removed successfully.")
	return nil
}

// writeText sends a plain-text response, as vLLM's adapter routes do.
func writeText(w http.ResponseWriter, status int, text string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(text)))
	w.WriteHeader(status)
	io.WriteString(w, text)
}
