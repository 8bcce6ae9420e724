package api

import (
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
)

type modelObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

type modelList struct {
	Object string        `json:"object"`
	Data   []modelObject `json:"data"`
}

func modelObjectOf(m *Model) modelObject {
	return modelObject{ID: m.ID, Object: "model", Created: m.Created.Unix(), OwnedBy: "ruvllm"}
}

// listModels serves GET /v1/models.
func (s *Server) listModels(w http.ResponseWriter, r *http.Request) {
	m := s.model.Load()
	writeJSON(w, http.StatusOK, modelList{Object: "list", Data: []modelObject{modelObjectOf(m)}})
}

// getModel serves GET /v1/models/{id}; an id may hold slashes
// ("org/name"), so the route takes the rest of the path.
func (s *Server) getModel(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "*")
	if id == "" || strings.Contains(id, "\x00") {
		s.notFound(w, r)
		return
	}
	m, err := s.lookupModel(id)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, modelObjectOf(m))
}
