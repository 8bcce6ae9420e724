package openai

import (
	"encoding/json"

	"github.com/ruvllm/ruvllm/api/jsonhttp"
	"github.com/ruvllm/ruvllm/session"
)

// ParseTools reads tools: a list of {"type":"function","function":
// {"name","description","parameters","strict"}}.
func ParseTools(f *jsonhttp.Fields) ([]session.Tool, error) {
	var out []session.Tool
	_, err := f.EachObject("tools", session.MaxTools, func(_ int, p string, tf *jsonhttp.Fields, raw json.RawMessage) error {
		typ, ok, err := tf.Str("type")
		if err != nil {
			return err
		}
		if !ok {
			return session.Invalid(p+".type", session.CodeMissing, "%s.type is required", p)
		}
		if typ != "function" {
			return session.Unsupported(p+".type", "tools of type %s are not supported; only \"function\" is", session.Quote(typ))
		}
		fn, ok, err := tf.Object("function")
		if err != nil {
			return err
		}
		if !ok {
			return session.Invalid(p+".function", session.CodeMissing, "%s.function is required", p)
		}
		if err := tf.Unknown(); err != nil {
			return err
		}
		t, err := parseFunction(fn, p+".function")
		if err != nil {
			return err
		}
		if err := json.Unmarshal(raw, &t.Object); err != nil {
			return session.Invalid(p, session.CodeInvalidJSON, "%s: %v", p, err)
		}
		out = append(out, t)
		return nil
	})
	return out, err
}

// parseFunction reads a function's {"name", "description", "parameters",
// "strict"} (the field p).
func parseFunction(fn *jsonhttp.Fields, p string) (session.Tool, error) {
	name, ok, err := fn.Str("name")
	if err != nil {
		return session.Tool{}, err
	}
	if !ok {
		return session.Tool{}, session.Invalid(p+".name", session.CodeMissing, "%s.name is required", p)
	}
	if !session.ValidName(name) {
		return session.Tool{}, session.Invalid(p+".name", session.CodeInvalidValue, "%s.name %s must be 1 to 64 letters, digits, underscores and dashes", p, session.Quote(name))
	}
	t := session.Tool{Name: name}
	if t.Description, _, err = fn.Str("description"); err != nil {
		return session.Tool{}, err
	}
	if _, _, err := fn.Bool("strict"); err != nil {
		return session.Tool{}, err
	}
	if _, ok, err := fn.Object("parameters"); err != nil {
		return session.Tool{}, err
	} else if ok {
		t.Parameters, _ = fn.Raw("parameters")
	}
	if err := fn.Unknown(); err != nil {
		return session.Tool{}, err
	}
	return t, nil
}

// parseToolChoice reads tool_choice ("none", "auto", "required" or
// {"type":"function","function":{"name"}}) and parallel_tool_calls.
func parseToolChoice(f *jsonhttp.Fields) (session.ToolChoice, error) {
	var tc session.ToolChoice
	if v, ok := f.Raw("tool_choice"); ok {
		var s string
		if json.Unmarshal(v, &s) == nil {
			switch s {
			case "none", "auto", "required":
				tc.Mode = s
			default:
				return tc, session.Invalid("tool_choice", session.CodeInvalidValue, "tool_choice %s is not one of none, auto, required or a function", session.Quote(s))
			}
		} else {
			obj, err := jsonhttp.ObjectOf(v, "tool_choice")
			if err != nil {
				return tc, session.Invalid("tool_choice", session.CodeInvalidType, "tool_choice must be a string or an object")
			}
			typ, _, err := obj.Str("type")
			if err != nil {
				return tc, err
			}
			if typ != "function" {
				return tc, session.Unsupported("tool_choice.type", "tool_choice of type %s is not supported; only \"function\" is", session.Quote(typ))
			}
			fn, ok, err := obj.Object("function")
			if err != nil {
				return tc, err
			}
			if !ok {
				return tc, session.Invalid("tool_choice.function", session.CodeMissing, "tool_choice.function is required")
			}
			name, ok, err := fn.Str("name")
			if err != nil {
				return tc, err
			}
			if !ok {
				return tc, session.Invalid("tool_choice.function.name", session.CodeMissing, "tool_choice.function.name is required")
			}
			if err := fn.Unknown(); err != nil {
				return tc, err
			}
			if err := obj.Unknown(); err != nil {
				return tc, err
			}
			tc.Mode, tc.Name = session.ToolFunction, name
		}
	}
	if p, ok, err := f.Bool("parallel_tool_calls"); err != nil {
		return tc, err
	} else if ok {
		tc.Sequential = !p
	}
	return tc, nil
}
