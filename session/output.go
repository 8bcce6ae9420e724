package session

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/grammar"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// JSONObjectOutput is any JSON object.
func JSONObjectOutput() *Output { return &Output{g: grammar.JSONObject()} }

// JSONSchemaOutput is JSON that follows schema; a schema the grammar
// compiler cannot follow is a 400 about param that says where and why.
func JSONSchemaOutput(schema []byte, param string) (*Output, error) {
	g, err := grammar.JSONSchema(schema)
	if err != nil {
		return nil, SchemaError(err, param)
	}
	return &Output{g: g}, nil
}

// SchemaError is the 400 of a schema or grammar the compiler refused,
// about the request field param.
func SchemaError(err error, param string) *Error {
	var se *grammar.SchemaError
	if errors.As(err, &se) {
		return Invalid(param, CodeInvalidValue, "%s: %s", param+se.Path, se.Msg)
	}
	return Invalid(param, CodeInvalidValue, "%s: %v", param, err)
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
func (m *Model) grammarVocab(o tokenizer.DecodeOptions) *grammar.Vocabulary {
	var key strings.Builder
	if o.RenderSpecial {
		key.WriteString("all;")
	}
	for _, id := range o.Render {
		key.WriteString(strconv.Itoa(int(id)) + ",")
	}
	c := m.vocabs
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.m[key.String()]; ok {
		return v
	}
	t := m.Tokenizer
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
	c.m[key.String()] = v
	return v
}

// minTokens is the fewest tokens of v an output of out takes: its
// shortest match (a marker that is one token counted once) in the
// vocabulary's longest tokens.
func (out *Output) minTokens(v *grammar.Vocabulary) int {
	n := out.g.MinLength()
	per := max(v.MaxTokenBytes(), 1)
	return (n + per - 1) / per
}

// constraint makes the engine's constraint factory for out on model m,
// whose choices decode with o; nil for none.
func (out *Output) constraint(m *Model, o tokenizer.DecodeOptions) func() backends.Constraint {
	if out == nil {
		return nil
	}
	v := m.grammarVocab(o)
	g := out.g
	return func() backends.Constraint { return grammar.NewMatcher(g, v) }
}

// decodeOptions are how a choice's tokens become text: as continuations of
// the prompt, with the render tokens (markers of tool calls and reasoning)
// written out and, under a grammar (constrained), byte for byte what the
// grammar saw; keepSpecial writes every control token.
func decodeOptions(constrained, keepSpecial bool, render []tokenizer.ID) tokenizer.DecodeOptions {
	r := slices.Clone(render)
	slices.Sort(r)
	return tokenizer.DecodeOptions{Continuation: true, NoCleanSpaces: constrained, RenderSpecial: keepSpecial, Render: slices.Compact(r)}
}

// GBNFOutput is text that follows the GBNF grammar src (llama.cpp's
// grammar language, as llama-server's grammar field takes it), given in the
// field param.
func GBNFOutput(src, param string) (*Output, error) {
	g, err := grammar.GBNF(src)
	if err != nil {
		return nil, Invalid(param, CodeInvalidValue, "%s: %v", param, err)
	}
	return &Output{g: g}, nil
}

// RegexOutput is text that the regular expression (Python's syntax, as
// vLLM's guided_regex takes it) matches as a whole.
func RegexOutput(pattern, param string) (*Output, error) {
	g, err := grammar.Regex(pattern)
	if err != nil {
		return nil, Invalid(param, CodeInvalidValue, "%s: %v", param, err)
	}
	return &Output{g: g}, nil
}

// ChoiceOutput is exactly one of options (vLLM's guided_choice).
func ChoiceOutput(options []string, param string) (*Output, error) {
	g, err := grammar.Choice(options)
	if err != nil {
		return nil, Invalid(param, CodeInvalidValue, "%s: %v", param, err)
	}
	return &Output{g: g}, nil
}
