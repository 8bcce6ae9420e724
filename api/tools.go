package api

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
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
