package toolcall

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/ruvllm/ruvllm/internal/shared"
)

// familyOutput is an output in a family's format with what it holds
// (testdata/generate.py renders them with the families' real templates).
type familyOutput struct {
	Family   string `json:"family"`
	Template string `json:"template"`
	Output   string `json:"output"`
	Content  string `json:"content"`
	Calls    []struct {
		Name      string         `json:"name"`
		Arguments map[string]any `json:"arguments"`
	} `json:"calls"`
}

func loadOutputs(t *testing.T) []familyOutput {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "outputs.json"))
	if err != nil {
		t.Fatal(err)
	}
	var outs []familyOutput
	if err := json.Unmarshal(b, &outs); err != nil {
		t.Fatal(err)
	}
	return outs
}

// streamEvents feeds output to a parser in random pieces and gathers the
// calls and content, checking that each call's first event names it.
func streamEvents(t *testing.T, f Format, output string, r *rand.Rand) (string, []Call) {
	t.Helper()
	p := f.NewParser()
	var evs []Event
	for rest := output; rest != ""; {
		n := 1 + r.IntN(min(len(rest), 12))
		evs = append(evs, p.Add(rest[:n])...)
		rest = rest[n:]
	}
	evs = append(evs, p.Finish()...)
	calls := 0
	for _, e := range evs {
		switch {
		case e.Call < 0:
		case e.Call == calls:
			if e.Name == "" {
				t.Fatalf("call %d starts without its name: %+v", e.Call, e)
			}
			calls++
		case e.Call != calls-1 || e.Name != "":
			t.Fatalf("event %+v out of order after %d calls", e, calls)
		}
	}
	return Assemble(evs)
}

// TestFamilyOutputs parses what each family's real template writes for
// tool calls (so what its models were trained to write): whole and
// streamed in random pieces, the calls and content come back.
func TestFamilyOutputs(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, o := range loadOutputs(t) {
		t.Run(o.Template+"/"+o.Output[:min(len(o.Output), 30)], func(t *testing.T) {
			src, err := os.ReadFile(shared.Path(t, "templates", o.Template))
			if err != nil {
				t.Fatal(err)
			}
			f := Detect(string(src))
			if f.String() != o.Family {
				t.Fatalf("Detect gives %s, want %s", f, o.Family)
			}
			check := func(how, content string, calls []Call) {
				if content != o.Content {
					t.Errorf("%s: content %q, want %q", how, content, o.Content)
				}
				if len(calls) != len(o.Calls) {
					t.Fatalf("%s: %d calls %+v, want %d", how, len(calls), calls, len(o.Calls))
				}
				for i, c := range calls {
					var args map[string]any
					if err := json.Unmarshal([]byte(c.Arguments), &args); err != nil {
						t.Fatalf("%s: call %d arguments %q: %v", how, i, c.Arguments, err)
					}
					if c.Name != o.Calls[i].Name || !reflect.DeepEqual(args, o.Calls[i].Arguments) {
						t.Errorf("%s: call %d = %s %s, want %s %v", how, i, c.Name, c.Arguments, o.Calls[i].Name, o.Calls[i].Arguments)
					}
				}
			}
			content, calls := Parse(f, o.Output)
			check("whole", content, calls)
			for range 20 {
				content, calls := streamEvents(t, f, o.Output, r)
				check("streamed", content, calls)
			}
		})
	}
}

func TestParseCases(t *testing.T) {
	type call = Call
	tests := []struct {
		name    string
		f       Format
		out     string
		content string
		calls   []Call
	}{
		{"hermes text only", Hermes, "Paris is sunny < today > and <b>warm</b>.", "Paris is sunny < today > and <b>warm</b>.", nil},
		{"hermes text around a call", Hermes, "Checking.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1, {\"b\": \"}\"}]}}\n</tool_call>\nDone.",
			"Checking.\nDone.", []call{{"f", `{"a": [1, {"b": "}"}]}`}}},
		{"hermes without the closing tag", Hermes, "<tool_call>{\"name\":\"f\",\"arguments\":{}}", "", []call{{"f", "{}"}}},
		{"hermes arguments before the name", Hermes, "<tool_call>\n{\"arguments\": {\"x\": 1}, \"name\": \"g\"}\n</tool_call>", "", []call{{"g", `{"x": 1}`}}},
		{"hermes arguments as a string", Hermes, "<tool_call>\n{\"name\": \"g\", \"arguments\": \"{\\\"x\\\": 1}\"}\n</tool_call>", "", []call{{"g", `{"x": 1}`}}},
		{"hermes malformed is content", Hermes, "<tool_call>\nnot json\n</tool_call>", "<tool_call>\nnot json\n</tool_call>", nil},
		{"hermes cut short", Hermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"q\": \"ab", "", []call{{"f", `{"q": "ab`}}},
		{"llama3 python tag", Llama3, "<|python_tag|>{\"name\": \"search\", \"parameters\": {\"q\": \"x\"}}", "", []call{{"search", `{"q": "x"}`}}},
		{"llama3 two calls", Llama3, "{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"arguments\": {\"k\": null}}", "", []call{{"a", "{}"}, {"b", `{"k": null}`}}},
		{"llama3 JSON that is no call", Llama3, "{\"answer\": 42}", "{\"answer\": 42}", nil},
		{"llama3 text", Llama3, "The answer is {not a call}.", "The answer is {not a call}.", nil},
		{"llama3 a call after text is text", Llama3, "Sure: {\"name\": \"a\", \"parameters\": {}}", "Sure: {\"name\": \"a\", \"parameters\": {}}", nil},
		{"mistral list", Mistral, "[TOOL_CALLS] [{\"name\": \"a\", \"arguments\": {\"x\": 1}, \"id\": \"abc123XYZ\"}, {\"name\": \"b\", \"arguments\": {}}]", "",
			[]call{{"a", `{"x": 1}`}, {"b", "{}"}}},
		{"mistral named form", Mistral, "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Rome\"}[TOOL_CALLS]search[ARGS]{\"q\": \"x\"}", "",
			[]call{{"get_weather", `{"city": "Rome"}`}, {"search", `{"q": "x"}`}}},
		{"mistral text then calls", Mistral, "Let me see. [TOOL_CALLS][{\"name\": \"a\", \"arguments\": {}}]", "Let me see.", []call{{"a", "{}"}}},
		{"mistral brackets in text", Mistral, "Use [TOOL] and [CALLS] freely.", "Use [TOOL] and [CALLS] freely.", nil},
		// Command R7B's action, as its template writes an assistant's calls.
		{"command r7b action", CommandR, "<|START_ACTION|>[\n    {\"tool_call_id\": \"0\", \"tool_name\": \"get_weather\", \"parameters\": {\"city\": \"Tokyo\"}},\n    {\"tool_call_id\": \"1\", \"tool_name\": \"now\", \"parameters\": {}}\n]<|END_ACTION|>", "",
			[]call{{"get_weather", `{"city": "Tokyo"}`}, {"now", "{}"}}},
		{"command r7b text then an action", CommandR, "Let me check.<|START_ACTION|>[{\"tool_call_id\": \"0\", \"tool_name\": \"f\", \"parameters\": {\"a\": 1}}]<|END_ACTION|>", "Let me check.",
			[]call{{"f", `{"a": 1}`}}},
		{"command r7b action without its end", CommandR, "<|START_ACTION|>[{\"tool_call_id\": \"0\", \"tool_name\": \"f\", \"parameters\": {}}]", "", []call{{"f", "{}"}}},
		{"command r7b text", CommandR, "The answer is [1, 2].", "The answer is [1, 2].", nil},
		{"generic list", Generic, "{\"tool_calls\": [{\"name\": \"a\", \"arguments\": {\"x\": \"y\"}}, {\"name\": \"b\", \"arguments\": {}}]}", "",
			[]call{{"a", `{"x": "y"}`}, {"b", "{}"}}},
		{"generic single", Generic, "{\"tool_call\": {\"name\": \"a\", \"arguments\": {}}}", "", []call{{"a", "{}"}}},
		{"generic text", Generic, "Hello there.", "Hello there.", nil},
		{"generic other JSON", Generic, "{\"response\": \"hi\"}", "{\"response\": \"hi\"}", nil},
	}
	r := rand.New(rand.NewPCG(3, 4))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			content, calls := Parse(tc.f, tc.out)
			if content != tc.content || !reflect.DeepEqual(calls, tc.calls) {
				t.Errorf("Parse = %q %+v, want %q %+v", content, calls, tc.content, tc.calls)
			}
			for range 30 {
				content, calls := streamEvents(t, tc.f, tc.out, r)
				if content != tc.content || !reflect.DeepEqual(calls, tc.calls) {
					t.Fatalf("streamed = %q %+v, want %q %+v", content, calls, tc.content, tc.calls)
				}
			}
		})
	}
}
