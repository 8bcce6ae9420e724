package api

import (
	"errors"
	"slices"
	"strconv"
	"sync"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/grammar"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// outputGrammar is what a request's output must be: a grammar, and the
// control tokens the output writes out because the grammar spells them
// (tool-call markers such as [TOOL_CALLS]).
type outputGrammar struct {
	g      *grammar.Grammar
	render []tokenizer.ID
}

// schemaNameRE is what OpenAI accepts as a json_schema name.
var schemaNameRE = toolNameRE

// parseResponseFormat reads response_format: {"type":"text"} (nil),
// {"type":"json_object"} (any object; with llama-server's "schema" member
// beside the type, that schema) or {"type":"json_schema","json_schema":
// {"name","description","schema","strict"}}. A schema the grammar compiler
// cannot follow is a 400 that says where and why.
func parseResponseFormat(f *fields) (*outputGrammar, *apiError) {
	rf, ok, err := f.object("response_format")
	if err != nil || !ok {
		return nil, err
	}
	typ, ok, err := rf.str("type")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, invalid("response_format.type", codeMissing, "response_format.type is required")
	}
	var g *grammar.Grammar
	switch typ {
	case "text":
	case "json_object":
		if schema, ok := rf.raw("schema"); ok {
			if g, err = compileSchema(schema, "response_format.schema"); err != nil {
				return nil, err
			}
		} else {
			g = grammar.JSONObject()
		}
	case "json_schema":
		js, ok, err := rf.object("json_schema")
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, invalid("response_format.json_schema", codeMissing, "response_format.json_schema is required when the type is json_schema")
		}
		name, ok, err := js.str("name")
		if err != nil {
			return nil, err
		}
		if ok && !schemaNameRE.MatchString(name) {
			return nil, invalid("response_format.json_schema.name", codeInvalidValue,
				"response_format.json_schema.name %s must be 1 to 64 letters, digits, underscores and dashes", quote(name))
		}
		if _, _, err := js.str("description"); err != nil {
			return nil, err
		}
		// strict or not, the output follows the schema: that is what a
		// grammar does.
		if _, _, err := js.boolean("strict"); err != nil {
			return nil, err
		}
		schema, ok := js.raw("schema")
		if !ok {
			schema = []byte("{}") // no schema: any JSON value
		}
		if err := js.unknown(); err != nil {
			return nil, err
		}
		if g, err = compileSchema(schema, "response_format.json_schema.schema"); err != nil {
			return nil, err
		}
	default:
		return nil, invalid("response_format.type", codeInvalidValue,
			"response_format.type %s is not one of text, json_object, json_schema", quote(typ))
	}
	if err := rf.unknown(); err != nil {
		return nil, err
	}
	if g == nil {
		return nil, nil
	}
	return &outputGrammar{g: g}, nil
}

// compileSchema compiles the JSON schema of the request field param.
func compileSchema(schema []byte, param string) (*grammar.Grammar, *apiError) {
	g, err := grammar.JSONSchema(schema)
	if err != nil {
		return nil, schemaError(err, param)
	}
	return g, nil
}

// schemaError is the 400 of a schema the grammar compiler refused.
func schemaError(err error, param string) *apiError {
	var se *grammar.SchemaError
	if errors.As(err, &se) {
		return invalid(param, codeInvalidValue, "%s: %s", param+se.Path, se.Msg)
	}
	return invalid(param, codeInvalidValue, "%s: %v", param, err)
}

// vocabCache holds a model's grammar vocabularies, one per set of rendered
// control tokens: building one walks the whole vocabulary.
type vocabCache struct {
	mu sync.Mutex
	m  map[string]*grammar.Vocabulary
}

// grammarVocab is the vocabulary a constraint of m sees: what the choice's
// decoder writes for each token (render are the control tokens written as
// text), and m's end-of-generation tokens.
func (m *Model) grammarVocab(render []tokenizer.ID) *grammar.Vocabulary {
	key := ""
	for _, id := range render {
		key += strconv.Itoa(int(id)) + ","
	}
	c := m.vocabs
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.m[key]; ok {
		return v
	}
	t := m.Tokenizer
	o := decodeOptions(true, render)
	n := len(t.Vocab().Tokens)
	pieces := make([]string, n)
	var eog []int32
	for id := range n {
		pieces[id] = t.Written(tokenizer.ID(id), o)
		if t.IsEOG(tokenizer.ID(id)) {
			eog = append(eog, int32(id))
		}
	}
	v := grammar.NewVocabulary(pieces, eog)
	if c.m == nil {
		c.m = map[string]*grammar.Vocabulary{}
	}
	c.m[key] = v
	return v
}

// constraint makes the engine's constraint factory for an output grammar
// on model m; nil for none.
func (out *outputGrammar) constraint(m *Model) func() backends.Constraint {
	if out == nil {
		return nil
	}
	v := m.grammarVocab(out.render)
	g := out.g
	return func() backends.Constraint { return grammar.NewMatcher(g, v) }
}

// decodeOptions are how a choice's tokens become text: as continuations of
// the prompt, with the render tokens written out and, under a grammar
// (constrained), byte for byte what the grammar saw.
func decodeOptions(constrained bool, render []tokenizer.ID) tokenizer.DecodeOptions {
	return tokenizer.DecodeOptions{Continuation: true, NoCleanSpaces: constrained, Render: slices.Clone(render)}
}
