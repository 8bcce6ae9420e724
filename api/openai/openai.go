package openai

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/ruvllm/ruvllm/api/jsonhttp"
	"github.com/ruvllm/ruvllm/session"
)

// API serves OpenAI's routes over the served models.
type API struct {
	Models *session.Models
	// Version is reported as system_fingerprint.
	Version string
	// OnFailure, when set, is told of a handler's failure that is the
	// server's own (a 500), for the log.
	OnFailure func(r *http.Request, err error)
	// OnTokens, when set, is told the prompt tokens of a request that
	// does not generate (embeddings), for the access log and metrics.
	OnTokens func(r *http.Request, promptTokens int)
	// Verbose adds llama-server's "__verbose" object (under its --verbose)
	// to whole chat and text completions: the prompt as the model read it,
	// which is how its users check what a template made of their messages.
	Verbose bool
}

// WriteError writes an error in OpenAI's shape.
func (a *API) WriteError(w http.ResponseWriter, e *session.Error) { WriteError(w, e) }

// Routes registers the routes, chat completions and embeddings also
// without /v1 as llama-server serves them; /completions without /v1 is
// llama-server's native completion (api/llamacpp), not OpenAI's.
func (a *API) Routes(r chi.Router) {
	h := func(f func(w http.ResponseWriter, r *http.Request) error) http.HandlerFunc {
		return jsonhttp.Handler(f, WriteError, a.OnFailure)
	}
	for _, prefix := range []string{"/v1", ""} {
		r.Post(prefix+"/chat/completions", h(a.chatCompletions))
		r.Post(prefix+"/embeddings", h(a.embeddings))
	}
	r.Post("/v1/completions", h(a.completions))
}
