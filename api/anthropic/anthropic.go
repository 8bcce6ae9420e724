package anthropic

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/ruvllm/ruvllm/api/jsonhttp"
	"github.com/ruvllm/ruvllm/session"
)

// API serves Anthropic's routes over the served models.
type API struct {
	Models *session.Models
	// OnFailure, when set, is told of a handler's failure that is the
	// server's own (a 500), for the log.
	OnFailure func(r *http.Request, err error)
	// OnTokens, when set, is told the prompt tokens of a request that
	// generates nothing (count_tokens, max_tokens 0), for the access log.
	OnTokens func(r *http.Request, promptTokens int)
}

// WriteError writes an error in Anthropic's shape.
func (a *API) WriteError(w http.ResponseWriter, e *session.Error) { WriteError(w, e) }

// Routes registers the Messages API. Other paths under /v1/messages (the
// Message Batches API) answer 404 in Anthropic's shape.
func (a *API) Routes(r chi.Router) {
	r.Post("/v1/messages", a.handler(a.messages))
	r.Post("/v1/messages/count_tokens", a.handler(a.countTokens))
	r.HandleFunc("/v1/messages/*", a.handler(a.unknownRoute))
}

// handler adapts a handler to net/http: its error is written in
// Anthropic's shape, and every response carries the request's id as
// Anthropic's request-id header, which the SDKs report.
func (a *API) handler(h func(w http.ResponseWriter, r *http.Request) error) http.HandlerFunc {
	inner := jsonhttp.Handler(h, WriteError, a.OnFailure)
	return func(w http.ResponseWriter, r *http.Request) {
		setRequestID(w)
		inner(w, r)
	}
}

// unknownRoute answers the paths under /v1/messages this server does not
// serve.
func (a *API) unknownRoute(w http.ResponseWriter, r *http.Request) error {
	if r.URL.Path == "/v1/messages/count_tokens" {
		w.Header().Set("Allow", http.MethodPost)
		return &session.Error{Status: http.StatusMethodNotAllowed, Type: session.TypeInvalidRequest,
			Message: "method " + r.Method + " is not allowed for " + r.URL.Path}
	}
	return session.NotFound("", "not_found", "%s %s is not served: this server implements POST /v1/messages and POST /v1/messages/count_tokens of Anthropic's API (the Message Batches API is not supported)", r.Method, r.URL.Path)
}
