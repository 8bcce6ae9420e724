package models

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/rs/zerolog"

	"github.com/ruvllm/ruvllm/models/chat"
	"github.com/ruvllm/ruvllm/models/gguf"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// Model is a loaded model file: the mapping, its hyperparameters, its
// tokenizer and the chat template that turns messages into a prompt.
type Model struct {
	Path      string
	File      *gguf.File
	Config    *Config
	Tokenizer *tokenizer.Tokenizer
	// Template renders chat messages; TemplateSource says where it came
	// from: "model", a file path, a built-in name such as "chatml",
	// InlineTemplate or FallbackTemplate.
	Template       *chat.Template
	TemplateSource string
}

// LoadOptions are the choices made when loading a model; the zero value
// loads the model's own chat template and logs nothing.
type LoadOptions struct {
	// ChatTemplate overrides the model's template: the name of a built-in
	// template ("chatml", ...), a file path, or the template's Jinja text
	// (see ChatTemplateOverride).
	ChatTemplate string
	// VocabOnly loads the tokenizer and template of a file whose
	// architecture we cannot run (a vocab-only file); Config is then nil.
	VocabOnly bool
	Logger    zerolog.Logger
}

// Load opens path and reads everything needed to run it.
func Load(path string, o LoadOptions) (*Model, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	m := &Model{Path: path, File: f}
	if err := m.load(o); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

func (m *Model) load(o LoadOptions) error {
	var err error
	if m.Config, err = ReadConfig(m.File); err != nil && !o.VocabOnly {
		return err
	}
	if m.Tokenizer, err = tokenizer.FromGGUF(m.File); err != nil {
		return fmt.Errorf("tokenizer: %w", err)
	}
	src, name, err := templateSource(m.File, o.ChatTemplate)
	if err != nil {
		return err
	}
	if name == FallbackTemplate {
		o.Logger.Debug().Str("model", m.ID()).Msg("the model has no chat template (tokenizer.chat_template); ChatML will be used")
	}
	if m.Template, err = chat.Parse(src); err != nil {
		return fmt.Errorf("chat template (%s): %w", name, err)
	}
	m.TemplateSource = name
	return nil
}

// templateSource picks the chat template: the override, else the model's
// own, else ChatML.
func templateSource(f *gguf.File, override string) (src, name string, err error) {
	if override != "" {
		return ChatTemplateOverride(override)
	}
	if s, ok := f.GetString("tokenizer.chat_template"); ok && strings.TrimSpace(s) != "" {
		return s, "model", nil
	}
	s, _ := chat.Builtin("chatml")
	return s, FallbackTemplate, nil
}

// ChatTemplateOverride resolves a --chat-template (or chat_template) value
// as llama-server does: a built-in name (chat.BuiltinNames), else a file,
// else, when it looks like Jinja (it has "{%" or "{{"), the template text
// itself. name says which: the value, or InlineTemplate.
func ChatTemplateOverride(value string) (src, name string, err error) {
	if s, ok := chat.Builtin(value); ok {
		return s, value, nil
	}
	b, err := os.ReadFile(value)
	if err == nil {
		return string(b), value, nil
	}
	if strings.Contains(value, "{%") || strings.Contains(value, "{{") {
		return value, InlineTemplate, nil
	}
	// What looks like a path is a file that is missing, and one word a
	// mistyped name; any other text is a template (one without tags
	// renders as itself), as llama-server takes it.
	if strings.ContainsRune(value, filepath.Separator) || strings.HasSuffix(value, ".jinja") || !strings.ContainsAny(strings.TrimSpace(value), " \t\n") {
		return "", "", fmt.Errorf("chat template %q is neither a built-in name (%s), a readable file nor Jinja text: %w", value, strings.Join(chat.BuiltinNames(), ", "), err)
	}
	return value, InlineTemplate, nil
}

// InlineTemplate is the TemplateSource of a template given as its text.
const InlineTemplate = "inline"

// FallbackTemplate is the TemplateSource of a model that has no chat
// template of its own and renders chats as ChatML.
const FallbackTemplate = "chatml (fallback: the model has no template)"

// Close releases the file mapping.
func (m *Model) Close() error { return m.File.Close() }

// ID is the model's name in the API: the file name without ".gguf".
func (m *Model) ID() string { return strings.TrimSuffix(filepath.Base(m.Path), ".gguf") }

// RenderChat renders in with the model's template, passing the vocab's BOS
// and EOS texts as bos_token and eos_token (where in leaves them empty), as
// transformers does.
func (m *Model) RenderChat(in chat.Input) (string, error) {
	v := m.Tokenizer.Vocab()
	if in.BOSToken == "" {
		in.BOSToken = tokenText(v, v.BOS)
	}
	if in.EOSToken == "" {
		in.EOSToken = tokenText(v, v.EOS)
	}
	return m.Template.Render(in)
}

// ChatTemplateSource is the source of the model's chat template, from
// which the API tells how the model writes tool calls.
func (m *Model) ChatTemplateSource() string { return m.Template.Source() }

func tokenText(v *tokenizer.Vocab, id tokenizer.ID) string {
	if id < 0 || int(id) >= len(v.Tokens) {
		return ""
	}
	return v.Tokens[id]
}
