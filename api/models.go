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

// listModels serves GET /v1/models: the base model, then its adapters.
func (s *Server) listModels(w http.ResponseWriter, r *http.Request) error {
	m := s.model.Load()
	l := modelList{Object: "list", Data: []modelObject{modelObjectOf(m)}}
	if m.Adapters != nil {
		for _, in := range m.Adapters.List() {
			l.Data = append(l.Data, adapterModelOf(m, in))
		}
	}
	writeJSON(w, http.StatusOK, l)
	return nil
}

// getModel serves GET /v1/models/{id}, for the base model or an adapter
// ("ADAPTER" or "BASE:ADAPTER"); an id may hold slashes ("org/name"), so
// the route takes the rest of the path.
func (s *Server) getModel(w http.ResponseWriter, r *http.Request) error {
	id := chi.URLParam(r, "*")
	if id == "" || strings.Contains(id, "\x00") {
		return pathNotFound(r)
	}
	m, adapter, err := s.resolveModel(id)
	if err != nil {
		return err
	}
	if adapter == "" {
		writeJSON(w, http.StatusOK, modelObjectOf(m))
		return nil
	}
	in, gerr := m.Adapters.Get(adapter)
	if gerr != nil {
		return adapterError(gerr, adapterParams{name: "model"})
	}
	writeJSON(w, http.StatusOK, adapterModelOf(m, in))
	return nil
}
