package chat

import (
	"os"
	"testing"
)

// BenchmarkRenderQwen3 renders a 40-message conversation with tools through
// a real template, the work of one chat request.
func BenchmarkRenderQwen3(b *testing.B) {
	src, err := os.ReadFile("testdata/templates/Qwen-Qwen3-0.6B.jinja")
	if err != nil {
		b.Fatal(err)
	}
	tpl, err := Parse(string(src))
	if err != nil {
		b.Fatal(err)
	}
	in := Input{AddGenerationPrompt: true, Tools: []any{map[string]any{
		"type": "function",
		"function": map[string]any{"name": "f", "description": "d", "parameters": map[string]any{
			"type": "object", "properties": map[string]any{"x": map[string]any{"type": "string"}}}},
	}}}
	for i := range 20 {
		in.Messages = append(in.Messages,
			Message{"role": "user", "content": "question number " + string(rune('a'+i))},
			Message{"role": "assistant", "content": "<think>\nhmm\n</think>\n\nanswer"})
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tpl.Render(in); err != nil {
			b.Fatal(err)
		}
	}
}
