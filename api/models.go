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
}

type modelList struct {
	Object string        `json:"object"`
	Data   []modelObject `json:"data"`
}

func modelObjectOf(m *Model) modelObject {
	return modelObject{ID: m.ID, Object: "model", Created: m.Created.Unix(), OwnedBy: "ruvllm", Root: m.ID, MaxModelLen: m.Engine.MaxLen()}
}

// adapterModelOf is the card of one of m's adapters.
func adapterModelOf(m *Model, in lora.Info) modelObject {
	o := modelObjectOf(m)
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
		l.Data = append(l.Data, modelObjectOf(m))
	}
	for _, m := range set.list {
		if m.Adapters == nil {
			continue
		}
		for _, in := range m.Adapters.List() {
			l.Data = append(l.Data, adapterModelOf(m, in))
		}
	}
	writeJSON(w, http.StatusOK, l)
	return nil
}

// getModel serves GET /v1/models/{id}, for any served model or adapter
// ("ADAPTER" or "MODEL:ADAPTER"); an id may hold slashes ("org/name"), so
// the route takes the rest of the path.
func (s *Server) getModel(w http.ResponseWriter, r *http.Request) error {
	id := chi.URLParam(r, "*")
	if id == "" || strings.Contains(id, "\x00") {
		return pathNotFound(r)
	}
	t, err := s.resolveModel(id)
	if err != nil {
		return err
	}
	if t.adapter == "" {
		writeJSON(w, http.StatusOK, modelObjectOf(t.model))
		return nil
	}
	in, gerr := t.model.Adapters.Get(t.adapter)
	if gerr != nil {
		return adapterError(gerr, adapterParams{name: "model"})
	}
	writeJSON(w, http.StatusOK, adapterModelOf(t.model, in))
	return nil
}
