package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/ruvllm/ruvllm/models/tokenizer"
	"github.com/ruvllm/ruvllm/toolcall"
)

// maxTools bounds the tools of one request, as OpenAI does.
const maxTools = 128

// toolNameRE is what OpenAI accepts as a function name.
var toolNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// toolSpec is one function tool of a request.
type toolSpec struct {
	name string
	// parameters is the JSON schema of the arguments; nil when the tool
	// takes none.
	parameters json.RawMessage
	// object is the tool as the client sent it, decoded, for the chat
	// template.
	object any
}

// toolList is a request's tools, in the order sent.
type toolList []toolSpec

// templateTools is the tools as chat templates take them: OpenAI's tool
// objects; nil without tools, so that templates see tools undefined.
func (tl toolList) templateTools() []any {
	if len(tl) == 0 {
		return nil
	}
	out := make([]any, len(tl))
	for i, t := range tl {
		out[i] = t.object
	}
	return out
}

// parseToolList reads tools: a list of {"type":"function","function":
// {"name","description","parameters","strict"}}.
func parseToolList(f *fields) (toolList, *apiError) {
	raw, ok, err := f.array("tools")
	if err != nil || !ok {
		return nil, err
	}
	if len(raw) > maxTools {
		return nil, invalid("tools", codeInvalidValue, "tools holds %d tools; at most %d are allowed", len(raw), maxTools)
	}
	out := make(toolList, 0, len(raw))
	seen := map[string]bool{}
	for i, rt := range raw {
		p := "tools[" + strconv.Itoa(i) + "]"
		tf, err := objectFields(rt, p)
		if err != nil {
			return nil, err
		}
		typ, ok, err := tf.str("type")
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, invalid(p+".type", codeMissing, "%s.type is required", p)
		}
		if typ != "function" {
			return nil, unsupported(p+".type", "tools of type %s are not supported; only \"function\" is", quote(typ))
		}
		fn, ok, err := tf.object("function")
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, invalid(p+".function", codeMissing, "%s.function is required", p)
		}
		if err := tf.unknown(); err != nil {
			return nil, err
		}
		name, ok, err := fn.str("name")
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, invalid(p+".function.name", codeMissing, "%s.function.name is required", p)
		}
		if !toolNameRE.MatchString(name) {
			return nil, invalid(p+".function.name", codeInvalidValue, "%s.function.name %s must be 1 to 64 letters, digits, underscores and dashes", p, quote(name))
		}
		if seen[name] {
			return nil, invalid(p+".function.name", codeInvalidValue, "two tools are named %s", quote(name))
		}
		seen[name] = true
		if _, _, err := fn.str("description"); err != nil {
			return nil, err
		}
		if _, _, err := fn.boolean("strict"); err != nil {
			return nil, err
		}
		t := toolSpec{name: name}
		if _, ok, err := fn.object("parameters"); err != nil {
			return nil, err
		} else if ok {
			t.parameters, _ = fn.raw("parameters")
		}
		if err := fn.unknown(); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(rt, &t.object); err != nil {
			return nil, invalid(p, codeInvalidJSON, "%s: %v", p, err)
		}
		out = append(out, t)
	}
	return out, nil
}

// objectFields reads v, the value of the request field p, as an object.
func objectFields(v json.RawMessage, p string) (*fields, *apiError) {
	var m map[string]json.RawMessage
	if t := bytes.TrimSpace(v); len(t) == 0 || t[0] != '{' || json.Unmarshal(v, &m) != nil {
		return nil, invalid(p, codeInvalidType, "%s must be an object", p)
	}
	return newFields(m, p+"."), nil
}

// toolStyle is how a model's chat template treats tools: the format its
// model writes calls in, and whether the template shows the tools and the
// calls at all (a template that does not gets them described in a system
// message, and past calls and results written as plain turns).
type toolStyle struct {
	format toolcall.Format
	knows  bool
}

// templateSource is implemented by chat renderers that can show their
// template (*models.Model does).
type templateSource interface{ ChatTemplateSource() string }

func detectToolStyle(c ChatRenderer) toolStyle {
	ts, ok := c.(templateSource)
	if !ok {
		return toolStyle{format: toolcall.Generic}
	}
	src := ts.ChatTemplateSource()
	return toolStyle{format: toolcall.Detect(src), knows: strings.Contains(src, "tools")}
}

// toolRequest is how a chat request uses its tools.
type toolRequest struct {
	tools    toolList
	style    toolStyle
	choice   string // "auto", "required", "none", or "function" for a named one
	named    string
	parallel bool
}

// parseToolChoice reads tool_choice ("none", "auto", "required" or
// {"type":"function","function":{"name"}}) and parallel_tool_calls for the
// request's tools; without tools only none and auto are allowed.
func parseToolChoice(f *fields, tools toolList) (*toolRequest, *apiError) {
	tr := &toolRequest{tools: tools, choice: "auto", parallel: true}
	if len(tools) == 0 {
		tr.choice = "none"
	}
	if v, ok := f.raw("tool_choice"); ok {
		var s string
		if json.Unmarshal(v, &s) == nil {
			switch s {
			case "none", "auto", "required":
				tr.choice = s
			default:
				return nil, invalid("tool_choice", codeInvalidValue, "tool_choice %s is not one of none, auto, required or a function", quote(s))
			}
		} else {
			tc, err := objectFields(v, "tool_choice")
			if err != nil {
				return nil, invalid("tool_choice", codeInvalidType, "tool_choice must be a string or an object")
			}
			typ, _, err := tc.str("type")
			if err != nil {
				return nil, err
			}
			if typ != "function" {
				return nil, unsupported("tool_choice.type", "tool_choice of type %s is not supported; only \"function\" is", quote(typ))
			}
			fn, ok, err := tc.object("function")
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, invalid("tool_choice.function", codeMissing, "tool_choice.function is required")
			}
			name, ok, err := fn.str("name")
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, invalid("tool_choice.function.name", codeMissing, "tool_choice.function.name is required")
			}
			if err := fn.unknown(); err != nil {
				return nil, err
			}
			if err := tc.unknown(); err != nil {
				return nil, err
			}
			if !slices.ContainsFunc(tools, func(t toolSpec) bool { return t.name == name }) {
				return nil, invalid("tool_choice.function.name", codeInvalidValue, "tool_choice names %s, which is not one of the tools", quote(name))
			}
			tr.choice, tr.named = "function", name
		}
	}
	if (tr.choice == "required" || tr.choice == "function") && len(tools) == 0 {
		return nil, invalid("tool_choice", codeInvalidValue, "tool_choice %s needs tools", tr.choice)
	}
	if p, ok, err := f.boolean("parallel_tool_calls"); err != nil {
		return nil, err
	} else if ok {
		tr.parallel = p
	}
	return tr, nil
}

// active reports whether the output is parsed for calls.
func (tr *toolRequest) active() bool { return tr != nil && tr.choice != "none" }

// templateTools are the tools the template renders: none when the model
// is not to call them, or when the template knows no tools.
func (tr *toolRequest) templateTools() []any {
	if !tr.active() || !tr.style.knows {
		return nil
	}
	return tr.tools.templateTools()
}

// prepareMessages shapes the conversation for a template that knows no
// tools: a system message describes them (or, inUser, the first user
// message, for templates without a system role), past calls become the
// JSON the model is told to write, and results become user turns.
func (tr *toolRequest) prepareMessages(messages []map[string]any, inUser bool) []map[string]any {
	if tr == nil || tr.style.knows {
		return messages
	}
	out := make([]map[string]any, 0, len(messages)+1)
	if tr.active() {
		prompt := toolcall.SystemPrompt(tr.tools.templateTools())
		role := "system"
		if inUser {
			role = "user"
		}
		if i := slices.IndexFunc(messages, func(m map[string]any) bool { return m["role"] == role }); i >= 0 && (role == "user" || i == 0) {
			first := maps.Clone(messages[i])
			if role == "user" {
				first["content"] = prompt + "\n\n" + fmt.Sprint(first["content"])
			} else {
				first["content"] = fmt.Sprint(first["content"]) + "\n\n" + prompt
			}
			messages = slices.Clone(messages)
			messages[i] = first
		} else {
			out = append(out, map[string]any{"role": "system", "content": prompt})
		}
	}
	for _, m := range messages {
		switch {
		case m["role"] == "assistant" && m["tool_calls"] != nil:
			calls := []any{}
			for _, c := range m["tool_calls"].([]any) {
				if cm, ok := c.(map[string]any); ok {
					if fn, ok := cm["function"].(map[string]any); ok {
						calls = append(calls, map[string]any{"name": fn["name"], "arguments": fn["arguments"]})
					}
				}
			}
			j, _ := json.Marshal(map[string]any{"tool_calls": calls})
			out = append(out, map[string]any{"role": "assistant", "content": string(j)})
		case m["role"] == "tool":
			text := fmt.Sprintf("The result of tool call %v: %v", m["tool_call_id"], m["content"])
			if n := len(out); n > 0 && out[n-1]["role"] == "user" && out[n-1]["tool_result"] == true {
				out[n-1]["content"] = fmt.Sprint(out[n-1]["content"]) + "\n" + text
				continue
			}
			out = append(out, map[string]any{"role": "user", "content": text, "tool_result": true})
		default:
			out = append(out, m)
		}
	}
	for _, m := range out {
		delete(m, "tool_result")
	}
	return out
}

// output is the grammar a required or named call follows, or nil.
func (tr *toolRequest) output(m *Model) (*outputGrammar, *apiError) {
	if tr == nil || (tr.choice != "required" && tr.choice != "function") {
		return nil, nil
	}
	var tools []toolcall.Tool
	for _, t := range tr.tools {
		if tr.choice == "function" && t.name != tr.named {
			continue
		}
		tools = append(tools, toolcall.Tool{Name: t.name, Parameters: t.parameters})
	}
	g, err := tr.style.format.Grammar(tools, tr.parallel)
	if err != nil {
		return nil, schemaError(err, "tools")
	}
	return &outputGrammar{g: g, render: tr.markers(m)}, nil
}

// markers are the token ids of the format's markers in m's vocabulary,
// which the output writes out.
func (tr *toolRequest) markers(m *Model) []tokenizer.ID {
	var ids []tokenizer.ID
	for _, s := range tr.style.format.Markers() {
		if id, ok := m.Tokenizer.Vocab().IDs[s]; ok {
			ids = append(ids, id)
		}
	}
	return ids
}

// argumentObjects gives templates the arguments of past calls as objects,
// as they render them: OpenAI sends them as JSON text.
func argumentObjects(calls []any) {
	for _, c := range calls {
		cm, ok := c.(map[string]any)
		if !ok {
			continue
		}
		fn, ok := cm["function"].(map[string]any)
		if !ok {
			continue
		}
		if s, ok := fn["arguments"].(string); ok {
			var obj map[string]any
			if json.Unmarshal([]byte(s), &obj) == nil {
				fn["arguments"] = obj
			}
		}
	}
}

// newCallID makes the id of a call: call_ and 24 letters and digits, or
// what the format's templates require.
func newCallID(f toolcall.Format) string {
	const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	n := f.IDLength()
	prefix := ""
	if n == 0 {
		n, prefix = 24, "call_"
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = alnum[rand.IntN(len(alnum))]
	}
	return prefix + string(b)
}

// toolCall is a call in a response message.
type toolCall struct {
	ID       string           `json:"id"`
	Type     string           `json:"type"`
	Function toolCallFunction `json:"function"`
}

type toolCallFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// toolCallDelta is a piece of a call in a stream: the first carries the
// id, type and name, the rest fragments of the arguments.
type toolCallDelta struct {
	Index    int               `json:"index"`
	ID       string            `json:"id,omitempty"`
	Type     string            `json:"type,omitempty"`
	Function toolFunctionDelta `json:"function"`
}

type toolFunctionDelta struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}
