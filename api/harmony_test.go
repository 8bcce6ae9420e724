package api

import (
	"strings"
	"testing"

	"github.com/ruvllm/ruvllm/api/openai"
	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/internal/testmodel"
	"github.com/ruvllm/ruvllm/models/gguf"
	"github.com/ruvllm/ruvllm/models/tokenizer"
	"github.com/ruvllm/ruvllm/session"
)

// TestHarmonyChannels serves gpt-oss's real template with the tokenizer of
// a synthesized gpt-oss (harmony's special tokens) over the fake engine:
// the analysis channel is reasoning, the final channel the answer, a
// commentary message to a function a tool call (the real template needs
// a description for each tool), and reasoning_effort reaches the
// template's system message.
func TestHarmonyChannels(t *testing.T) {
	f, err := gguf.Open(testmodel.Synth(t, "tiny-gpt-oss", "Q8_0"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tk, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	eng := newFakeEngine(tk)
	eng.maxLen = 4096
	s := New(Options{Version: "test-version"})
	if err := s.AddModel(&session.Model{ID: "gpt-oss", Tokenizer: tk, Chat: sharedChat(t, "openai-gpt-oss-120b"), Engine: eng}); err != nil {
		t.Fatal(err)
	}
	srv := startHTTP(t, s)
	var output string
	eng.script = func(backends.Request) []tokenizer.ID {
		return tk.Encode(output, tokenizer.EncodeOptions{ParseSpecial: true})
	}
	const weather = `"tools":[{"type":"function","function":{"name":"get_weather","description":"The weather in a city","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]`
	msgs := `"messages":[{"role":"user","content":"Weather in Paris?"}]`
	for _, tc := range []struct {
		name, fields, output           string
		reasoning, content, call, args string
		promptHas                      string
	}{
		{"analysis then final", ``, "<|channel|>analysis<|message|>The user asks.<|end|><|start|>assistant<|channel|>final<|message|>It is sunny.<|return|>",
			"The user asks.", "It is sunny.", "", "", "Reasoning: medium"},
		{"reasoning_effort high", `,"reasoning_effort":"high"`, "<|channel|>analysis<|message|>Think hard.<|end|><|start|>assistant<|channel|>final<|message|>Sunny.<|return|>",
			"Think hard.", "Sunny.", "", "", "Reasoning: high"},
		{"reasoning_effort low", `,"reasoning_effort":"low"`, "<|channel|>final<|message|>Sunny.<|return|>",
			"", "Sunny.", "", "", "Reasoning: low"},
		{"commentary tool call", `,` + weather, "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>",
			"Need the weather.", "", "get_weather", `{"city":"Paris"}`, "namespace functions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			output = tc.output
			n := len(eng.requests())
			resp, b := do(t, "POST", srv.URL+"/v1/chat/completions", `{`+msgs+tc.fields+`}`)
			if resp.StatusCode != 200 {
				t.Fatalf("%d %s", resp.StatusCode, b)
			}
			if p := tk.Decode(eng.requests()[n].Prompt); !strings.Contains(p, tc.promptHas) {
				t.Errorf("prompt %q lacks %q", p, tc.promptHas)
			}
			ch := decode[openai.ChatCompletion](t, b).Choices[0]
			m := ch.Message
			// The synthesized SentencePiece vocabulary puts a space
			// before the text after a special token; gpt-oss's does not.
			if deref(m.ReasoningContent) != tc.reasoning || strings.TrimPrefix(deref(m.Content), " ") != tc.content {
				t.Errorf("reasoning %q content %q, want %q %q (%s)", deref(m.ReasoningContent), deref(m.Content), tc.reasoning, tc.content, b)
			}
			if tc.call == "" {
				if len(m.ToolCalls) != 0 || ch.FinishReason != "stop" {
					t.Errorf("tool calls %v finish %q", m.ToolCalls, ch.FinishReason)
				}
				return
			}
			if len(m.ToolCalls) != 1 || m.ToolCalls[0].Function.Name != tc.call || m.ToolCalls[0].Function.Arguments != tc.args || ch.FinishReason != "tool_calls" {
				t.Errorf("tool calls %+v finish %q, want %s(%s)", m.ToolCalls, ch.FinishReason, tc.call, tc.args)
			}
		})
	}
}
