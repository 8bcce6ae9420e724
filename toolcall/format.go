// Package toolcall knows how model families write tool calls: which
// format a chat template teaches (Detect), the grammar of an output that
// must call a tool (Format.Grammar), and how to find the calls in an output
// as it streams (Parser): Hermes and Qwen's <tool_call> JSON, Llama 3.x's
// JSON, Mistral's [TOOL_CALLS], Command R7B's actions, and a generic JSON
// form for templates that know no tools.
package toolcall

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/ruvllm/ruvllm/grammar"
)

// Format is how a model family writes tool calls in its output.
type Format int

// The formats.
const (
	// Generic is {"tool_calls": [{"name": ..., "arguments": {...}}]}, which
	// a system message describes to models whose template knows no tools.
	Generic Format = iota
	// Hermes is <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>,
	// one block per call (Hermes 2 Pro and 3, Qwen 2.5 and 3).
	Hermes
	// Llama3 is {"name": ..., "parameters": {...}} as the whole output,
	// maybe after <|python_tag|> (Llama 3.1, 3.2, 3.3).
	Llama3
	// Mistral is [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]
	// (Mistral 7B v0.3, Nemo), or [TOOL_CALLS]name[ARGS]{...} (later ones).
	Mistral
	// CommandR is Command R7B's <|START_ACTION|>[{"tool_call_id": "0",
	// "tool_name": ..., "parameters": {...}}, ...]<|END_ACTION|>.
	CommandR
)

func (f Format) String() string {
	return [...]string{"generic", "hermes", "llama3", "mistral", "command-r7b"}[f]
}

// Command R7B's markers of an action (its list of calls).
const (
	crActionOpen  = "<|START_ACTION|>"
	crActionClose = "<|END_ACTION|>"
)

// Detect tells the format a chat template teaches from its source: the
// markers it writes calls with. A template that writes calls some other
// way, or none at all, gets Generic.
func Detect(template string) Format {
	switch {
	case strings.Contains(template, "<tool_call>"):
		return Hermes
	case strings.Contains(template, crActionOpen):
		return CommandR
	case strings.Contains(template, "[TOOL_CALLS]"):
		return Mistral
	case strings.Contains(template, "<|start_header_id|>") && strings.Contains(template, `"parameters"`):
		return Llama3
	}
	return Generic
}

// Markers are the texts of the special tokens the format writes calls
// with: they must be written out in the output even when the vocabulary
// has them as control tokens.
func (f Format) Markers() []string {
	switch f {
	case Hermes:
		return []string{"<tool_call>", "</tool_call>"}
	case Llama3:
		return []string{"<|python_tag|>"}
	case Mistral:
		return []string{"[TOOL_CALLS]", "[ARGS]"}
	case CommandR:
		return []string{crActionOpen, crActionClose}
	}
	return nil
}

// IDLength is the length of the call ids a format's templates take back:
// Mistral's refuse anything but 9 letters and digits; 0 is any.
func (f Format) IDLength() int {
	if f == Mistral {
		return 9
	}
	return 0
}

// Tool is a function the model may call.
type Tool struct {
	Name string
	// Parameters is the JSON schema of the arguments; nil takes any
	// object.
	Parameters []byte
}

// Call is a tool call found in an output.
type Call struct {
	Name string
	// Arguments is the JSON text of the arguments as the model wrote them
	// (an object, normally).
	Arguments string
}

// SystemPrompt is what a model whose template knows no tools (Generic) is
// told about them, as a system message: the tools and the JSON to answer
// with to call them.
func SystemPrompt(tools []any) string {
	var b strings.Builder
	b.WriteString("You can call these tools:\n")
	for _, t := range tools {
		j, _ := json.Marshal(t)
		b.Write(j)
		b.WriteByte('\n')
	}
	b.WriteString(`To call tools, answer with nothing but this JSON: {"tool_calls": [{"name": "<tool name>", "arguments": {<arguments>}}]}`)
	return b.String()
}

// MaxParallelCalls bounds the calls of one output under Grammar, so that a
// model that would go on calling ends.
const MaxParallelCalls = 8

// Grammar is the grammar of an output that calls tools of the list, in the
// format: at least one call, at most one unless parallel (then at most
// MaxParallelCalls; Llama 3.x writes one call at a time). Each call names a
// tool and gives arguments its parameters schema accepts.
func (f Format) Grammar(tools []Tool, parallel bool) (*grammar.Grammar, error) {
	return f.GrammarFor(tools, parallel, nil)
}

// GrammarFor is Grammar for a vocabulary in which isToken says which of
// the format's markers are one token each: a budget of tokens then
// reserves one token for such a marker rather than one per byte, so that a
// call cut short by max_tokens still closes.
func (f Format) GrammarFor(tools []Tool, parallel bool, isToken func(marker string) bool) (*grammar.Grammar, error) {
	marker := func(s string) *grammar.Expr {
		if isToken != nil && isToken(s) {
			return grammar.Token(s)
		}
		return grammar.Lit(s)
	}
	if len(tools) == 0 {
		return nil, fmt.Errorf("toolcall: no tools to call")
	}
	b := grammar.NewBuilder()
	argsKey := `"arguments"`
	if f == Llama3 || f == CommandR {
		argsKey = `"parameters"`
	}
	var alts []*grammar.Expr
	for _, t := range tools {
		params := t.Parameters
		if params == nil {
			params = []byte(`{"type":"object"}`)
		}
		args, err := b.JSONSchema(params)
		if err != nil {
			return nil, fmt.Errorf("toolcall: the parameters of %s: %w", t.Name, err)
		}
		name, _ := json.Marshal(t.Name)
		if f == CommandR {
			// Its calls carry an id first: the call's number, as the
			// template numbers them.
			id := grammar.Repeat(grammar.Byte(grammar.Range('0', '9')), 1, 3)
			alts = append(alts, grammar.Seq(grammar.Lit(`{"tool_call_id": "`), id, grammar.Lit(`", "tool_name": `+string(name)+`, `+argsKey+`: `), args, grammar.Lit("}")))
			continue
		}
		alts = append(alts, grammar.Seq(grammar.Lit(`{"name": `+string(name)+`, `+argsKey+`: `), args, grammar.Lit("}")))
	}
	call := grammar.Alt(alts...)
	many := func(sep string) *grammar.Expr {
		if !parallel {
			return call
		}
		return grammar.Seq(call, grammar.Repeat(grammar.Seq(grammar.Lit(sep), call), 0, MaxParallelCalls-1))
	}
	var root *grammar.Expr
	switch f {
	case Hermes:
		block := grammar.Seq(marker("<tool_call>"), grammar.Lit("\n"), call, grammar.Lit("\n"), marker("</tool_call>"))
		root = block
		if parallel {
			root = grammar.Seq(block, grammar.Repeat(grammar.Seq(grammar.Lit("\n"), block), 0, MaxParallelCalls-1))
		}
	case Llama3:
		root = call
	case Mistral:
		root = grammar.Seq(marker("[TOOL_CALLS]"), grammar.Lit("["), many(", "), grammar.Lit("]"))
	case CommandR:
		root = grammar.Seq(marker(crActionOpen), grammar.Lit("["), many(", "), grammar.Lit("]"), marker(crActionClose))
	default:
		root = grammar.Seq(grammar.Lit(`{"tool_calls": [`), many(", "), grammar.Lit("]}"))
	}
	return b.Compile(root)
}
