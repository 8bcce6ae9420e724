package responses

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/ruvllm/ruvllm/api/jsonhttp"
	"github.com/ruvllm/ruvllm/session"
)

// Item types.
const (
	typeMessage            = "message"
	typeReasoning          = "reasoning"
	typeFunctionCall       = "function_call"
	typeFunctionCallOutput = "function_call_output"
)

// roles are the message roles an input item may have, with what the
// template sees: the developer role is the system role of older models.
var roles = map[string]string{"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}

// conversation turns items into the chat a template renders: user, system
// and tool turns one message each, and each assistant turn from the run of
// reasoning, message and function_call items that make it (the reasoning
// as its reasoning_content, the calls as its tool_calls), as a model's
// output lists them.
type conversation struct {
	msgs []session.Message
	// turn is the assistant turn still taking items, nil when the last
	// message is not one.
	turn *turn
}

type turn struct {
	msg       session.Message
	reasoning []string
	text      []string
	hasText   bool // an empty message item is text too
	calls     []any
}

// assistant returns the assistant turn an item of the kind joins: the
// open one, unless what it already holds must come before (reasoning and
// text start a new turn after text or calls), else a new one.
func (c *conversation) assistant(reasoning, text bool) *turn {
	t := c.turn
	if t == nil || ((reasoning || text) && (t.hasText || len(t.calls) > 0)) {
		t = &turn{msg: session.Message{"role": "assistant", "content": ""}}
		c.msgs = append(c.msgs, t.msg)
		c.turn = t
	}
	return t
}

// update writes the turn's parts into its message. A turn that only calls
// tools has the content "", not null: templates such as Qwen3's call
// string methods on it.
func (t *turn) update() {
	t.msg["content"] = strings.Join(t.text, "\n")
	if len(t.reasoning) > 0 {
		t.msg["reasoning_content"] = strings.Join(t.reasoning, "\n")
	}
	if len(t.calls) > 0 {
		t.msg["tool_calls"] = t.calls
	}
}

// other appends a message that is no assistant turn.
func (c *conversation) other(m session.Message) {
	c.turn = nil
	c.msgs = append(c.msgs, m)
}

// itemType is an item's type: its "type", or "message" for a message
// written without one ({"role", "content"}).
func itemType(f *jsonhttp.Fields, p string) (string, error) {
	typ, ok, err := f.Str("type")
	if err != nil {
		return "", err
	}
	if !ok {
		if f.Has("role") {
			return typeMessage, nil
		}
		return "", session.Invalid(p+".type", session.CodeMissing, "%s.type is required", p)
	}
	return typ, nil
}

// add reads one input item (the field p) into the conversation.
func (c *conversation) add(raw json.RawMessage, p string) error {
	f, err := jsonhttp.ObjectOf(raw, p)
	if err != nil {
		return err
	}
	typ, err := itemType(f, p)
	if err != nil {
		return err
	}
	// Every item a response outputs may come back as input, with its id
	// and status.
	f.Ignore("id", "status")
	switch typ {
	case typeMessage:
		err = c.message(f, p)
	case typeReasoning:
		err = c.reasoning(f, p)
	case typeFunctionCall:
		err = c.functionCall(f, p)
	case typeFunctionCallOutput:
		err = c.functionCallOutput(f, p)
	default:
		return session.Unsupported(p+".type", "input items of type %s are not supported; message, reasoning, function_call and function_call_output are",
			session.Quote(typ))
	}
	if err != nil {
		return err
	}
	return f.Unknown()
}

func (c *conversation) message(f *jsonhttp.Fields, p string) error {
	role, ok, err := f.Str("role")
	if err != nil {
		return err
	}
	if !ok {
		return session.Invalid(p+".role", session.CodeMissing, "%s.role is required", p)
	}
	tmplRole, known := roles[role]
	if !known {
		return session.Invalid(p+".role", session.CodeInvalidValue, "%s.role %s is not one of user, system, developer, assistant", p, session.Quote(role))
	}
	text, err := contentText(f, "content", role == "assistant")
	if err != nil {
		return err
	}
	// phase marks an assistant message as commentary or the final answer;
	// the template has no place for it.
	f.Ignore("phase")
	if tmplRole != "assistant" {
		c.other(session.Message{"role": tmplRole, "content": text})
		return nil
	}
	t := c.assistant(false, true)
	t.text = append(t.text, text)
	t.hasText = true
	t.update()
	return nil
}

func (c *conversation) reasoning(f *jsonhttp.Fields, p string) error {
	texts, err := reasoningTexts(f, "content", "reasoning_text", "text")
	if err != nil {
		return err
	}
	summary, err := reasoningTexts(f, "summary", "summary_text")
	if err != nil {
		return err
	}
	if len(texts) == 0 {
		texts = summary
	}
	// Another server's encrypted reasoning is of no use here.
	if _, _, err := f.Str("encrypted_content"); err != nil {
		return err
	}
	if len(texts) == 0 {
		return nil
	}
	t := c.assistant(true, false)
	t.reasoning = append(t.reasoning, strings.Join(texts, "\n"))
	t.update()
	return nil
}

// reasoningTexts reads a reasoning item's content or summary: a list of
// parts of the given types.
func reasoningTexts(f *jsonhttp.Fields, name string, types ...string) ([]string, error) {
	parts, ok, err := f.Array(name)
	if err != nil || !ok {
		return nil, err
	}
	var out []string
	for i, part := range parts {
		pp := f.Param(name) + "[" + strconv.Itoa(i) + "]"
		pf, err := jsonhttp.ObjectOf(part, pp)
		if err != nil {
			return nil, err
		}
		typ, _, err := pf.Str("type")
		if err != nil {
			return nil, err
		}
		known := false
		for _, t := range types {
			known = known || typ == t
		}
		if !known {
			return nil, session.Invalid(pp+".type", session.CodeInvalidValue, "%s.type %s is not one of %s", pp, session.Quote(typ), strings.Join(types, ", "))
		}
		text, ok, err := pf.Str("text")
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, session.Invalid(pp+".text", session.CodeMissing, "%s.text is required", pp)
		}
		if err := pf.Unknown(); err != nil {
			return nil, err
		}
		out = append(out, text)
	}
	return out, nil
}

// required reads a string member that must be there.
func required(f *jsonhttp.Fields, name string) (string, error) {
	s, ok, err := f.Str(name)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", session.Invalid(f.Param(name), session.CodeMissing, "%s is required", f.Param(name))
	}
	return s, nil
}

func (c *conversation) functionCall(f *jsonhttp.Fields, p string) error {
	callID, err := required(f, "call_id")
	if err != nil {
		return err
	}
	name, err := required(f, "name")
	if err != nil {
		return err
	}
	args, err := required(f, "arguments")
	if err != nil {
		return err
	}
	// namespace groups tools of a namespace tool, which is refused.
	f.Ignore("namespace")
	call := map[string]any{"id": callID, "type": "function", "function": map[string]any{"name": name, "arguments": args}}
	session.ArgumentObjects([]any{call})
	t := c.assistant(false, false)
	t.calls = append(t.calls, call)
	t.update()
	return nil
}

func (c *conversation) functionCallOutput(f *jsonhttp.Fields, p string) error {
	callID, err := required(f, "call_id")
	if err != nil {
		return err
	}
	if !f.Has("output") {
		return session.Invalid(p+".output", session.CodeMissing, "%s.output is required", p)
	}
	out, err := contentText(f, "output", false)
	if err != nil {
		return err
	}
	// The call's name and namespace, which the output may repeat, are the
	// call's.
	f.Ignore("name", "namespace")
	c.other(session.Message{"role": "tool", "tool_call_id": callID, "content": out})
	return nil
}

// contentText reads the content member name: a string, or a list of text
// parts (input_text, output_text, and for an assistant refusal), joined by
// newlines. Images, files and audio need a multimodal model and are
// refused.
func contentText(f *jsonhttp.Fields, name string, assistant bool) (string, error) {
	v, ok := f.Raw(name)
	p := f.Param(name)
	if !ok {
		return "", session.Invalid(p, session.CodeMissing, "%s is required", p)
	}
	var s string
	if err := json.Unmarshal(v, &s); err == nil {
		return s, nil
	}
	parts, ok := jsonhttp.ParseArray(v)
	if !ok {
		return "", session.Invalid(p, session.CodeInvalidType, "%s must be a string or an array of content parts", p)
	}
	texts := make([]string, 0, len(parts))
	for i, part := range parts {
		pp := p + "[" + strconv.Itoa(i) + "]"
		pf, err := jsonhttp.ObjectOf(part, pp)
		if err != nil {
			return "", err
		}
		typ, ok, err := pf.Str("type")
		if err != nil {
			return "", err
		}
		if !ok {
			return "", session.Invalid(pp+".type", session.CodeMissing, "%s.type is required", pp)
		}
		key := "text"
		switch typ {
		case "input_text", "output_text":
			// An output_text coming back carries what the response gave it.
			pf.Ignore("annotations", "logprobs")
		case "refusal":
			if !assistant {
				return "", session.Invalid(pp+".type", session.CodeInvalidValue, "%s: only an assistant message holds a refusal", pp)
			}
			key = "refusal"
		case "input_image", "input_file", "input_audio":
			return "", session.Unsupported(pp+".type", "content parts of type %s are not supported: this server handles text only", session.Quote(typ))
		default:
			return "", session.Invalid(pp+".type", session.CodeInvalidValue, "%s.type %s is not a content part type", pp, session.Quote(typ))
		}
		t, err := required(pf, key)
		if err != nil {
			return "", err
		}
		if err := pf.Unknown(); err != nil {
			return "", err
		}
		texts = append(texts, t)
	}
	return strings.Join(texts, "\n"), nil
}

// messagesOf is the chat a template renders: the instructions as a system
// message first, and the conversation. System messages at the start are
// joined into one, since many templates take a single system message,
// and only first.
func messagesOf(instructions *string, conv []session.Message) []session.Message {
	var msgs []session.Message
	if instructions != nil && *instructions != "" {
		msgs = append(msgs, session.Message{"role": "system", "content": *instructions})
	}
	msgs = append(msgs, conv...)
	n := 0
	for n < len(msgs) && msgs[n]["role"] == "system" {
		n++
	}
	if n < 2 {
		return msgs
	}
	texts := make([]string, n)
	for i := range n {
		texts[i], _ = msgs[i]["content"].(string)
	}
	joined := session.Message{"role": "system", "content": strings.Join(texts, "\n\n")}
	return append([]session.Message{joined}, msgs[n:]...)
}

// normalize gives a stored input item what the API lists it with: an id
// and a type.
func normalize(raw json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return raw
	}
	typ := typeMessage
	if t, ok := m["type"]; ok {
		json.Unmarshal(t, &typ)
	} else {
		m["type"] = json.RawMessage(`"message"`)
	}
	if _, ok := m["id"]; !ok || jsonhttp.IsNull(m["id"]) {
		prefix := map[string]string{typeMessage: "msg_", typeReasoning: "rs_", typeFunctionCall: "fc_", typeFunctionCallOutput: "fco_"}[typ]
		id, _ := json.Marshal(newID(prefix))
		m["id"] = id
	}
	b, err := json.Marshal(m)
	if err != nil {
		return raw
	}
	return b
}
