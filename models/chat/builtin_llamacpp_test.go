package chat

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// llamacppFixture is testdata/llamacpp.json: conversations and, for each of
// llama.cpp's built-in template names, the prompt llama.cpp's formatter made
// of each (testdata/README.md says how).
type llamacppFixture struct {
	Conversations []struct {
		Messages            []Message `json:"messages"`
		AddGenerationPrompt bool      `json:"add_generation_prompt"`
	} `json:"conversations"`
	Renders map[string][]string `json:"renders"`
}

// TestBuiltinMatchesLlamaCpp checks that every built-in template renders
// byte for byte what llama.cpp renders for the same name, and that every
// name llama.cpp knows is built in.
func TestBuiltinMatchesLlamaCpp(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "llamacpp.json"))
	if err != nil {
		t.Fatal(err)
	}
	var fx llamacppFixture
	if err := json.Unmarshal(raw, &fx); err != nil {
		t.Fatal(err)
	}
	names := BuiltinNames()
	for name := range fx.Renders {
		if !slices.Contains(names, name) {
			t.Errorf("llama.cpp's %q is not built in", name)
		}
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			want, ok := fx.Renders[name]
			if !ok {
				t.Fatal("no llama.cpp renders for this name")
			}
			src, _ := Builtin(name)
			tpl, err := Parse(src)
			if err != nil {
				t.Fatal(err)
			}
			for i, c := range fx.Conversations {
				// BOS and EOS texts must not matter: llama.cpp's formatter
				// writes its own literals and leaves BOS to the tokenizer.
				got, err := tpl.Render(Input{Messages: c.Messages, AddGenerationPrompt: c.AddGenerationPrompt, BOSToken: "<BOS>", EOSToken: "<EOS>"})
				if err != nil {
					t.Errorf("conversation %d: %v", i, err)
					continue
				}
				if got != want[i] {
					t.Errorf("conversation %d:\n got: %q\nwant: %q", i, got, want[i])
				}
			}
		})
	}
}
