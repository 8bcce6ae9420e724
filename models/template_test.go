package models

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ruvllm/ruvllm/models/chat"
)

// TestChatTemplateOverride resolves --chat-template values as llama-server
// does: a built-in name, else a file, else Jinja text given inline.
func TestChatTemplateOverride(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "t.jinja")
	if err := os.WriteFile(file, []byte("{{ 'from the file' }}"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A file named like a built-in template loses to it, as in llama-server.
	if err := os.WriteFile(filepath.Join(dir, "chatml"), []byte("not this"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	chatml, _ := chat.Builtin("chatml")
	inline := "{%- for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
	tests := []struct {
		value, src, name, err string
	}{
		{value: "chatml", src: chatml, name: "chatml"},
		{value: "Mistral-V7", name: "Mistral-V7"},
		{value: file, src: "{{ 'from the file' }}", name: file},
		{value: "t.jinja", src: "{{ 'from the file' }}", name: "t.jinja"},
		{value: inline, src: inline, name: InlineTemplate},
		{value: "{{ bos_token }}", src: "{{ bos_token }}", name: InlineTemplate},
		{value: "nope", err: "neither a built-in name"},
		{value: "This is not a chat template, it is", name: InlineTemplate, src: "This is not a chat template, it is"},
		{value: "missing.jinja", err: "neither a built-in name"},
		{value: dir, err: "neither a built-in name"},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			src, name, err := ChatTemplateOverride(tt.value)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if name != tt.name || (tt.src != "" && src != tt.src) {
				t.Errorf("got (%q, %q), want (%q, %q)", src, name, tt.src, tt.name)
			}
		})
	}
}

// TestLoadInlineTemplate loads a model with its template given as text.
func TestLoadInlineTemplate(t *testing.T) {
	s, _ := ShapeByName("tiny")
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	f32, _ := ParseFileType("F32")
	if err := Synthesize(path, s, f32, 1, 1); err != nil {
		t.Fatal(err)
	}
	m, err := Load(path, LoadOptions{ChatTemplate: "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.TemplateSource != InlineTemplate {
		t.Errorf("TemplateSource = %q", m.TemplateSource)
	}
	got, err := m.RenderChat(chat.Input{Messages: []map[string]any{{"role": "user", "content": "hi"}}, AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	if got != "<user>hi" {
		t.Errorf("render = %q", got)
	}
}
