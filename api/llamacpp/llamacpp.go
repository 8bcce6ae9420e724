package llamacpp

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/ruvllm/ruvllm/api/jsonhttp"
	"github.com/ruvllm/ruvllm/session"
)

// API serves llama-server's own routes over the served models.
type API struct {
	Models *session.Models
	// Version is reported as build_info ("b" and the version, as
	// llama-server's build numbers read).
	Version string
	// Slots turns on GET /slots (llama-server's --slots); without it the
	// route answers 501, as llama-server's --no-slots.
	Slots bool
	// SlotSavePath is the directory the slot actions save to and restore
	// from (llama-server's --slot-save-path); "" turns the actions off
	// (501).
	SlotSavePath string
	// WebUI says the server serves its chat page at /, which /props
	// reports as llama-server does.
	WebUI bool
	// OnFailure, when set, is told of a handler's failure that is the
	// server's own (a 500), for the log.
	OnFailure func(r *http.Request, err error)
}

// Routes registers llama-server's routes that are its own, not
// OpenAI's: the native completion (/completion, and /completions as
// llama-server serves it), /props, /slots and /apply-template.
func (a *API) Routes(r chi.Router) {
	h := func(f func(w http.ResponseWriter, r *http.Request) error) http.HandlerFunc {
		return jsonhttp.Handler(f, WriteError, a.OnFailure)
	}
	r.Post("/completion", h(a.completion))
	r.Post("/completions", h(a.completion))
	r.Get("/props", h(a.props))
	r.Post("/props", h(a.setProps))
	r.Get("/slots", h(a.slots))
	r.Post("/slots/{id}", h(a.slotAction))
	r.Post("/apply-template", h(a.applyTemplate))
}

// Paths are the paths of the routes Routes registers, for middleware that
// answers them in llama-server's ways (CORS preflights).
var Paths = []string{"/completion", "/completions", "/props", "/slots", "/apply-template"}

// WriteError writes an error in llama-server's shape.
func (a *API) WriteError(w http.ResponseWriter, e *session.Error) { WriteError(w, e) }

// Error types llama-server sends beyond OpenAI's.
const (
	typeAuthentication  = "authentication_error"
	typeNotFound        = "not_found_error"
	typePermission      = "permission_error"
	typeNotSupported    = "not_supported_error"
	typeExceedContext   = "exceed_context_size_error"
	codeInvalidAPIKey   = "invalid_api_key"
	exceedContextSuffix = "the request exceeds the available context size, try increasing it"
)

// errorObject is llama-server's error: {"code": status, "message", "type"},
// and for a prompt that does not fit, the prompt's tokens and the
// context.
type errorObject struct {
	Code          int    `json:"code"`
	Message       string `json:"message"`
	Type          string `json:"type"`
	NPromptTokens int    `json:"n_prompt_tokens,omitempty"`
	NCtx          int    `json:"n_ctx,omitempty"`
}

// ErrorBody is e in llama-server's shape, {"error": {...}}: the status as
// "code" and llama-server's type for it.
func ErrorBody(e *session.Error) any {
	o := errorObject{Code: e.Status, Message: e.Message, Type: e.Type}
	switch {
	case e.Code == session.CodeContextLength:
		o.Type = typeExceedContext
		o.Message = exceedContextSuffix + ": " + e.Message
		if c := e.Context; c != nil {
			o.NPromptTokens, o.NCtx = c.Prompt, c.Context
		}
	case e.Status == http.StatusUnauthorized:
		o.Type = typeAuthentication
	case e.Status == http.StatusForbidden:
		o.Type = typePermission
	case e.Status == http.StatusNotFound:
		o.Type = typeNotFound
	case e.Status == http.StatusNotImplemented:
		o.Type = typeNotSupported
	}
	return map[string]errorObject{"error": o}
}

// WriteError sends e in llama-server's shape with its status.
func WriteError(w http.ResponseWriter, e *session.Error) {
	jsonhttp.SetRetryAfter(w, e)
	jsonhttp.WriteJSON(w, e.Status, ErrorBody(e))
}

// notSupported is llama-server's 501 of a route turned off.
func notSupported(format string, a ...any) *session.Error {
	e := session.Unsupported("", format, a...)
	e.Status = http.StatusNotImplemented
	return e
}
