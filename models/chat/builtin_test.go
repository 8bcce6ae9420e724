package chat

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func TestBuiltinTemplates(t *testing.T) {
	names := BuiltinNames()
	if len(names) < 7 {
		t.Fatalf("BuiltinNames() = %v, want at least 7", names)
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			src, ok := Builtin(name)
			if !ok {
				t.Fatalf("Builtin(%q) not found", name)
			}
			tpl, err := Parse(src)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile(filepath.Join("testdata", "builtin", name+".cases.json"))
			if err != nil {
				t.Fatal(err)
			}
			var cases []renderCase
			if err := json.Unmarshal(raw, &cases); err != nil {
				t.Fatal(err)
			}
			if len(cases) == 0 {
				t.Fatal("no cases")
			}
			for i, c := range cases {
				got, err := tpl.Render(c.input())
				switch {
				case c.Error != nil:
					if err == nil {
						t.Errorf("case %d: want error %q, got %q", i, *c.Error, got)
					}
				case err != nil:
					t.Errorf("case %d: %v", i, err)
				case got != *c.Expected:
					t.Errorf("case %d:\n got: %q\nwant: %q", i, got, *c.Expected)
				}
			}
		})
	}
}

func TestBuiltinLookup(t *testing.T) {
	if src, ok := Builtin("chatml"); !ok || src != ChatML {
		t.Errorf("Builtin(chatml) differs from ChatML")
	}
	tests := []struct {
		name, want string // want "" means not found
	}{
		{"llama3", "llama3"},
		{"Llama-3", "llama3"},
		{"LLAMA3", "llama3"},
		{"llama_3", "llama3"},
		{"phi-3.", "phi3"},
		{"Gemma", "gemma"},
		{"command-r", "command-r"},
		{"Command_R", "command-r"},
		{"commandr", "command-r"},
		{"mistral-v7", "mistral-v7"},
		{"Mistral-V7-Tekken", "mistral-v7-tekken"},
		{"mistral", "mistral"},
		{"llama2-sys", "llama2-sys"},
		{"llama2-sys-bos", "llama2-sys-bos"},
		{"llama2_sys_bos", "llama2-sys-bos"},
		{"llama2-sys-strip", "llama2-sys-strip"},
		{"seed_oss", "seed_oss"},
		{"seed-oss", "seed_oss"},
		{"gpt-oss", "gpt-oss"},
		{"granite", "granite"},
		{"granite-4.0", "granite-4.0"},
		{"Granite_4.1", "granite-4.1"},
		{"", ""},
		{"nope", ""},
		{"../template", ""},
		{"chatml.jinja", ""},
		{"llama2-sys-", "llama2-sys"},
		{"mistral-v", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Builtin(tt.name)
			if tt.want == "" {
				if ok {
					t.Errorf("Builtin(%q) found", tt.name)
				}
				return
			}
			want, err := builtinFiles.ReadFile("builtin/" + tt.want + ".jinja")
			if err != nil {
				t.Fatal(err)
			}
			if !ok || got != string(want) {
				t.Errorf("Builtin(%q) is not %s", tt.name, tt.want)
			}
		})
	}
}

// TestBuiltinNamesDistinct checks that no two built-in names are the same
// once case and separators are ignored, so every name stays reachable.
func TestBuiltinNamesDistinct(t *testing.T) {
	seen := map[string]string{}
	for _, n := range BuiltinNames() {
		k := builtinKey(n)
		if other, ok := seen[k]; ok {
			t.Errorf("%s and %s are the same name to Builtin", other, n)
		}
		seen[k] = n
	}
}
