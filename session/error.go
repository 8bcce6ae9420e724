package session

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/ruvllm/ruvllm/backends"
)

// Error types, as OpenAI spells them; each protocol maps them (with the
// status) onto its own.
const (
	TypeInvalidRequest = "invalid_request_error"
	TypeRateLimit      = "rate_limit_error"
	TypeServer         = "server_error"
	TypeUnavailable    = "unavailable_error"
)

// Error codes. Protocols that carry a code (OpenAI's) send them as they are.
const (
	CodeContextLength     = "context_length_exceeded"
	CodeModelNotFound     = "model_not_found"
	CodeAmbiguousModel    = "ambiguous_model"
	CodeUnsupported       = "unsupported_parameter"
	CodeInvalidValue      = "invalid_value"
	CodeInvalidType       = "invalid_type"
	CodeMissing           = "missing_required_parameter"
	CodeUnknownParam      = "unknown_parameter"
	CodeInvalidJSON       = "invalid_json"
	CodeQueueFull         = "rate_limit_exceeded"
	CodeLoading           = "model_loading"
	CodeInternal          = "internal_error"
	CodeTemplate          = "chat_template_error"
	CodeGenerationFail    = "generation_failed"
	CodeModelLoad         = "model_load_failed"
	CodeShuttingDown      = "shutting_down"
	CodeAdapterLoad       = "adapter_load_failed"
	CodeCompletionMissing = "completion_not_found"
)

// Error is a refusal or failure that reaches the client, in whatever shape
// its protocol gives errors, with an HTTP status.
type Error struct {
	Status  int
	Message string
	Type    string
	Param   string // the request field at fault, "" for none
	Code    string // "" for none
	// RetryAfter, in seconds, is sent as the Retry-After header when > 0.
	RetryAfter int
	// PromptTokens and ContextLength are set on an error of code
	// CodeContextLength: the prompt's tokens and the context it had to
	// fit in (llama-server reports them as n_prompt_tokens and n_ctx).
	PromptTokens, ContextLength int
}

func (e *Error) Error() string { return e.Message }

// AsError finds the *Error in err's chain; any other non-nil error is the
// server's own failure, a 500. A nil err is nil.
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) && e != nil {
		return e
	}
	return Internal("%v", err)
}

// Invalid is a 400 about the request field param.
func Invalid(param, code, format string, a ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Type: TypeInvalidRequest, Param: param, Code: code, Message: fmt.Sprintf(format, a...)}
}

// Unsupported is a 400 for a parameter this server recognises but does not
// implement: answering as if it were absent would change the result.
func Unsupported(param, format string, a ...any) *Error {
	return Invalid(param, CodeUnsupported, format, a...)
}

// Internal is a 500: the server failed.
func Internal(format string, a ...any) *Error {
	return &Error{Status: http.StatusInternalServerError, Type: TypeServer, Code: CodeInternal, Message: fmt.Sprintf(format, a...)}
}

// NotFound is a 404 about param.
func NotFound(param, code, format string, a ...any) *Error {
	return &Error{Status: http.StatusNotFound, Type: TypeInvalidRequest, Param: param, Code: code, Message: fmt.Sprintf(format, a...)}
}

// Loading is the 503 of a server whose models are not loaded yet.
func Loading() *Error {
	return &Error{Status: http.StatusServiceUnavailable, Type: TypeUnavailable, Code: CodeLoading, Message: "the model is loading", RetryAfter: 1}
}

// ShuttingDown is the 503 of a server that is closing.
func ShuttingDown() *Error {
	return &Error{Status: http.StatusServiceUnavailable, Type: TypeUnavailable, Code: CodeShuttingDown, RetryAfter: 1,
		Message: "the server is shutting down"}
}

// QueueFull is the 429 of an engine whose slots and queue are taken.
func QueueFull() *Error {
	return &Error{Status: http.StatusTooManyRequests, Type: TypeRateLimit, Code: CodeQueueFull, RetryAfter: 1,
		Message: "the server is busy: every slot is taken and the queue is full; retry shortly"}
}

// ErrClientGone ends a generation whose client has disconnected; there is
// no one to tell.
var ErrClientGone = &Error{Status: 499, Type: TypeInvalidRequest, Message: "client closed the request"}

// engineError maps a Submit or Embed failure to its Error; param is the
// field that holds the input.
func engineError(err error, param string) *Error {
	switch {
	case errors.Is(err, backends.ErrQueueFull):
		return QueueFull()
	case errors.Is(err, backends.ErrContextLength):
		return Invalid(param, CodeContextLength, "%v", err)
	case errors.Is(err, backends.ErrInvalidRequest):
		var pe *backends.ParamError
		if errors.As(err, &pe) {
			return Invalid(pe.Param, CodeInvalidValue, "%v", pe)
		}
		return Invalid(param, CodeInvalidValue, "%v", err)
	case errors.Is(err, backends.ErrClosed):
		return ShuttingDown()
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return ErrClientGone
	}
	return &Error{Status: http.StatusInternalServerError, Type: TypeServer, Code: CodeGenerationFail, Message: err.Error()}
}
