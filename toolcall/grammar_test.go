package toolcall

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/ruvllm/ruvllm/grammar"
	"github.com/ruvllm/ruvllm/internal/schematest"
)

var testTools = []Tool{
	{Name: "get_weather", Parameters: []byte(`{"type":"object","properties":{"city":{"type":"string","maxLength":12},"unit":{"enum":["celsius","fahrenheit"]}},"required":["city"],"additionalProperties":false}`)},
	{Name: "search", Parameters: []byte(`{"type":"object","properties":{"query":{"type":"string"},"limit":{"type":"integer","minimum":1,"maximum":5}},"required":["query","limit"],"additionalProperties":false}`)},
	{Name: "now"},
}

// TestGrammarCalls walks each format's grammar of required calls at
// random: every output parses back into calls of the tools, at most one
// unless parallel, with arguments valid under their schemas.
func TestGrammarCalls(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	var pieces []string
	for b := range 256 {
		pieces = append(pieces, string([]byte{byte(b)}))
	}
	pieces = append(pieces, "<tool_call>", "</tool_call>", "[TOOL_CALLS]", "<|START_ACTION|>", "<|END_ACTION|>", `{"name": "`, `", "arguments": `, "get_weather", "search", `"city"`, "celsius", "\n")
	v := grammar.NewVocabulary(pieces, nil)
	validators := map[string]*jsonschema.Schema{}
	for _, tool := range testTools {
		params := string(tool.Parameters)
		if params == "" {
			params = `{"type":"object"}`
		}
		validators[tool.Name] = schematest.Compile(t, params)
	}
	mask := make([]uint64, v.MaskWords())
	for _, f := range []Format{Generic, Hermes, Llama3, Mistral, CommandR} {
		for _, parallel := range []bool{false, true} {
			g, err := f.Grammar(testTools, parallel)
			if err != nil {
				t.Fatal(err)
			}
			many := false
			for walk := range 60 {
				m := grammar.NewMatcher(g, v)
				var out strings.Builder
				for left := 300; left > 0 && !m.Complete(); left-- {
					if !m.Mask(mask, left) {
						break // whole, and nothing more fits
					}
					var allowed []int32
					for id := range pieces {
						if mask[id>>6]&(1<<(id&63)) != 0 {
							allowed = append(allowed, int32(id))
						}
					}
					id := allowed[r.IntN(len(allowed))]
					m.Accept(id)
					out.WriteString(pieces[id])
				}
				if !m.Matched() {
					t.Fatalf("%s walk %d did not finish: %q", f, walk, out.String())
				}
				content, calls := Parse(f, out.String())
				if content != "" || len(calls) == 0 || (!parallel && len(calls) > 1) {
					t.Fatalf("%s parallel %v: %q gives content %q and %d calls", f, parallel, out.String(), content, len(calls))
				}
				many = many || len(calls) > 1
				for _, c := range calls {
					val := validators[c.Name]
					if val == nil {
						t.Fatalf("%s: a call of %q", f, c.Name)
					}
					schematest.Check(t, val, c.Arguments)
				}
			}
			if parallel && f != Llama3 && !many {
				t.Errorf("%s: no walk made several calls", f)
			}
		}
	}
	if _, err := Hermes.Grammar(nil, true); err == nil {
		t.Error("a grammar of no tools")
	}
	if _, err := Hermes.Grammar([]Tool{{Name: "x", Parameters: []byte(`{"not":{}}`)}}, true); err == nil {
		t.Error("parameters the compiler cannot follow were taken")
	}
}
