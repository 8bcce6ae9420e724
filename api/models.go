package api

import (
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/ruvllm/ruvllm/api/jsonhttp"
	"github.com/ruvllm/ruvllm/lora"
	"github.com/ruvllm/ruvllm/session"
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
	// Type, DisplayName and CreatedAt make the card Anthropic's too (its
	// Models API), for Anthropic's SDKs and Claude Code's model discovery.
	Type        string `json:"type"`
	DisplayName string `json:"display_name"`
	CreatedAt   string `json:"created_at"`
}

// withAnthropic fills in the card's fields of Anthropic's shape.
func withAnthropic(o modelObject) modelObject {
	o.Type, o.DisplayName = "model", o.ID
	o.CreatedAt = time.Unix(o.Created, 0).UTC().Format(time.RFC3339)
	return o
}

type modelStatus struct {
	Value string `json:"value"`
	// Reason says why a model has the status "failed": it could not be
	// opened, and the other models are served.
	Reason string `json:"reason,omitempty"`
}

// modelList is OpenAI's list, with the paging fields of Anthropic's: one
// page holds every model.
type modelList struct {
	Object  string        `json:"object"`
	Data    []modelObject `json:"data"`
	HasMore bool          `json:"has_more"`
	FirstID *string       `json:"first_id"`
	LastID  *string       `json:"last_id"`
}

func (s *Server) modelObjectOf(m *session.Model) modelObject {
	return modelObject{ID: m.ID, Object: "model", Created: m.Created.Unix(), OwnedBy: "ruvllm", Root: m.ID, MaxModelLen: m.Engine.MaxLen(),
		Status: modelStatus{Value: s.models.State(m)}}
}

// adapterModelOf is the card of one of m's adapters.
func (s *Server) adapterModelOf(m *session.Model, in lora.Info) modelObject {
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
	list := s.models.List()
	l := modelList{Object: "list", Data: make([]modelObject, 0, len(list))}
	for _, m := range list {
		l.Data = append(l.Data, s.modelObjectOf(m))
	}
	for _, m := range list {
		if m.Adapters == nil {
			continue
		}
		for _, in := range m.Adapters.List() {
			l.Data = append(l.Data, s.adapterModelOf(m, in))
		}
	}
	if card, ok := s.routerModel(); ok {
		l.Data = append(l.Data, card)
	}
	for _, f := range s.models.Failed() {
		l.Data = append(l.Data, modelObject{ID: f.ID, Object: "model", OwnedBy: "ruvllm", Root: f.ID,
			Status: modelStatus{Value: "failed", Reason: f.Reason}})
	}
	for i := range l.Data {
		l.Data[i] = withAnthropic(l.Data[i])
	}
	if n := len(l.Data); n > 0 {
		l.FirstID, l.LastID = &l.Data[0].ID, &l.Data[n-1].ID
	}
	jsonhttp.WriteJSON(w, http.StatusOK, l)
	return nil
}

// routerModel is the router's card, listed last when there is a choice to
// make (two models or more), so that clients that pick from the list can
// pick it: its context is the smallest of the models'.
func (s *Server) routerModel() (modelObject, bool) {
	name := s.models.RouterName()
	list := s.models.List()
	if name == "" || len(list) < 2 {
		return modelObject{}, false
	}
	// The router is loaded when a model it can choose is: it answers at
	// once then, and loads one first otherwise.
	status := "unloaded"
	for _, m := range list {
		if s.models.Loaded(m) {
			status = "loaded"
		}
	}
	o := modelObject{ID: name, Object: "model", Created: list[0].Created.Unix(), OwnedBy: "ruvllm", Root: name,
		MaxModelLen: list[0].Engine.MaxLen(), Status: modelStatus{Value: status}}
	for _, m := range list[1:] {
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
	if card, ok := s.routerModel(); ok && id == card.ID {
		jsonhttp.WriteJSON(w, http.StatusOK, withAnthropic(card))
		return nil
	}
	t, err := s.models.Resolve(id, "model")
	if err != nil {
		return err
	}
	if t.Adapter == "" {
		jsonhttp.WriteJSON(w, http.StatusOK, withAnthropic(s.modelObjectOf(t.Model)))
		return nil
	}
	in, gerr := t.Model.Adapters.Get(t.Adapter)
	if gerr != nil {
		return adapterError(gerr, adapterParams{name: "model"})
	}
	jsonhttp.WriteJSON(w, http.StatusOK, withAnthropic(s.adapterModelOf(t.Model, in)))
	return nil
}

// Error codes of the model routes.
const (
	codeModelBusy   = "model_in_use"
	codeModelPinned = "model_not_on_demand"
)

// modelAction reads {"model": NAME} naming a served model loaded on
// demand.
func (s *Server) modelAction(r *http.Request) (*session.Model, error) {
	f, err := jsonhttp.Read(r)
	if err != nil {
		return nil, err
	}
	name, ok, err := f.Str("model")
	if err != nil {
		return nil, err
	}
	if !ok || name == "" {
		return nil, session.Invalid("model", session.CodeMissing, "model is required")
	}
	if err := f.Unknown(); err != nil {
		return nil, err
	}
	m, err := s.models.Lookup(name, "model")
	if err != nil {
		return nil, err
	}
	if !m.OnDemand() {
		return nil, &session.Error{Status: http.StatusBadRequest, Type: session.TypeInvalidRequest, Param: "model", Code: codeModelPinned,
			Message: "the model " + session.Quote(m.ID) + " is loaded for good, not on demand"}
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
	release, err := s.models.Hold(r.Context(), m)
	if err != nil {
		return err
	}
	release(nil)
	jsonhttp.WriteJSON(w, http.StatusOK, map[string]bool{"success": true})
	return nil
}

// unloadModel serves llama-server's POST /models/unload: the model is
// unloaded now, unless requests use it (409).
func (s *Server) unloadModel(w http.ResponseWriter, r *http.Request) error {
	m, err := s.modelAction(r)
	if err != nil {
		return err
	}
	if _, busy := s.models.UnloadModel(m); busy != nil {
		return &session.Error{Status: http.StatusConflict, Type: session.TypeInvalidRequest, Param: "model", Code: codeModelBusy,
			Message: "the model " + session.Quote(m.ID) + " cannot be unloaded now: " + busy.Error()}
	}
	jsonhttp.WriteJSON(w, http.StatusOK, map[string]bool{"success": true})
	return nil
}
