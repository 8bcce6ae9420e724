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
	// NPromptTokens and NCtx are llama-server's members of a prompt that
	// does not fit the context.
	NPromptTokens int `json:"n_prompt_tokens,omitempty"`
	NCtx          int `json:"n_ctx,omitempty"`
}

// TypeExceedContext is the type of the error of a prompt (and the tokens
// asked for) that does not fit the context, as llama-server names it;
// the code stays OpenAI's context_length_exceeded, which clients test.
// The SDKs tell errors apart by their status, not their type.
const TypeExceedContext = "exceed_context_size_error"

// ErrorBody is e in OpenAI's shape, for a stream that reports it as an
// event.
func ErrorBody(e *session.Error) any {
	b := errorBody{Error: errorObject{Message: e.Message, Type: e.Type}}
	if e.Code == session.CodeContextLength {
		b.Error.Type = TypeExceedContext
		if c := e.Context; c != nil {
			b.Error.NPromptTokens, b.Error.NCtx = c.Prompt, c.Context
		}
	}
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
