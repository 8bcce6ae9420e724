package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
)

// Error types and codes as OpenAI spells them, so that SDKs map them to
// their exception classes.
const (
	typeInvalidRequest = "invalid_request_error"
	typeRateLimit      = "rate_limit_error"
	typeServer         = "server_error"
	typeUnavailable    = "unavailable_error"

	codeContextLength  = "context_length_exceeded"
	codeModelNotFound  = "model_not_found"
	codeInvalidAPIKey  = "invalid_api_key"
	codeUnsupported    = "unsupported_parameter"
	codeInvalidValue   = "invalid_value"
	codeInvalidType    = "invalid_type"
	codeMissing        = "missing_required_parameter"
	codeUnknownParam   = "unknown_parameter"
	codeInvalidJSON    = "invalid_json"
	codeTooLarge       = "request_too_large"
	codeMediaType      = "unsupported_media_type"
	codeNotFound       = "not_found"
	codeMethod         = "method_not_allowed"
	codeQueueFull      = "rate_limit_exceeded"
	codeLoading        = "model_loading"
	codeInternal       = "internal_error"
	codeTemplate       = "chat_template_error"
	codeGenerationFail = "generation_failed"
	codeModelLoad      = "model_load_failed"
)

// apiError is an error that reaches the client as OpenAI's error object
// with an HTTP status.
type apiError struct {
	Status  int
	Message string
	Type    string
	Param   string // the request field at fault, "" for none
	Code    string // "" for none
	// RetryAfter, in seconds, is sent as the Retry-After header when > 0.
	RetryAfter int
}

func (e *apiError) Error() string { return e.Message }

// errorBody is the JSON shape of an error: {"error":{...}}; param and code
// are null when empty, as OpenAI sends them.
type errorBody struct {
	Error errorObject `json:"error"`
}

type errorObject struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func (e *apiError) body() errorBody {
	b := errorBody{Error: errorObject{Message: e.Message, Type: e.Type}}
	if e.Param != "" {
		b.Error.Param = &e.Param
	}
	if e.Code != "" {
		b.Error.Code = &e.Code
	}
	return b
}

// invalid is a 400 about the request field param.
func invalid(param, code, format string, a ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Type: typeInvalidRequest, Param: param, Code: code, Message: fmt.Sprintf(format, a...)}
}

// unsupported is a 400 for a parameter this server recognises but does not
// implement: answering as if it were absent would change the result.
func unsupported(param, format string, a ...any) *apiError {
	return invalid(param, codeUnsupported, format, a...)
}

func internalError(format string, a ...any) *apiError {
	return &apiError{Status: http.StatusInternalServerError, Type: typeServer, Code: codeInternal, Message: fmt.Sprintf(format, a...)}
}

// handlerFunc is an API handler that returns its refusal instead of
// writing it, so that every error leaves the server one way (handle).
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// handle adapts h to net/http: the error h returns, if any, becomes the
// response. An *apiError is sent as it is; any other error is a failure of
// the server, logged and sent as a 500. A handler returns nil once it has
// begun its response (a stream reports its errors as events).
func (s *Server) handle(h handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		err := h(w, r)
		var e *apiError
		switch {
		case err == nil:
			return
		case errors.As(err, &e):
			if e == nil {
				return // a helper's nil *apiError, returned as an error
			}
		default:
			s.opt.Logger.Error().Str("request_id", info(r.Context()).id).Err(err).Msg("request failed")
			e = internalError("%v", err)
		}
		writeError(w, e)
	}
}

// writeError sends e as the response.
func writeError(w http.ResponseWriter, e *apiError) {
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	writeJSON(w, e.Status, e.body())
}

// writeJSON sends v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = marshal(internalError("encoding the response: %v", err).body())
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
}

// marshal is json.Marshal without the escaping of <, > and &, which only
// matters inside HTML and would mangle special tokens such as <|im_end|>;
// the result ends with a newline.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
