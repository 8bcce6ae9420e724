package anthropic

import (
	"fmt"
	"net/http"

	"github.com/ruvllm/ruvllm/api/jsonhttp"
	"github.com/ruvllm/ruvllm/session"
)

// Anthropic's error types.
const (
	errInvalidRequest = "invalid_request_error"
	errAuthentication = "authentication_error"
	errPermission     = "permission_error"
	errNotFound       = "not_found_error"
	errTooLarge       = "request_too_large"
	errRateLimit      = "rate_limit_error"
	errAPI            = "api_error"
	errTimeout        = "timeout_error"
	errOverloaded     = "overloaded_error"
)

// statusOverloaded is Anthropic's status of an API that cannot take the
// request now, which the SDKs retry.
const statusOverloaded = 529

// errorBody is Anthropic's error: {"type":"error","error":{"type",
// "message"},"request_id"}.
type errorBody struct {
	Type      string      `json:"type"`
	Error     errorObject `json:"error"`
	RequestID string      `json:"request_id,omitempty"`
}

type errorObject struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// errorStatus maps a session error's status to Anthropic's status and
// error type: 4xx keep their status (as invalid_request_error unless
// Anthropic names it), a server that is loading, busy loading a model or
// shutting down (503) is overloaded (529), other 5xx are api_error.
func errorStatus(status int) (int, string) {
	switch status {
	case http.StatusUnauthorized:
		return status, errAuthentication
	case http.StatusForbidden:
		return status, errPermission
	case http.StatusNotFound:
		return status, errNotFound
	case http.StatusRequestEntityTooLarge:
		return status, errTooLarge
	case http.StatusTooManyRequests:
		return status, errRateLimit
	case http.StatusServiceUnavailable, statusOverloaded:
		return statusOverloaded, errOverloaded
	case http.StatusGatewayTimeout:
		return status, errTimeout
	}
	if status >= 400 && status < 500 {
		return status, errInvalidRequest
	}
	return status, errAPI
}

// errorMessage words e as Anthropic does where clients read the words:
// an unknown field is "FIELD: Extra inputs are not permitted", and a
// prompt that does not fit is "prompt is too long: N tokens > M maximum"
// (Claude Code compacts the conversation when it reads that).
func errorMessage(e *session.Error) string {
	switch {
	case e.Code == session.CodeUnknownParam && e.Param != "":
		return e.Param + ": Extra inputs are not permitted"
	case e.Code == session.CodeContextLength && e.Context != nil:
		c := e.Context
		if c.MaxTokens > 0 && c.Prompt < c.Context {
			return fmt.Sprintf("input length and `max_tokens` exceed context limit: %d + %d > %d, decrease input length or `max_tokens` and try again",
				c.Prompt, c.MaxTokens, c.Context)
		}
		// The prompt must leave room for one generated token.
		return fmt.Sprintf("prompt is too long: %d tokens > %d maximum", c.Prompt, c.Context-1)
	}
	return e.Message
}

// ErrorBody is e in Anthropic's shape, with the request's id (from the
// response's X-Request-Id header) when there is one.
func errorBodyOf(w http.ResponseWriter, e *session.Error) (int, errorBody) {
	status, typ := errorStatus(e.Status)
	return status, errorBody{Type: "error", Error: errorObject{Type: typ, Message: errorMessage(e)}, RequestID: w.Header().Get("X-Request-Id")}
}

// WriteError sends e as Anthropic's error object with Anthropic's status.
func WriteError(w http.ResponseWriter, e *session.Error) {
	jsonhttp.SetRetryAfter(w, e)
	setRequestID(w)
	status, body := errorBodyOf(w, e)
	jsonhttp.WriteJSON(w, status, body)
}

// setRequestID gives the response Anthropic's request-id header, which the
// SDKs report: the request's id, which the server's middleware has put in
// X-Request-Id.
func setRequestID(w http.ResponseWriter) {
	if id := w.Header().Get("X-Request-Id"); id != "" {
		w.Header().Set("Request-Id", id)
	}
}
