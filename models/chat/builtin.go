package chat

import (
	"embed"
	"slices"
	"strings"
)

// ChatML is the ChatML template, used for a model that ships none.
const ChatML = `{%- for message in messages %}
    {{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
`

//go:embed builtin/*.jinja
var builtinFiles embed.FS

// Builtin returns the named built-in template, for --chat-template. The
// names are llama.cpp's (llama-server --chat-template NAME): chatml, llama2,
// llama2-sys, llama2-sys-bos, llama2-sys-strip, mistral-v1, mistral-v3,
// mistral-v3-tekken, mistral-v7, mistral-v7-tekken, llama3, llama4,
// command-r, deepseek3, gemma, phi4, ... (BuiltinNames lists them all), plus
// mistral, which llama.cpp formats as llama2. Each renders the prompt text
// llama.cpp's built-in formatter makes for the same messages, BOS left to the
// tokenizer as there. Case is ignored, and so are hyphens, underscores, dots
// and spaces where they do not tell two names apart (Llama-3 is llama3,
// command_r is command-r; llama2-sys-bos stays distinct from llama2-sys).
func Builtin(name string) (string, bool) {
	file, ok := builtinFile(name)
	if !ok {
		return "", false
	}
	src, err := builtinFiles.ReadFile("builtin/" + file + ".jinja")
	if err != nil {
		return "", false
	}
	return string(src), true
}

// builtinFile finds the file of a built-in name: the name as llama.cpp
// spells it, or else the one name equal to it once separators are dropped.
func builtinFile(name string) (string, bool) {
	names := BuiltinNames()
	name = strings.ToLower(strings.TrimSpace(name))
	if slices.Contains(names, name) {
		return name, true
	}
	key := builtinKey(name)
	if key == "" {
		return "", false
	}
	found := ""
	for _, n := range names {
		if builtinKey(n) == key {
			if found != "" {
				return "", false
			}
			found = n
		}
	}
	return found, found != ""
}

// builtinKey is a name without case and separators.
func builtinKey(name string) string {
	return strings.NewReplacer("-", "", "_", "", ".", "", " ", "").Replace(strings.ToLower(name))
}

// BuiltinNames lists the names Builtin knows, sorted, as llama.cpp spells
// them.
func BuiltinNames() []string {
	entries, err := builtinFiles.ReadDir("builtin")
	if err != nil {
		return nil
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".jinja"))
	}
	slices.Sort(names)
	return names
}
