package chat

import (
	"encoding/json"
	"errors"
	"os"
	"testing"
)

// snippet is one small template of testdata/snippets.json with the render
// Python Jinja2 made of it, or the error it raised.
type snippet struct {
	Name     string                     `json:"name"`
	Template string                     `json:"template"`
	Vars     map[string]json.RawMessage `json:"vars"`
	Expected *string                    `json:"expected"`
	Error    *string                    `json:"error"`
}

func (s snippet) input(t *testing.T) Input {
	in := Input{Now: fixedNow, Extra: map[string]any{}}
	for k, v := range s.Vars {
		if k != "messages" {
			in.Extra[k] = v
			continue
		}
		var msgs []map[string]json.RawMessage
		if err := json.Unmarshal(v, &msgs); err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			msg := Message{}
			for k, v := range m {
				msg[k] = v
			}
			in.Messages = append(in.Messages, msg)
		}
	}
	return in
}

func TestSnippets(t *testing.T) { runSnippets(t, "testdata/snippets.json") }

// TestExpressions renders random expressions whose Python renders
// testdata/generate.py recorded.
func TestExpressions(t *testing.T) {
	runSnippets(t, "testdata/expressions.json")
	runSnippets(t, "testdata/expressions_bare.json")
}

func runSnippets(t *testing.T, path string) {
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var snippets []snippet
	if err := json.Unmarshal(raw, &snippets); err != nil {
		t.Fatal(err)
	}
	for _, s := range snippets {
		t.Run(s.Name, func(t *testing.T) {
			var got string
			tpl, err := Parse(s.Template)
			if err == nil {
				got, err = tpl.Render(s.input(t))
			}
			switch {
			case s.Error != nil:
				if err == nil {
					t.Errorf("want error %q, got render %q", *s.Error, got)
				} else if !errors.Is(err, ErrTemplate) {
					t.Errorf("error %v does not wrap ErrTemplate", err)
				}
			case err != nil:
				t.Errorf("want %q, got error %v", *s.Expected, err)
			case got != *s.Expected:
				t.Errorf("render differs\n got: %q\nwant: %q", got, *s.Expected)
			}
		})
	}
}

func TestTestdataTemplates(t *testing.T) {
	runCaseDir(t, "testdata/templates")
}
