package api

import (
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/ruvllm/ruvllm/lora"
)

// modelObject is a model card. Root and parent follow vLLM: an adapter's
// parent is the base model it runs on, the base model has none; root is
// the base model for both (vLLM puts file paths there, which a server
// should not show).
type modelObject struct {
	ID          string  `json:"id"`
	Object      string  `json:"object"`
	Created     int64   `json:"created"`
	OwnedBy     string  `json:"owned_by"`
	Root        string  `json:"root"`
	Parent      *string `json:"parent"`
	MaxModelLen int     `json:"max_model_len"`
	// Status says whether the model is loaded, as llama-server's router
	// lists it: {"value": "loaded" | "loading" | "unloaded" |
	// "unloading"}. A model loaded for good is always "loaded".
	Status modelStatus `json:"status"`
}

type modelStatus struct {
	Value string `json:"value"`
}

type modelList struct {
	Object string        `json:"object"`
	Data   []modelObject `json:"data"`
}

func (s *Server) modelObjectOf(m *Model) modelObject {
	status := stateLoaded
	if m.resident != nil {
		status = s.residency.status(m.resident)
	}
	return modelObject{ID: m.ID, Object: "model", Created: m.Created.Unix(), OwnedBy: "ruvllm", Root: m.ID, MaxModelLen: m.Engine.MaxLen(),
		Status: modelStatus{Value: status.String()}}
}

// adapterModelOf is the card of one of m's adapters.
func (s *Server) adapterModelOf(m *Model, in lora.Info) modelObject {
	o := s.modelObjectOf(m)
	o.ID = in.Name
	if !in.Created.IsZero() {
		o.Created = in.Created.Unix()
	}
	parent := m.ID
	o.Parent = &parent
	return o
}

// listModels serves GET /v1/models: every model, the default first, then
// each model's adapters.
func (s *Server) listModels(w http.ResponseWriter, r *http.Request) error {
	set := s.models.Load()
	l := modelList{Object: "list", Data: make([]modelObject, 0, len(set.list))}
	for _, m := range set.list {
		l.Data = append(l.Data, s.modelObjectOf(m))
	}
	for _, m := range set.list {
		if m.Adapters == nil {
			continue
		}
		for _, in := range m.Adapters.List() {
			l.Data = append(l.Data, s.adapterModelOf(m, in))
		}
	}
	if card, ok := s.routerModel(set); ok {
		l.Data = append(l.Data, card)
	}
	writeJSON(w, http.StatusOK, l)
	return nil
}

// routerModel is the router's card, listed last when there is a choice to
// make (two models or more), so that clients that pick from the list can
// pick it: its context is the smallest of the models'.
func (s *Server) routerModel(set *modelSet) (modelObject, bool) {
	name := s.routerName()
	if name == "" || len(set.list) < 2 {
		return modelObject{}, false
	}
	o := modelObject{ID: name, Object: "model", Created: set.list[0].Created.Unix(), OwnedBy: "ruvllm", Root: name,
		MaxModelLen: set.list[0].Engine.MaxLen(), Status: modelStatus{Value: stateLoaded.String()}}
	for _, m := range set.list[1:] {
		o.MaxModelLen = min(o.MaxModelLen, m.Engine.MaxLen())
	}
	return o, true
}

// getModel serves GET /v1/models/{id}, for any served model or adapter
// ("ADAPTER" or "MODEL:ADAPTER"); an id may hold slashes ("org/name"), so
// the route takes the rest of the path.
func (s *Server) getModel(w http.ResponseWriter, r *http.Request) error {
	id := chi.URLParam(r, "*")
	if id == "" || strings.Contains(id, "\x00") {
		return pathNotFound(r)
	}
	if card, ok := s.routerModel(s.models.Load()); ok && id == card.ID {
		writeJSON(w, http.StatusOK, card)
		return nil
	}
	t, err := s.resolveModel(id)
	if err != nil {
		return err
	}
	if t.adapter == "" {
		writeJSON(w, http.StatusOK, s.modelObjectOf(t.model))
		return nil
	}
	in, gerr := t.model.Adapters.Get(t.adapter)
	if gerr != nil {
		return adapterError(gerr, adapterParams{name: "model"})
	}
	writeJSON(w, http.StatusOK, s.adapterModelOf(t.model, in))
	return nil
}

// Error codes of the model routes.
const (
	codeModelBusy   = "model_in_use"
	codeModelPinned = "model_not_on_demand"
)

// modelAction reads {"model": NAME} naming a served model loaded on
// demand.
func (s *Server) modelAction(r *http.Request) (*Model, *apiError) {
	f, err := readObject(r)
	if err != nil {
		return nil, err
	}
	name, ok, err := f.str("model")
	if err != nil {
		return nil, err
	}
	if !ok || name == "" {
		return nil, invalid("model", codeMissing, "model is required")
	}
	if err := f.unknown(); err != nil {
		return nil, err
	}
	m, err := s.lookupModel(name)
	if err != nil {
		return nil, err
	}
	if m.resident == nil {
		return nil, &apiError{Status: http.StatusBadRequest, Type: typeInvalidRequest, Param: "model", Code: codeModelPinned,
			Message: "the model " + quote(m.ID) + " is loaded for good, not on demand"}
	}
	return m, nil
}

// loadModel serves llama-server's POST /models/load: it loads the model
// (if it is not loaded) and answers once it is, keeping it for its
// keep-alive.
func (s *Server) loadModel(w http.ResponseWriter, r *http.Request) error {
	m, err := s.modelAction(r)
	if err != nil {
		return err
	}
	release, err := s.holdModel(r.Context(), m)
	if err != nil {
		return err
	}
	release(nil)
	writeJSON(w, http.StatusOK, map[string]bool{"success": true})
	return nil
}

// unloadModel serves llama-server's POST /models/unload: the model is
// unloaded now, unless requests use it (409).
func (s *Server) unloadModel(w http.ResponseWriter, r *http.Request) error {
	m, err := s.modelAction(r)
	if err != nil {
		return err
	}
	if _, busy := s.residency.unloadNow(m.resident); busy != nil {
		return &apiError{Status: http.StatusConflict, Type: typeInvalidRequest, Param: "model", Code: codeModelBusy,
			Message: "the model " + quote(m.ID) + " cannot be unloaded now: " + busy.Error()}
	}
	writeJSON(w, http.StatusOK, map[string]bool{"success": true})
	return nil
}
