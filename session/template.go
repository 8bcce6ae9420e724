package session

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/ruvllm/ruvllm/models/chat"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// think is whether req thinks: its Think, or what its template kwargs say
// (enable_thinking, thinking), off for the effort "none", else the
// server's default (nil: the template's).
func (req *Request) think(serverOff bool) *bool {
	off := false
	switch {
	case req.Reasoning.Think != nil:
		return req.Reasoning.Think
	case kwargBool(req.Template.Kwargs, "enable_thinking") != nil:
		return kwargBool(req.Template.Kwargs, "enable_thinking")
	case kwargBool(req.Template.Kwargs, "thinking") != nil:
		return kwargBool(req.Template.Kwargs, "thinking")
	case req.Reasoning.Effort == "none", serverOff && req.Reasoning.Effort == "":
		return &off
	}
	return nil
}

// kwargBool is the boolean kwarg k (a bool, or JSON's true or false), nil
// when it is absent or not a boolean.
func kwargBool(kw map[string]any, k string) *bool {
	var b bool
	switch v := kw[k].(type) {
	case bool:
		b = v
	case json.RawMessage:
		if json.Unmarshal(v, &b) != nil {
			return nil
		}
	default:
		return nil
	}
	return &b
}

// kwargs are the template variables of req: the client's
// chat_template_kwargs, and the reasoning options as the variables
// thinking templates read (Qwen3's enable_thinking, DeepSeek-V3.1's
// thinking, gpt-oss's reasoning_effort), where the kwargs leave them out;
// serverOff turns thinking off unless the request turns it on.
func (req *Request) kwargs(serverOff bool) map[string]any {
	kw := maps.Clone(req.Template.Kwargs)
	set := func(k string, v any) {
		if kw == nil {
			kw = map[string]any{}
		}
		if _, ok := kw[k]; !ok {
			kw[k] = v
		}
	}
	if e := req.Reasoning.Effort; e != "" && e != "none" {
		set("reasoning_effort", e)
	}
	if think := req.think(serverOff); think != nil {
		set("enable_thinking", *think)
		set("thinking", *think)
	}
	return kw
}

// renderChat renders req's messages with m's template. A template that
// raises for a system message gets it folded into the first user turn, as
// llama.cpp does; a template that knows no tools, and has no system role,
// gets the tools described in the first user turn. With thinking off
// (serverOff, unless the request turns it on), a think block the template
// opens anyway is closed, as llama-server does.
func renderChat(m *Model, req *Request, tu *toolUse, serverOff bool) (string, error) {
	kw := clockKwargs(req.kwargs(serverOff), m.templateSource(), time.Now())
	agp := !req.Template.NoGenerationPrompt && !req.Template.ContinueFinal
	render := func(messages []Message) (string, error) {
		return m.Chat.RenderChat(chat.Input{Messages: messages, Tools: tu.templateTools(), AddGenerationPrompt: agp, Extra: kw})
	}
	text, err := render(tu.prepareMessages(req.Messages, false))
	if err != nil && tu.active() && !tu.style.knows {
		if t, e := render(tu.prepareMessages(req.Messages, true)); e == nil {
			text, err = t, nil
		}
	}
	if err != nil && errors.Is(err, chat.ErrTemplate) {
		if folded, ok := foldSystem(req.Messages); ok {
			if t, e := render(tu.prepareMessages(folded, false)); e == nil {
				text, err = t, nil
			} else if tu.active() && !tu.style.knows {
				// No system role at all: the tools go into the first user
				// turn too.
				if t, e := render(tu.prepareMessages(folded, true)); e == nil {
					text, err = t, nil
				}
			}
		}
	}
	if err != nil {
		if errors.Is(err, chat.ErrTemplate) {
			return "", Invalid(req.names().Messages, CodeTemplate, "the chat template refused the messages: %v", err)
		}
		return "", Internal("rendering the chat template: %v", err)
	}
	if req.Template.ContinueFinal {
		return continueFinal(text, req.Messages, req.names().Messages)
	}
	if think := req.think(serverOff); think != nil && !*think {
		text += m.thinking.format.ThinkingOff(text)
	}
	return text, nil
}

// clockVariables are the variables through which templates print the
// time, with the layout llama-server gives them: Llama 3.x's date_string
// (without it they print a date of 2024) and firefunction-v2's datetime.
var clockVariables = []struct{ name, layout string }{
	{"date_string", "02 Jan 2006"},
	{"datetime", "Jan 02 2006 15:04:05 GMT"},
}

// clockKwargs adds to kw the clock variables a template reads and the
// request does not give, at now (local time, as llama-server prints it).
func clockKwargs(kw map[string]any, src string, now time.Time) map[string]any {
	for _, v := range clockVariables {
		if _, given := kw[v.name]; given || !strings.Contains(src, v.name) {
			continue
		}
		if kw == nil {
			kw = map[string]any{}
		}
		kw[v.name] = now.Format(v.layout)
	}
	return kw
}

// foldSystem moves the system messages' contents into the first user
// message (or a user message of their own when there is none), for
// templates that refuse the system role.
func foldSystem(messages []Message) ([]Message, bool) {
	var system []string
	var rest []Message
	for _, m := range messages {
		if m["role"] == "system" {
			system = append(system, fmt.Sprint(m["content"]))
			continue
		}
		rest = append(rest, m)
	}
	if len(system) == 0 {
		return nil, false
	}
	prefix := strings.Join(system, "\n\n")
	i := slices.IndexFunc(rest, func(m Message) bool { return m["role"] == "user" })
	if i < 0 {
		return append([]Message{{"role": "user", "content": prefix}}, rest...), true
	}
	first := maps.Clone(rest[i])
	first["content"] = prefix + "\n\n" + fmt.Sprint(first["content"])
	rest[i] = first
	return rest, true
}

// continueFinal cuts the render right after the last message's content, so
// that the model continues that message rather than starting a new turn
// (as transformers' continue_final_message does).
func continueFinal(text string, messages []Message, param string) (string, error) {
	last := messages[len(messages)-1]
	content, _ := last["content"].(string)
	if last["role"] != "assistant" {
		return "", Invalid(param, CodeInvalidValue, "continue_final_message needs an assistant message last")
	}
	content = strings.TrimSpace(content)
	if content == "" {
		return text, nil
	}
	i := strings.LastIndex(text, content)
	if i < 0 {
		return "", Invalid(param, CodeTemplate, "continue_final_message: the chat template does not write the final message's content as it is")
	}
	return text[:i+len(content)], nil
}

// Rendered is a request's prompt as a generation would see it.
type Rendered struct {
	Model *Model
	// Text is the rendered chat (or the prompt's text); Tokens its
	// tokens, as the engine would get them.
	Text   string
	Tokens []tokenizer.ID
}

// Render resolves req's model and renders its chat as Start would,
// without running anything: what /tokenize, /apply-template and counting
// a request's tokens answer.
func (ms *Models) Render(req *Request) (Rendered, error) {
	n := req.names()
	if req.Messages == nil {
		return Rendered{}, Internal("session: Render needs messages")
	}
	if err := checkTools(req); err != nil {
		return Rendered{}, err
	}
	t, err := ms.Resolve(req.Model, n.Model)
	if err != nil {
		return Rendered{}, err
	}
	m := t.Model
	if m.Chat == nil {
		return Rendered{}, Unsupported(n.Messages, "the model %s has no chat template", Quote(m.ID))
	}
	tu := &toolUse{tools: req.Tools, style: m.tools, choice: req.ToolChoice}
	text, err := renderChat(m, req, tu, ms.opt.NoThinking)
	if err != nil {
		return Rendered{}, err
	}
	return Rendered{Model: m, Text: text, Tokens: EncodePrompt(m.Tokenizer, text)}, nil
}
