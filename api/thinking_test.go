package api

import (
	"strings"
	"testing"
)

// TestThinkingSwitchOnEveryProtocol: each protocol's way of turning a
// thinking model's thinking off reaches Qwen3's real template, which then
// renders its empty think block, and its way of leaving it on does not.
func TestThinkingSwitchOnEveryProtocol(t *testing.T) {
	fs := newFakeServerWith(t, Options{}, qwen3Chat(t), nil)
	fs.eng.script = textScript(fs.tok, "<think>\nHm.\n</think>\n\nHello!")
	const off = "<|im_start|>assistant\n<think>\n\n</think>\n\n"
	const on = "<|im_start|>assistant\n"
	msgs := `"messages":[{"role":"user","content":"Hi"}]`
	for _, tc := range []struct {
		name, path, body, end string
	}{
		{"openai kwargs", "/v1/chat/completions", `{` + msgs + `,"chat_template_kwargs":{"enable_thinking":false}}`, off},
		{"openai effort", "/v1/chat/completions", `{` + msgs + `,"reasoning_effort":"none"}`, off},
		{"openai default", "/v1/chat/completions", `{` + msgs + `}`, on},
		{"responses effort", "/v1/responses", `{"input":"Hi","reasoning":{"effort":"none"}}`, off},
		{"responses default", "/v1/responses", `{"input":"Hi"}`, on},
		{"anthropic disabled", "/v1/messages", `{"model":"fake-model","max_tokens":16,` + msgs + `,"thinking":{"type":"disabled"}}`, off},
		{"anthropic enabled", "/v1/messages", `{"model":"fake-model","max_tokens":2048,` + msgs + `,"thinking":{"type":"enabled","budget_tokens":1024}}`, on},
		{"ollama think false", "/api/chat", `{"model":"fake-model","stream":false,` + msgs + `,"think":false}`, off},
		{"ollama think true", "/api/chat", `{"model":"fake-model","stream":false,` + msgs + `,"think":true}`, on},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := len(fs.eng.requests())
			resp, b := do(t, "POST", fs.URL+tc.path, tc.body)
			if resp.StatusCode != 200 {
				t.Fatalf("%d %s", resp.StatusCode, b)
			}
			r := fs.eng.requests()
			if len(r) != n+1 {
				t.Fatalf("%d engine requests, want %d", len(r), n+1)
			}
			if p := fs.tok.Decode(r[n].Prompt); !strings.HasSuffix(p, tc.end) {
				t.Errorf("prompt ends %q, want %q", p[max(0, len(p)-60):], tc.end)
			}
		})
	}
	// llama-server's /apply-template shows the prompt itself.
	resp, b := do(t, "POST", fs.URL+"/apply-template", `{`+msgs+`,"chat_template_kwargs":{"enable_thinking":false}}`)
	if resp.StatusCode != 200 || !strings.Contains(string(b), `\u003cthink\u003e\n\n\u003c/think\u003e`) && !strings.Contains(string(b), `<think>\n\n</think>`) {
		t.Errorf("/apply-template: %d %s", resp.StatusCode, b)
	}
}
