package chat

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ruvllm/ruvllm/internal/shared"
)

// renderCase is one entry of a NAME.cases.json file: an input and either the
// exact render Python Jinja2 made of it or the fact that it raised.
type renderCase struct {
	Messages            []map[string]json.RawMessage `json:"messages"`
	Tools               []json.RawMessage            `json:"tools"`
	AddGenerationPrompt bool                         `json:"add_generation_prompt"`
	BOSToken            string                       `json:"bos_token"`
	EOSToken            string                       `json:"eos_token"`
	// Kwargs are extra render variables as a client sends them in
	// chat_template_kwargs; older files name them "extra".
	Kwargs   map[string]json.RawMessage `json:"kwargs"`
	Extra    map[string]json.RawMessage `json:"extra"`
	Expected *string                    `json:"expected"`
	Error    *string                    `json:"error"`
}

// fixedNow is the clock the reference renders were made with.
func fixedNow() time.Time { return time.Date(2026, 1, 15, 0, 0, 0, 0, time.UTC) }

func (c renderCase) input() Input {
	in := Input{
		AddGenerationPrompt: c.AddGenerationPrompt,
		BOSToken:            c.BOSToken,
		EOSToken:            c.EOSToken,
		Now:                 fixedNow,
	}
	for _, m := range c.Messages {
		msg := Message{}
		for k, v := range m {
			msg[k] = v
		}
		in.Messages = append(in.Messages, msg)
	}
	if c.Tools != nil {
		in.Tools = []any{}
		for _, t := range c.Tools {
			in.Tools = append(in.Tools, t)
		}
	}
	for _, extra := range []map[string]json.RawMessage{c.Extra, c.Kwargs} {
		for k, v := range extra {
			if in.Extra == nil {
				in.Extra = map[string]any{}
			}
			in.Extra[k] = v
		}
	}
	return in
}

// runCaseDir renders every NAME.jinja in dir against its NAME.cases.json.
func runCaseDir(t *testing.T, dir string) {
	files, err := filepath.Glob(filepath.Join(dir, "*.cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no cases in %s", dir)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".cases.json")
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(filepath.Join(dir, name+".jinja"))
			if err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var cases []renderCase
			if err := json.Unmarshal(raw, &cases); err != nil {
				t.Fatal(err)
			}
			tpl, err := Parse(string(src))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			for i, c := range cases {
				got, err := tpl.Render(c.input())
				switch {
				case c.Error != nil:
					if err == nil {
						t.Errorf("case %d: want error %q, got render %q", i, *c.Error, got)
					} else if !errors.Is(err, ErrTemplate) {
						t.Errorf("case %d: error %v does not wrap ErrTemplate", i, err)
					}
				case err != nil:
					t.Errorf("case %d: %v", i, err)
				case got != *c.Expected:
					t.Errorf("case %d: render differs\n got: %q\nwant: %q", i, got, *c.Expected)
				}
			}
		})
	}
}

func TestSharedTemplates(t *testing.T) {
	runCaseDir(t, shared.Path(t, "templates"))
}
