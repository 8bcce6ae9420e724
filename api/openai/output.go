package openai

import (
	"encoding/json"

	"github.com/ruvllm/ruvllm/api/jsonhttp"
	"github.com/ruvllm/ruvllm/session"
)

// parseOutput reads what constrains the output, in any of the ways clients
// ask for it: OpenAI's response_format; llama-server's grammar (GBNF) and
// json_schema; vLLM's guided_json, guided_regex, guided_choice,
// guided_grammar and structured_outputs. At most one may be given.
func parseOutput(f *jsonhttp.Fields) (*session.Output, error) {
	var out *session.Output
	var from string
	set := func(name string, o *session.Output) error {
		if o == nil {
			return nil
		}
		if out != nil {
			return session.Invalid(name, session.CodeInvalidValue, "%s and %s both constrain the output; give one", from, name)
		}
		out, from = o, name
		return nil
	}
	o, err := parseResponseFormat(f)
	if err != nil {
		return nil, err
	}
	if err := set("response_format", o); err != nil {
		return nil, err
	}
	if src, ok, err := f.Str("grammar"); err != nil {
		return nil, err
	} else if ok && src != "" {
		o, err := session.GBNFOutput(src, "grammar")
		if err != nil {
			return nil, err
		}
		if err := set("grammar", o); err != nil {
			return nil, err
		}
	}
	for _, name := range []string{"json_schema", "guided_json"} {
		if v, ok := f.Raw(name); ok {
			o, err := schemaOutput(v, name)
			if err != nil {
				return nil, err
			}
			if err := set(name, o); err != nil {
				return nil, err
			}
		}
	}
	if o, name, err := guided(f, "guided_regex", "guided_choice", "guided_grammar", ""); err != nil {
		return nil, err
	} else if err := set(name, o); err != nil {
		return nil, err
	}
	if so, ok, err := f.Object("structured_outputs"); err != nil {
		return nil, err
	} else if ok {
		var o *session.Output
		if v, ok := so.Raw("json"); ok {
			if o, err = schemaOutput(v, "structured_outputs.json"); err != nil {
				return nil, err
			}
		}
		if jo, ok, err := so.Bool("json_object"); err != nil {
			return nil, err
		} else if ok && jo {
			if o != nil {
				return nil, session.Invalid("structured_outputs", session.CodeInvalidValue, "structured_outputs takes one of json, json_object, regex, choice, grammar")
			}
			o = session.JSONObjectOutput()
		}
		g, _, err := guided(so, "regex", "choice", "grammar", "structured_outputs.")
		if err != nil {
			return nil, err
		}
		if g != nil && o != nil {
			return nil, session.Invalid("structured_outputs", session.CodeInvalidValue, "structured_outputs takes one of json, json_object, regex, choice, grammar")
		}
		if g != nil {
			o = g
		}
		so.Ignore("disable_fallback", "disable_any_whitespace", "disable_additional_properties", "whitespace_pattern", "backend")
		if err := so.Unknown(); err != nil {
			return nil, err
		}
		if err := set("structured_outputs", o); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// guided reads vLLM's regex, choice and grammar constraints (at most one)
// of f, whose field names are given; prefix names f in errors. It returns
// the constraint and the field that gave it.
func guided(f *jsonhttp.Fields, regexName, choiceName, grammarName, prefix string) (*session.Output, string, error) {
	var out *session.Output
	var from string
	one := func(name string, o *session.Output) error {
		if out != nil {
			return session.Invalid(prefix+name, session.CodeInvalidValue, "give one of %s, %s and %s", prefix+regexName, prefix+choiceName, prefix+grammarName)
		}
		out, from = o, prefix+name
		return nil
	}
	if re, ok, err := f.Str(regexName); err != nil {
		return nil, "", err
	} else if ok {
		o, err := session.RegexOutput(re, prefix+regexName)
		if err != nil {
			return nil, "", err
		}
		if err := one(regexName, o); err != nil {
			return nil, "", err
		}
	}
	if v, ok := f.Raw(choiceName); ok {
		var options []string
		if err := json.Unmarshal(v, &options); err != nil {
			return nil, "", f.TypeError(choiceName, "an array of strings")
		}
		o, err := session.ChoiceOutput(options, prefix+choiceName)
		if err != nil {
			return nil, "", err
		}
		if err := one(choiceName, o); err != nil {
			return nil, "", err
		}
	}
	if src, ok, err := f.Str(grammarName); err != nil {
		return nil, "", err
	} else if ok {
		o, err := session.GBNFOutput(src, prefix+grammarName)
		if err != nil {
			return nil, "", err
		}
		if err := one(grammarName, o); err != nil {
			return nil, "", err
		}
	}
	return out, from, nil
}

// schemaOutput reads a JSON schema given as an object, or (vLLM) as a
// string holding one.
func schemaOutput(v json.RawMessage, param string) (*session.Output, error) {
	var s string
	if json.Unmarshal(v, &s) == nil {
		v = json.RawMessage(s)
		if !json.Valid(v) {
			return nil, session.Invalid(param, session.CodeInvalidValue, "%s is a string that is not a JSON schema", param)
		}
	}
	return session.JSONSchemaOutput(v, param)
}

// parseResponseFormat reads response_format: {"type":"text"} (nil),
// {"type":"json_object"} (any object; with llama-server's "schema" member
// beside the type, that schema) or {"type":"json_schema","json_schema":
// {"name","description","schema","strict"}}. A schema the grammar compiler
// cannot follow is a 400 that says where and why.
func parseResponseFormat(f *jsonhttp.Fields) (*session.Output, error) {
	rf, ok, err := f.Object("response_format")
	if err != nil || !ok {
		return nil, err
	}
	typ, ok, err := rf.Str("type")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, session.Invalid("response_format.type", session.CodeMissing, "response_format.type is required")
	}
	var out *session.Output
	switch typ {
	case "text":
	case "json_object":
		if schema, ok := rf.Raw("schema"); ok {
			if out, err = session.JSONSchemaOutput(schema, "response_format.schema"); err != nil {
				return nil, err
			}
		} else {
			out = session.JSONObjectOutput()
		}
	case "json_schema":
		js, ok, err := rf.Object("json_schema")
		if err != nil {
			return nil, err
		}
		if !ok {
			// llama-server also takes the schema beside the type.
			if schema, ok := rf.Raw("schema"); ok {
				if out, err = session.JSONSchemaOutput(schema, "response_format.schema"); err != nil {
					return nil, err
				}
				break
			}
			return nil, session.Invalid("response_format.json_schema", session.CodeMissing, "response_format.json_schema is required when the type is json_schema")
		}
		if out, err = jsonSchemaObject(js, "response_format.json_schema"); err != nil {
			return nil, err
		}
	default:
		return nil, session.Invalid("response_format.type", session.CodeInvalidValue,
			"response_format.type %s is not one of text, json_object, json_schema", session.Quote(typ))
	}
	if err := rf.Unknown(); err != nil {
		return nil, err
	}
	return out, nil
}

// jsonSchemaObject reads OpenAI's {"name", "description", "schema",
// "strict"} (the field param), as response_format.json_schema and the
// Responses API's text.format carry it.
func jsonSchemaObject(js *jsonhttp.Fields, param string) (*session.Output, error) {
	name, ok, err := js.Str("name")
	if err != nil {
		return nil, err
	}
	if ok && !session.ValidName(name) {
		return nil, session.Invalid(param+".name", session.CodeInvalidValue,
			"%s.name %s must be 1 to 64 letters, digits, underscores and dashes", param, session.Quote(name))
	}
	if _, _, err := js.Str("description"); err != nil {
		return nil, err
	}
	// strict or not, the output follows the schema: that is what a grammar
	// does.
	if _, _, err := js.Bool("strict"); err != nil {
		return nil, err
	}
	schema, ok := js.Raw("schema")
	if !ok {
		schema = []byte("{}") // no schema: any JSON value
	}
	if err := js.Unknown(); err != nil {
		return nil, err
	}
	return session.JSONSchemaOutput(schema, param+".schema")
}

// JSONSchemaObject is jsonSchemaObject for the other OpenAI routes.
func JSONSchemaObject(js *jsonhttp.Fields, param string) (*session.Output, error) {
	return jsonSchemaObject(js, param)
}
