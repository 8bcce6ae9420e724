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

// Builtin returns the named built-in template, for --chat-template: chatml,
// llama2, llama3, mistral, zephyr, gemma, phi3, phi4 or vicuna. Case,
// hyphens and dots in the name are ignored (Llama-3 is llama3).
func Builtin(name string) (string, bool) {
	key := strings.NewReplacer("-", "", "_", "", ".", "", " ", "").Replace(strings.ToLower(name))
	if !slices.Contains(BuiltinNames(), key) {
		return "", false
	}
	src, err := builtinFiles.ReadFile("builtin/" + key + ".jinja")
	if err != nil {
		return "", false
	}
	return string(src), true
}

// BuiltinNames lists the names Builtin knows, sorted.
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
