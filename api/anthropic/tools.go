package anthropic

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/ruvllm/ruvllm/api/jsonhttp"
	"github.com/ruvllm/ruvllm/session"
)

// claudeCodeToolSearch tells Claude Code's users how to keep tool search
// off.
const claudeCodeToolSearch = " (Claude Code: leave ENABLE_TOOL_SEARCH unset, or set it to false)"

// parseTools reads tools: client tools {"name", "description",
// "input_schema"} (type "custom" or none). Anthropic's own tool types
// (bash, text editor, computer use, memory) and its server tools (web
// search, web fetch, code execution, tool search, MCP toolsets) are
// refused: this server runs none of them and has no schema for them.
func parseTools(f *jsonhttp.Fields) ([]session.Tool, error) {
	var out []session.Tool
	_, err := f.EachObject("tools", session.MaxTools, func(_ int, p string, tf *jsonhttp.Fields, _ json.RawMessage) error {
		if typ, ok, err := tf.Str("type"); err != nil {
			return err
		} else if ok && typ != "custom" {
			msg := "%s: tools of type %s are not supported: this server runs no server tools and knows no Anthropic-defined tool; define a custom tool with an input_schema"
			if strings.HasPrefix(typ, "tool_search_tool") {
				msg += claudeCodeToolSearch
			}
			return session.Unsupported(p+".type", msg, p, session.Quote(typ))
		}
		name, ok, err := tf.Str("name")
		if err != nil {
			return err
		}
		if !ok {
			return missing(p + ".name")
		}
		if !session.ValidName(name) {
			return session.Invalid(p+".name", session.CodeInvalidValue, "%s.name %s must be 1 to 64 letters, digits, underscores and dashes", p, session.Quote(name))
		}
		t := session.Tool{Name: name}
		if t.Description, _, err = tf.Str("description"); err != nil {
			return err
		}
		schema, ok, err := tf.Object("input_schema")
		if err != nil {
			return err
		}
		if !ok {
			return missing(p + ".input_schema")
		}
		if typ, _ := schema.Peek("type"); !isString(typ, "object") {
			return session.Invalid(p+".input_schema.type", session.CodeInvalidValue, "%s.input_schema.type must be \"object\"", p)
		}
		t.Parameters, _ = tf.Raw("input_schema")
		if err := cacheControl(tf); err != nil {
			return err
		}
		// strict asks for inputs that follow the schema: they do when the
		// call is forced (tool_choice any or tool), whose grammar is the
		// schema's.
		if _, _, err := tf.Bool("strict"); err != nil {
			return err
		}
		// Only how finely the input streams, which is token by token here.
		if _, _, err := tf.Bool("eager_input_streaming"); err != nil {
			return err
		}
		if d, _, err := tf.Bool("defer_loading"); err != nil {
			return err
		} else if d {
			return session.Unsupported(p+".defer_loading", "%s.defer_loading: deferred tools need the tool search tool, which this server does not run"+claudeCodeToolSearch, p)
		}
		if callers, ok, err := tf.Array("allowed_callers"); err != nil {
			return err
		} else if ok {
			for _, c := range callers {
				if !isString(c, "direct") {
					return session.Unsupported(p+".allowed_callers", "%s.allowed_callers: only \"direct\" is supported (programmatic tool calling runs on Anthropic's side)", p)
				}
			}
		}
		if ex, ok, err := tf.Array("input_examples"); err != nil {
			return err
		} else if ok && len(ex) > 0 {
			return session.Unsupported(p+".input_examples", "%s.input_examples are not supported: chat templates have no place for them", p)
		}
		if err := tf.Unknown(); err != nil {
			return err
		}
		if slices.ContainsFunc(out, func(o session.Tool) bool { return o.Name == name }) {
			return session.Invalid(p+".name", session.CodeInvalidValue, "tool names must be unique; %s is given twice", session.Quote(name))
		}
		out = append(out, t)
		return nil
	})
	return out, err
}

// parseToolChoice reads tool_choice: {"type":"auto"|"any"|"none"} or
// {"type":"tool","name"}, each but none with disable_parallel_tool_use.
func parseToolChoice(f *jsonhttp.Fields, tools []session.Tool) (session.ToolChoice, error) {
	var tc session.ToolChoice
	obj, ok, err := f.Object("tool_choice")
	if err != nil || !ok {
		return tc, err
	}
	typ, ok, err := obj.Str("type")
	if err != nil {
		return tc, err
	}
	if !ok {
		return tc, missing("tool_choice.type")
	}
	switch typ {
	case "auto":
		tc.Mode = session.ToolAuto
	case "any":
		tc.Mode = session.ToolRequired
	case "none":
		tc.Mode = session.ToolNone
	case "tool":
		name, ok, err := obj.Str("name")
		if err != nil {
			return tc, err
		}
		if !ok {
			return tc, missing("tool_choice.name")
		}
		if !slices.ContainsFunc(tools, func(t session.Tool) bool { return t.Name == name }) {
			return tc, session.Invalid("tool_choice.name", session.CodeInvalidValue, "tool_choice names %s, which is not one of the tools", session.Quote(name))
		}
		tc.Mode, tc.Name = session.ToolFunction, name
	default:
		return tc, session.Invalid("tool_choice.type", session.CodeInvalidValue, "tool_choice.type %s is not one of \"auto\", \"any\", \"tool\", \"none\"", session.Quote(typ))
	}
	if typ != "none" {
		if tc.Sequential, _, err = obj.Bool("disable_parallel_tool_use"); err != nil {
			return tc, err
		}
	}
	if (tc.Mode == session.ToolRequired || tc.Mode == session.ToolFunction) && len(tools) == 0 {
		return tc, session.Invalid("tool_choice", session.CodeInvalidValue, "tool_choice %s needs tools", session.Quote(typ))
	}
	return tc, obj.Unknown()
}

// isString reports whether v is the JSON string s.
func isString(v json.RawMessage, s string) bool {
	var got string
	return json.Unmarshal(v, &got) == nil && got == s
}
