package ollama

import (
	"context"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/ruvllm/ruvllm/api/jsonhttp"
	"github.com/ruvllm/ruvllm/session"
)

// API serves ollama's native routes over the served models.
type API struct {
	Models *session.Models
	// Version is what /api/version reports: the server's version.
	Version string
	// Pull downloads a model for /api/pull; nil turns the route off (403).
	Pull PullFunc
	// OnFailure, when set, is told of a handler's failure that is the
	// server's own (a 500), for the log.
	OnFailure func(r *http.Request, err error)
	// OnTokens, when set, is told the prompt tokens of a request that
	// does not generate (embeddings), for the access log and metrics.
	OnTokens func(r *http.Request, promptTokens int)
}

// PullFunc downloads the model an /api/pull names into the server's cache,
// telling progress of each step (the first, "pulling manifest", once the
// name is understood). An error before any progress is the response's
// status (a *session.Error: 400 for a name it cannot pull, ...); after, it
// ends the stream as an error line.
type PullFunc func(ctx context.Context, name string, progress func(PullProgress)) error

// PullProgress is one status line of a pull, as ollama streams them.
type PullProgress struct {
	Status    string `json:"status"`
	Digest    string `json:"digest,omitempty"`
	Total     int64  `json:"total,omitempty"`
	Completed int64  `json:"completed,omitempty"`
}

// errorBody is ollama's error: {"error": "message"}.
type errorBody struct {
	Error string `json:"error"`
}

// WriteError writes an error in ollama's shape.
func (a *API) WriteError(w http.ResponseWriter, e *session.Error) { WriteError(w, e) }

// WriteError sends e as ollama's {"error": "message"} with its status.
func WriteError(w http.ResponseWriter, e *session.Error) {
	jsonhttp.SetRetryAfter(w, e)
	jsonhttp.WriteJSON(w, e.Status, errorBody{Error: e.Message})
}

func (a *API) handler(f func(w http.ResponseWriter, r *http.Request) error) http.HandlerFunc {
	return jsonhttp.Handler(f, WriteError, a.OnFailure)
}

// Routes registers the routes that need a served model.
func (a *API) Routes(r chi.Router) {
	r.Post("/api/chat", a.handler(a.chat))
	r.Post("/api/generate", a.handler(a.generate))
	r.Post("/api/show", a.handler(a.show))
	r.Post("/api/embed", a.handler(a.embed))
	r.Post("/api/embeddings", a.handler(a.embeddings))
}

// OpenRoutes registers the routes that answer before any model is served:
// the version, the listings, and pulls.
func (a *API) OpenRoutes(r chi.Router) {
	for _, route := range []struct {
		path string
		h    func(w http.ResponseWriter, r *http.Request) error
	}{{"/api/version", a.version}, {"/api/tags", a.tags}} {
		r.Get(route.path, a.handler(route.h))
		r.Head(route.path, a.handler(route.h))
	}
	r.Get("/api/ps", a.handler(a.ps))
	r.Post("/api/pull", a.handler(a.pull))
}

// modelName is the name a listing gives a served model: its id, with
// ollama's default tag when it has none, as ollama lists "name:latest".
func modelName(id string) string {
	if strings.Contains(id, ":") {
		return id
	}
	return id + ":latest"
}

// notFound is ollama's 404 of an unknown model.
func notFound(name string) *session.Error {
	return session.NotFound("model", session.CodeModelNotFound, "model '%s' not found", name)
}

// resolve finds what an ollama model name means: a served model (or an
// adapter, "MODEL:ADAPTER") of that id, else of the id without ollama's
// default tag ":latest", else of the id with it. It returns the target and
// the name to give the session; the router's name passes as it is (the
// session routes it), with no target.
func (a *API) resolve(name string) (session.Target, string, error) {
	if name == "" {
		return session.Target{}, "", session.Invalid("model", session.CodeMissing, "model is required")
	}
	if rn := a.Models.RouterName(); rn != "" && name == rn {
		return session.Target{}, name, nil
	}
	candidates := []string{name}
	if base, ok := strings.CutSuffix(name, ":latest"); ok {
		candidates = append(candidates, base)
	} else {
		candidates = append(candidates, name+":latest")
	}
	for _, c := range candidates {
		t, err := a.Models.Resolve(c, "model")
		if err == nil {
			return t, c, nil
		}
		if e := session.AsError(err); e.Status != http.StatusNotFound {
			return session.Target{}, "", e
		}
	}
	return session.Target{}, "", notFound(name)
}

// version serves GET /api/version: the server's version.
func (a *API) version(w http.ResponseWriter, r *http.Request) error {
	jsonhttp.WriteJSON(w, http.StatusOK, map[string]string{"version": a.Version})
	return nil
}
