package api

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	wire "github.com/ruvllm/ruvllm/api/openai"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/internal/shared"
	"github.com/ruvllm/ruvllm/models/chat"
	"github.com/ruvllm/ruvllm/models/tokenizer"
	"github.com/ruvllm/ruvllm/session"
)

// qwen3Chat is a chat renderer of Qwen3's real template (../shared), which
// thinks in <think> tags and takes enable_thinking.
func qwen3Chat(t *testing.T) templateChat { return sharedChat(t, "Qwen-Qwen3-0.6B") }

// sharedChat is a chat renderer of a real template of ../shared/templates.
func sharedChat(t *testing.T, name string) templateChat {
	t.Helper()
	src, err := os.ReadFile(shared.Path(t, "templates", name+".jinja"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := chat.Parse(string(src))
	if err != nil {
		t.Fatal(err)
	}
	return templateChat{tmpl}
}

// textScript makes the fake engine write text, byte tokens and all.
func textScript(tk *tokenizer.Tokenizer, text string) func(backends.Request) []tokenizer.ID {
	ids := tk.Encode(text, tokenizer.EncodeOptions{})
	return func(backends.Request) []tokenizer.ID { return ids }
}

// TestThinkingModels checks that a thinking model's reasoning reaches
// chat completions as reasoning_content, streamed and whole, that the
// switches reach Qwen3's real template, and that reasoning_format none
// keeps the raw text.
func TestThinkingModels(t *testing.T) {
	fs := newFakeServerWith(t, Options{}, qwen3Chat(t), nil)
	const output = "<think>\nThe user greets me.\n</think>\n\nHello there!"
	fs.eng.script = textScript(fs.tok, output)
	msgs := `"messages":[{"role":"user","content":"Hi"}]`
	prompt := func(i int) string { return fs.tok.Decode(fs.eng.requests()[i].Prompt) }
	emptyThink := "<|im_start|>assistant\n<think>\n\n</think>\n\n"

	t.Run("whole", func(t *testing.T) {
		resp, b := do(t, "POST", fs.URL+"/v1/chat/completions", `{`+msgs+`}`)
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
		m := decode[wire.ChatCompletion](t, b).Choices[0].Message
		if deref(m.ReasoningContent) != "The user greets me." || deref(m.Content) != "Hello there!" {
			t.Errorf("reasoning %q content %q", deref(m.ReasoningContent), deref(m.Content))
		}
	})
	t.Run("streamed", func(t *testing.T) {
		resp, b := do(t, "POST", fs.URL+"/v1/chat/completions", `{"stream":true,`+msgs+`}`)
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
		var reasoning, content strings.Builder
		for _, d := range sseData(t, b) {
			if d == "[DONE]" {
				continue
			}
			var c struct {
				Choices []struct{ Delta wire.ChatDelta } `json:"choices"`
			}
			if err := json.Unmarshal([]byte(d), &c); err != nil {
				t.Fatal(err)
			}
			for _, ch := range c.Choices {
				reasoning.WriteString(deref(ch.Delta.ReasoningContent))
				content.WriteString(deref(ch.Delta.Content))
			}
		}
		if reasoning.String() != "The user greets me." || content.String() != "Hello there!" {
			t.Errorf("reasoning %q content %q", reasoning.String(), content.String())
		}
	})
	for _, tc := range []struct {
		name, fields string
		thinkingOff  bool
		content      string
	}{
		{"enable_thinking false", `"chat_template_kwargs":{"enable_thinking":false}`, true, "Hello there!"},
		{"reasoning_effort none", `"reasoning_effort":"none"`, true, "Hello there!"},
		{"reasoning_effort high", `"reasoning_effort":"high"`, false, "Hello there!"},
		// The raw text, with the space the test vocabulary's encoding puts
		// before it.
		{"reasoning_format none", `"reasoning_format":"none"`, false, " " + output},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := len(fs.eng.requests())
			resp, b := do(t, "POST", fs.URL+"/v1/chat/completions", `{`+msgs+`,`+tc.fields+`}`)
			if resp.StatusCode != 200 {
				t.Fatalf("%d %s", resp.StatusCode, b)
			}
			if got := strings.HasSuffix(prompt(n), emptyThink); got != tc.thinkingOff {
				t.Errorf("prompt %q: empty think block %v, want %v", prompt(n), got, tc.thinkingOff)
			}
			if m := decode[wire.ChatCompletion](t, b).Choices[0].Message; deref(m.Content) != tc.content {
				t.Errorf("content %q, want %q", deref(m.Content), tc.content)
			}
		})
	}
}

// TestServerTurnsThinkingOff checks llama-server's --reasoning-budget 0 on
// real templates: Qwen3 renders its empty think block, a template that
// opens the block itself (DeepSeek-R1's distills) gets it closed, and a
// request may still turn thinking on.
func TestServerTurnsThinkingOff(t *testing.T) {
	for _, tc := range []struct{ template, off, on string }{
		{"Qwen-Qwen3-0.6B", "<|im_start|>assistant\n<think>\n\n</think>\n\n", "<|im_start|>assistant\n"},
		{"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", "<think>\n</think>", "<think>\n"},
	} {
		t.Run(tc.template, func(t *testing.T) {
			fs := newFakeServerWith(t, Options{NoThinking: true}, sharedChat(t, tc.template), nil)
			for _, c := range []struct{ fields, end string }{{"", tc.off}, {`,"chat_template_kwargs":{"enable_thinking":true}`, tc.on}, {`,"reasoning_effort":"high"`, tc.on}} {
				resp, b := do(t, "POST", fs.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":2`+c.fields+`}`)
				if resp.StatusCode != 200 {
					t.Fatalf("%d %s", resp.StatusCode, b)
				}
				r := fs.eng.requests()
				if p := fs.tok.Decode(r[len(r)-1].Prompt); !strings.HasSuffix(p, c.end) {
					t.Errorf("fields %s: prompt %q does not end with %q", c.fields, p, c.end)
				}
			}
		})
	}
}

// TestPeerFields sends the fields vLLM and llama-server add to the OpenAI
// routes and checks what reaches the engine and the template.
func TestPeerFields(t *testing.T) {
	fs := newFakeServer(t, Options{}, nil)
	fs.eng.script = scriptOf(t, fs.tok, "▁Hello", "▁S", "TOP", "▁here")
	chatMsgs := `"messages":[{"role":"user","content":"hi"}]`
	last := func() backends.Request { r := fs.eng.requests(); return r[len(r)-1] }
	for _, tc := range []struct {
		name, path, body string
		check            func(t *testing.T, r backends.Request, b []byte)
	}{
		{"n_predict", "/v1/completions", `{"prompt":"x","n_predict":3,"cache_prompt":true}`, func(t *testing.T, r backends.Request, b []byte) {
			if r.MaxTokens != 3 {
				t.Errorf("max tokens %d", r.MaxTokens)
			}
		}},
		{"max_tokens wins over n_predict", "/v1/completions", `{"prompt":"x","n_predict":3,"max_tokens":2}`, func(t *testing.T, r backends.Request, b []byte) {
			if r.MaxTokens != 2 {
				t.Errorf("max tokens %d", r.MaxTokens)
			}
		}},
		{"ignore_eos and min_tokens", "/v1/chat/completions", `{` + chatMsgs + `,"ignore_eos":true,"min_tokens":2,"max_tokens":5}`, func(t *testing.T, r backends.Request, b []byte) {
			if !r.IgnoreEOS || r.MinTokens != 2 {
				t.Errorf("ignore eos %v, min tokens %d", r.IgnoreEOS, r.MinTokens)
			}
		}},
		{"samplers", "/v1/chat/completions", `{` + chatMsgs + `,"repetition_penalty":1.3,"top_k":7,"min_p":0.2,"typical_p":1,"mirostat":0}`, func(t *testing.T, r backends.Request, b []byte) {
			if p := r.Sampling; p.RepeatPenalty != 1.3 || p.TopK != 7 || p.MinP != 0.2 {
				t.Errorf("sampling %+v", p)
			}
		}},
		{"repeat_last_n 0 turns the penalties off", "/v1/completions", `{"prompt":"x","repeat_penalty":1.5,"presence_penalty":1,"repeat_last_n":0}`, func(t *testing.T, r backends.Request, b []byte) {
			if p := r.Sampling; p.RepeatPenalty != 1 || p.PresencePenalty != 0 {
				t.Errorf("sampling %+v", p)
			}
		}},
		{"include_stop_str_in_output", "/v1/chat/completions", `{` + chatMsgs + `,"stop":["STOP"],"include_stop_str_in_output":true}`, func(t *testing.T, r backends.Request, b []byte) {
			if c := deref(decode[wire.ChatCompletion](t, b).Choices[0].Message.Content); c != " Hello STOP" {
				t.Errorf("content %q", c)
			}
		}},
		{"stop without it", "/v1/chat/completions", `{` + chatMsgs + `,"stop":["STOP"]}`, func(t *testing.T, r backends.Request, b []byte) {
			ch := decode[wire.ChatCompletion](t, b).Choices[0]
			if c := deref(ch.Message.Content); c != " Hello " || ch.FinishReason != "stop" {
				t.Errorf("content %q, finish %q", c, ch.FinishReason)
			}
		}},
		{"add_generation_prompt false", "/v1/chat/completions", `{` + chatMsgs + `,"add_generation_prompt":false}`, func(t *testing.T, r backends.Request, b []byte) {
			if p := fs.tok.Decode(r.Prompt); strings.HasSuffix(p, "<|im_start|>assistant\n") {
				t.Errorf("prompt %q opens the assistant's turn", p)
			}
		}},
		{"a trailing assistant message is continued", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Once upon"}]}`, func(t *testing.T, r backends.Request, b []byte) {
			if p := fs.tok.Decode(r.Prompt); !strings.HasSuffix(p, "<|im_start|>assistant\nOnce upon") {
				t.Errorf("prompt %q does not end in the prefill", p)
			}
		}},
		{"continue_final_message", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Once upon"}],"continue_final_message":true,"add_generation_prompt":false}`, func(t *testing.T, r backends.Request, b []byte) {
			if p := fs.tok.Decode(r.Prompt); !strings.HasSuffix(p, "<|im_start|>assistant\nOnce upon") {
				t.Errorf("prompt %q does not end in the message to continue", p)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, b := do(t, "POST", fs.URL+tc.path, tc.body)
			if resp.StatusCode != 200 {
				t.Fatalf("%d %s", resp.StatusCode, b)
			}
			tc.check(t, last(), b)
		})
	}
	for _, tc := range []struct{ name, body, param, code string }{
		{"a sampler that is on", `{"prompt":"x","mirostat":2}`, "mirostat", session.CodeUnsupported},
		{"two constraints", `{"prompt":"x","guided_choice":["a"],"grammar":"root ::= \"a\""}`, "guided_choice", session.CodeInvalidValue},
		{"a bad grammar", `{"prompt":"x","grammar":"root ::= missing"}`, "grammar", session.CodeInvalidValue},
		{"a bad regex", `{"prompt":"x","guided_regex":"(a"}`, "guided_regex", session.CodeInvalidValue},
		{"a bad reasoning_effort", `{"messages":[{"role":"user","content":"x"}],"reasoning_effort":"max"}`, "reasoning_effort", session.CodeInvalidValue},
		{"still unknown", `{"prompt":"x","frobnicate":1}`, "frobnicate", session.CodeUnknownParam},
		{"two assistant messages at the end", `{"messages":[{"role":"user","content":"x"},{"role":"assistant","content":"a"},{"role":"assistant","content":"b"}]}`, "messages", session.CodeInvalidValue},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := "/v1/completions"
			if strings.Contains(tc.body, "messages") {
				path = "/v1/chat/completions"
			}
			resp, b := do(t, "POST", fs.URL+path, tc.body)
			e := decode[wireError](t, b)
			if resp.StatusCode != 400 || deref(e.Error.Param) != tc.param || deref(e.Error.Code) != tc.code {
				t.Errorf("%d param %q code %q: %s", resp.StatusCode, deref(e.Error.Param), deref(e.Error.Code), b)
			}
		})
	}
}

// TestGuidedOutputs asks the real tiny model for each of the constraints
// vLLM and llama-server take, and checks the output follows it.
func TestGuidedOutputs(t *testing.T) {
	rs := startRealServer(t, realOptions{})
	for _, tc := range []struct {
		name, fields string
		ok           func(string) bool
	}{
		{"guided_choice", `"guided_choice":["red","green","blue"]`, func(s string) bool { return s == "red" || s == "green" || s == "blue" }},
		{"guided_regex", `"guided_regex":"[a-c]{2}-[0-9]{3}"`, regexp.MustCompile(`^[a-c]{2}-[0-9]{3}$`).MatchString},
		{"grammar", `"grammar":"root ::= \"yes\" | \"no\" \" \" [0-9]"`, regexp.MustCompile(`^(yes|no [0-9])$`).MatchString},
		{"guided_json", `"guided_json":{"type":"object","properties":{"n":{"type":"integer","minimum":0,"maximum":9}},"required":["n"],"additionalProperties":false}`,
			func(s string) bool {
				var v map[string]int
				return json.Unmarshal([]byte(s), &v) == nil && len(v) == 1 && v["n"] >= 0 && v["n"] <= 9
			}},
		{"json_schema", `"json_schema":{"enum":["a","b"]}`, func(s string) bool { return s == `"a"` || s == `"b"` }},
		{"structured_outputs choice", `"structured_outputs":{"choice":["x","y"]}`, func(s string) bool { return s == "x" || s == "y" }},
		{"structured_outputs regex", `"structured_outputs":{"regex":"z+"}`, regexp.MustCompile(`^z+$`).MatchString},
	} {
		for _, route := range []string{"/v1/completions", "/v1/chat/completions"} {
			t.Run(tc.name+route, func(t *testing.T) {
				body := `{"model":"tiny","prompt":"Say:","max_tokens":24,"temperature":1,"seed":3,` + tc.fields + `}`
				if strings.Contains(route, "chat") {
					body = `{"model":"tiny","messages":[{"role":"user","content":"Say:"}],"max_tokens":24,"temperature":1,"seed":3,` + tc.fields + `}`
				}
				resp, b := do(t, "POST", rs.URL+route, body)
				if resp.StatusCode != 200 {
					t.Fatalf("%d %s", resp.StatusCode, b)
				}
				var text string
				if strings.Contains(route, "chat") {
					text = deref(decode[wire.ChatCompletion](t, b).Choices[0].Message.Content)
				} else {
					text = decode[wire.TextCompletion](t, b).Choices[0].Text
				}
				if !tc.ok(text) {
					t.Errorf("output %q does not follow %s", text, tc.fields)
				}
			})
		}
	}
}

// TestToolCallAfterReasoning checks that a thinking model's call, after
// its reasoning, is a tool call, streamed and whole.
func TestToolCallAfterReasoning(t *testing.T) {
	// The tools' system prompt takes room: the byte-level test vocabulary
	// makes it long.
	fs := newFakeServerWith(t, Options{}, qwen3Chat(t), func(e *fakeEngine) { e.maxLen = 4096 })
	fs.eng.script = textScript(fs.tok, "<think>\nI need the weather.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>")
	body := `"messages":[{"role":"user","content":"Weather in Paris?"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]`
	resp, b := do(t, "POST", fs.URL+"/v1/chat/completions", `{`+body+`}`)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	ch := decode[wire.ChatCompletion](t, b).Choices[0]
	if deref(ch.Message.ReasoningContent) != "I need the weather." || ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 ||
		ch.Message.ToolCalls[0].Function.Name != "get_weather" || ch.Message.ToolCalls[0].Function.Arguments != `{"city": "Paris"}` || ch.Message.Content != nil {
		t.Errorf("choice %s", b)
	}
	resp, b = do(t, "POST", fs.URL+"/v1/chat/completions", `{"stream":true,`+body+`}`)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	var reasoning, args, finish string
	for _, d := range sseData(t, b) {
		if d == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta        wire.ChatDelta
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(d), &c); err != nil {
			t.Fatal(err)
		}
		for _, ch := range c.Choices {
			reasoning += deref(ch.Delta.ReasoningContent)
			for _, tc := range ch.Delta.ToolCalls {
				args += tc.Function.Arguments
			}
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
	}
	if reasoning != "I need the weather." || args != `{"city": "Paris"}` || finish != "tool_calls" {
		t.Errorf("streamed reasoning %q arguments %q finish %q", reasoning, args, finish)
	}
}

// TestHugePrompts: prompts just under the body limit are refused with
// context_length_exceeded on every route that tokenizes them, after a
// few pieces of them are tokenized (issue 30).
func TestHugePrompts(t *testing.T) {
	fs := newFakeServer(t, Options{}, nil)
	text := strings.Repeat("Hello world here is the end ", 7_500_000/28)
	for _, tc := range []struct{ path, body, param string }{
		{"/v1/completions", `{"prompt":"` + text + `"}`, "prompt"},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"` + text + `"}]}`, "messages"},
	} {
		resp, b := do(t, "POST", fs.URL+tc.path, tc.body)
		if e := decode[wireError](t, b); resp.StatusCode != 400 || deref(e.Error.Code) != session.CodeContextLength || deref(e.Error.Param) != tc.param {
			t.Errorf("%s: %d %s", tc.path, resp.StatusCode, b)
		}
	}
}

// TestTemplateDate: Llama 3.x's templates print today's date, which
// llama-server passes them as date_string (without it they print a date of
// 2024), and a system message a template refuses is folded into the first
// user turn even when the tools have to go there too (Gemma 2).
func TestTemplateDate(t *testing.T) {
	fs := newFakeServerWith(t, Options{}, sharedChat(t, "meta-llama-Llama-3.1-8B-Instruct"), func(e *fakeEngine) { e.maxLen = 4096 })
	before := time.Now().Format("02 Jan 2006")
	if resp, b := do(t, "POST", fs.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"What day is it?"}],"max_tokens":1}`); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	after := time.Now().Format("02 Jan 2006")
	r := fs.eng.requests()
	if p := fs.tok.Decode(r[len(r)-1].Prompt); !strings.Contains(p, "Today Date: "+before) && !strings.Contains(p, "Today Date: "+after) {
		t.Errorf("prompt %q does not hold today's date", p)
	}

	gemma := newFakeServerWith(t, Options{}, sharedChat(t, "google-gemma-2-2b-it"), func(e *fakeEngine) { e.maxLen = 8192 })
	resp, b := do(t, "POST", gemma.URL+"/v1/chat/completions", `{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}],
		"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":"required","max_tokens":60}`)
	if resp.StatusCode != 200 {
		t.Fatalf("gemma 2 with a system message and tools: %d %s", resp.StatusCode, b)
	}
	r = gemma.eng.requests()
	if p := gemma.tok.Decode(r[len(r)-1].Prompt); !strings.Contains(p, "Be brief.") || strings.Contains(p, "system") {
		t.Errorf("prompt %q", p)
	}
}
