package llamacpp

import (
	"net/http"

	"github.com/ruvllm/ruvllm/api/jsonhttp"
	"github.com/ruvllm/ruvllm/api/openai"
	"github.com/ruvllm/ruvllm/session"
)

// applyTemplate serves POST /apply-template: {"messages", "tools",
// "add_generation_prompt" (true), "chat_template_kwargs", "model"} →
// {"prompt"}, the chat as the model's template renders it for a chat
// completion (with its tools, and tool_choice auto).
func (a *API) applyTemplate(w http.ResponseWriter, r *http.Request) error {
	f, err := jsonhttp.Read(r)
	if err != nil {
		return err
	}
	req := &session.Request{}
	if req.Model, _, err = f.Str("model"); err != nil {
		return err
	}
	if req.Messages, err = openai.ParseMessages(f, "messages"); err != nil {
		return err
	}
	if req.Tools, err = openai.ParseTools(f); err != nil {
		return err
	}
	if tc, ok, err := f.Str("tool_choice"); err != nil {
		return err
	} else if ok {
		switch tc {
		case session.ToolAuto, session.ToolNone, session.ToolRequired:
			req.ToolChoice.Mode = tc
		default:
			return session.Invalid("tool_choice", session.CodeInvalidValue, "tool_choice %s is not one of auto, none, required", session.Quote(tc))
		}
	}
	if agp, ok, err := f.Bool("add_generation_prompt"); err != nil {
		return err
	} else if ok {
		req.Template.NoGenerationPrompt = !agp
	}
	if kw, ok, err := f.Object("chat_template_kwargs"); err != nil {
		return err
	} else if ok {
		req.Template.Kwargs = map[string]any{}
		for _, k := range kw.Names() {
			v, _ := kw.Raw(k)
			req.Template.Kwargs[k] = v
		}
	}
	// Fields of a chat completion that do not change the prompt.
	f.Ignore("stream", "max_tokens", "n_predict", "temperature", "parallel_tool_calls", "reasoning_format", "response_format")
	if err := f.Unknown(); err != nil {
		return err
	}
	rendered, err := a.Models.Render(req)
	if err != nil {
		return err
	}
	jsonhttp.WriteJSON(w, http.StatusOK, map[string]string{"prompt": rendered.Text})
	return nil
}
