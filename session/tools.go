package session

import (
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

// MaxTools bounds the tools of one request, as OpenAI does.
const MaxTools = 128

// toolNameRE is what OpenAI accepts as a function name.
var toolNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// ValidName reports whether s is a valid function (or schema) name: 1 to
// 64 letters, digits, underscores and dashes.
func ValidName(s string) bool { return toolNameRE.MatchString(s) }

// toolStyle is how a model's chat template treats tools: the format its
// model writes calls in, and whether the template shows the tools and the
// calls at all (a template that does not gets them described in a system
// message, and past calls and results written as plain turns).
type toolStyle struct {
	format toolcall.Format
	knows  bool
}

func detectToolStyle(hasChat bool, src string) toolStyle {
	if !hasChat || src == "" {
		return toolStyle{format: toolcall.Generic}
	}
	return toolStyle{format: toolcall.Detect(src), knows: strings.Contains(src, "tools")}
}

// toolUse is how one generation uses its tools.
type toolUse struct {
	tools  []Tool
	style  toolStyle
	choice ToolChoice
}

// checkTools validates the tools and the choice of req, and fills in the
// choice's default mode.
func checkTools(req *Request) error {
	n := req.names()
	if len(req.Tools) > MaxTools {
		return Invalid(n.Tools, CodeInvalidValue, "%s holds %d tools; at most %d are allowed", n.Tools, len(req.Tools), MaxTools)
	}
	seen := map[string]bool{}
	for i, t := range req.Tools {
		p := n.Tools + "[" + strconv.Itoa(i) + "]"
		if !ValidName(t.Name) {
			return Invalid(p, CodeInvalidValue, "%s: the function name %s must be 1 to 64 letters, digits, underscores and dashes", p, Quote(t.Name))
		}
		if seen[t.Name] {
			return Invalid(p, CodeInvalidValue, "two tools are named %s", Quote(t.Name))
		}
		seen[t.Name] = true
	}
	tc := &req.ToolChoice
	switch tc.Mode {
	case "":
		tc.Mode = ToolAuto
		if len(req.Tools) == 0 {
			tc.Mode = ToolNone
		}
	case ToolAuto, ToolNone:
	case ToolRequired, ToolFunction:
		if len(req.Tools) == 0 {
			return Invalid(n.ToolChoice, CodeInvalidValue, "%s %s needs tools", n.ToolChoice, tc.Mode)
		}
		if tc.Mode == ToolFunction && !seen[tc.Name] {
			return Invalid(n.ToolChoice, CodeInvalidValue, "%s names %s, which is not one of the tools", n.ToolChoice, Quote(tc.Name))
		}
	default:
		return Invalid(n.ToolChoice, CodeInvalidValue, "%s %s is not one of none, auto, required or a function", n.ToolChoice, Quote(tc.Mode))
	}
	return nil
}

// active reports whether the output is parsed for calls.
func (tu *toolUse) active() bool { return tu != nil && tu.choice.Mode != ToolNone }

// objects are the tools as chat templates take them: OpenAI's tool
// objects.
func (tu *toolUse) objects() []any {
	out := make([]any, len(tu.tools))
	for i, t := range tu.tools {
		out[i] = t.object()
	}
	return out
}

// object is the tool as OpenAI's tool object, which templates read.
func (t Tool) object() any {
	if t.Object != nil {
		return t.Object
	}
	fn := map[string]any{"name": t.Name}
	if t.Description != "" {
		fn["description"] = t.Description
	}
	if t.Parameters != nil {
		fn["parameters"] = t.Parameters
	}
	return map[string]any{"type": "function", "function": fn}
}

// templateTools are the tools the template renders: none when the model
// is not to call them, or when the template knows no tools; nil leaves the
// template's tools variable undefined.
func (tu *toolUse) templateTools() []any {
	if !tu.active() || !tu.style.knows || len(tu.tools) == 0 {
		return nil
	}
	return tu.objects()
}

// prepareMessages shapes the conversation for a template that knows no
// tools: a system message describes them (or, inUser, the first user
// message, for templates without a system role), past calls become the
// JSON the model is told to write, and results become user turns.
func (tu *toolUse) prepareMessages(messages []Message, inUser bool) []Message {
	if tu.style.knows {
		return messages
	}
	out := make([]Message, 0, len(messages)+1)
	if tu.active() {
		prompt := toolcall.SystemPrompt(tu.objects())
		role := "system"
		if inUser {
			role = "user"
		}
		if i := slices.IndexFunc(messages, func(m Message) bool { return m["role"] == role }); i >= 0 && (role == "user" || i == 0) {
			first := maps.Clone(messages[i])
			if role == "user" {
				first["content"] = prompt + "\n\n" + fmt.Sprint(first["content"])
			} else {
				first["content"] = fmt.Sprint(first["content"]) + "\n\n" + prompt
			}
			messages = slices.Clone(messages)
			messages[i] = first
		} else {
			out = append(out, Message{"role": "system", "content": prompt})
		}
	}
	for _, m := range messages {
		switch {
		case m["role"] == "assistant" && m["tool_calls"] != nil:
			calls := []any{}
			if list, ok := m["tool_calls"].([]any); ok {
				for _, c := range list {
					if cm, ok := c.(map[string]any); ok {
						if fn, ok := cm["function"].(map[string]any); ok {
							calls = append(calls, map[string]any{"name": fn["name"], "arguments": fn["arguments"]})
						}
					}
				}
			}
			j, _ := json.Marshal(map[string]any{"tool_calls": calls})
			out = append(out, Message{"role": "assistant", "content": string(j)})
		case m["role"] == "tool":
			text := fmt.Sprintf("The result of tool call %v: %v", m["tool_call_id"], m["content"])
			if n := len(out); n > 0 && out[n-1]["role"] == "user" && out[n-1]["tool_result"] == true {
				out[n-1]["content"] = fmt.Sprint(out[n-1]["content"]) + "\n" + text
				continue
			}
			out = append(out, Message{"role": "user", "content": text, "tool_result": true})
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
func (tu *toolUse) output(m *Model, param string) (*Output, error) {
	if tu.choice.Mode != ToolRequired && tu.choice.Mode != ToolFunction {
		return nil, nil
	}
	var tools []toolcall.Tool
	for _, t := range tu.tools {
		if tu.choice.Mode == ToolFunction && t.Name != tu.choice.Name {
			continue
		}
		tools = append(tools, toolcall.Tool{Name: t.Name, Parameters: t.Parameters})
	}
	vocab := m.Tokenizer.Vocab()
	isToken := func(marker string) bool { _, ok := vocab.IDs[marker]; return ok }
	g, err := tu.style.format.GrammarFor(tools, !tu.choice.Sequential, isToken)
	if err != nil {
		return nil, SchemaError(err, param)
	}
	return &Output{g: g, render: tu.style.format.Markers()}, nil
}

// markerIDs are the token ids of marker texts in t's vocabulary, which the
// output writes out.
func markerIDs(t *tokenizer.Tokenizer, markers []string) []tokenizer.ID {
	var ids []tokenizer.ID
	for _, s := range markers {
		if id, ok := t.Vocab().IDs[s]; ok {
			ids = append(ids, id)
		}
	}
	return ids
}

// ArgumentObjects gives templates the arguments of past calls as objects,
// as Hugging Face passes them, where OpenAI sends them as JSON text; as
// llama.cpp and vLLM do.
func ArgumentObjects(calls []any) {
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

// newCallID makes the id of a call: the prefix and 24 letters and digits,
// or what the format's templates require (Mistral's 9 characters).
func newCallID(f toolcall.Format, prefix string) string {
	const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	n := f.IDLength()
	if n == 0 {
		n = 24
	} else {
		prefix = ""
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = alnum[rand.IntN(len(alnum))]
	}
	return prefix + string(b)
}

// Quote is a short, printable rendering of a client's value for messages.
func Quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return strconv.Quote(strings.ToValidUTF8(s, "\uFFFD"))
}
