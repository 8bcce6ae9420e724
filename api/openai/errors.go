package openai

import (
	"net/http"

	"github.com/ruvllm/ruvllm/api/jsonhttp"
	"github.com/ruvllm/ruvllm/session"
)

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

// ErrorBody is e in OpenAI's shape, for a stream that reports it as an
// event.
func ErrorBody(e *session.Error) any {
	b := errorBody{Error: errorObject{Message: e.Message, Type: e.Type}}
	if e.Param != "" {
		b.Error.Param = &e.Param
	}
	if e.Code != "" {
		b.Error.Code = &e.Code
	}
	return b
}

// WriteError sends e as OpenAI's error object with its status.
func WriteError(w http.ResponseWriter, e *session.Error) {
	jsonhttp.SetRetryAfter(w, e)
	jsonhttp.WriteJSON(w, e.Status, ErrorBody(e))
}
