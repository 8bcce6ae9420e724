package api

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ruvllm/ruvllm/api/ollama"
	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/internal/schematest"
	"github.com/ruvllm/ruvllm/internal/shared"
	"github.com/ruvllm/ruvllm/models/chat"
	"github.com/ruvllm/ruvllm/models/tokenizer"
	"github.com/ruvllm/ruvllm/session"
)

// The tests of ollama's native API (api/ollama): raw HTTP and NDJSON, as
// ollama's clients speak it.

// ndjson splits a streamed ollama answer into its objects, checking the
// framing: the NDJSON media type, and one JSON object per line, each line
// ended.
func ndjson(t *testing.T, resp *http.Response, body []byte) []map[string]any {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Fatalf("Content-Type %q, body %s", ct, body)
	}
	if !bytes.HasSuffix(body, []byte("\n")) {
		t.Fatalf("the stream does not end with a newline: %q", body)
	}
	var out []map[string]any
	for line := range strings.Lines(string(body)) {
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		out = append(out, v)
	}
	return out
}

// post sends body to path and decodes a whole JSON answer.
func post(t *testing.T, url, path, body string) (int, map[string]any) {
	t.Helper()
	resp, b := do(t, "POST", url+path, body)
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v: %s", path, err, b)
	}
	return resp.StatusCode, v
}

// ollamaError checks an ollama error: the status, and a body that is
// {"error": "..."} alone, whose message contains want.
func ollamaError(t *testing.T, url, path, body string, status int, want string) {
	t.Helper()
	code, v := post(t, url, path, body)
	msg, _ := v["error"].(string)
	if code != status || len(v) != 1 || !strings.Contains(msg, want) {
		t.Errorf("%s %s: %d %v, want %d with %q", path, body, code, v, status, want)
	}
}

// checkMetrics checks a final chunk's counts and durations: present,
// measured (not negative), the parts within the total, and the counts
// those of the generation.
func checkMetrics(t *testing.T, v map[string]any, promptTokens, evalCount int) {
	t.Helper()
	n := map[string]float64{}
	for _, k := range []string{"total_duration", "load_duration", "prompt_eval_count", "prompt_eval_duration", "eval_count", "eval_duration"} {
		x, ok := v[k].(float64)
		if !ok || x < 0 || x != math.Trunc(x) {
			t.Fatalf("%s = %v in %v", k, v[k], v)
		}
		n[k] = x
	}
	if n["total_duration"] <= 0 || n["load_duration"]+n["prompt_eval_duration"]+n["eval_duration"] > n["total_duration"] {
		t.Errorf("the durations do not add up: %v", n)
	}
	if int(n["prompt_eval_count"]) != promptTokens || int(n["eval_count"]) != evalCount {
		t.Errorf("counts %v, want prompt %d, eval %d", n, promptTokens, evalCount)
	}
	if evalCount > 1 && n["eval_duration"] <= 0 {
		t.Errorf("eval_duration %v for %d tokens", n["eval_duration"], evalCount)
	}
}

// lastRequest is the engine request the fake engine got last.
func (fs *fakeServer) lastRequest(t *testing.T) backends.Request {
	t.Helper()
	rs := fs.eng.requests()
	if len(rs) == 0 {
		t.Fatal("the engine got no request")
	}
	return rs[len(rs)-1]
}

func TestOllamaChat(t *testing.T) {
	fs := newFakeServer(t, Options{}, func(e *fakeEngine) {
		e.script = scriptOf(t, testTokenizer(t), "▁Hello", "▁world", "!")
		e.delay = time.Millisecond
	})
	body := `{"model":"fake-model","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hi"}]}`

	t.Run("stream", func(t *testing.T) {
		resp, b := do(t, "POST", fs.URL+"/api/chat", body)
		lines := ndjson(t, resp, b)
		if len(lines) < 2 {
			t.Fatalf("%d lines: %s", len(lines), b)
		}
		var content string
		for _, l := range lines[:len(lines)-1] {
			msg, _ := l["message"].(map[string]any)
			if l["done"] != false || l["model"] != "fake-model" || msg["role"] != "assistant" || l["done_reason"] != nil || l["total_duration"] != nil {
				t.Errorf("chunk %v", l)
			}
			if _, err := time.Parse(time.RFC3339Nano, l["created_at"].(string)); err != nil {
				t.Errorf("created_at: %v", err)
			}
			content += msg["content"].(string)
		}
		last := lines[len(lines)-1]
		if content != " Hello world!" || last["done"] != true || last["done_reason"] != "stop" || last["message"].(map[string]any)["content"] != "" {
			t.Errorf("content %q, last %v", content, last)
		}
		checkMetrics(t, last, len(fs.lastRequest(t).Prompt), 3)
		if rendered := fs.tok.Decode(fs.lastRequest(t).Prompt); !strings.Contains(rendered, "system\nBe brief.") {
			t.Errorf("prompt %q", rendered)
		}
	})

	t.Run("whole", func(t *testing.T) {
		code, v := post(t, fs.URL, "/api/chat", strings.Replace(body, `"messages"`, `"stream":false,"messages"`, 1))
		msg, _ := v["message"].(map[string]any)
		if code != 200 || msg["content"] != " Hello world!" || msg["role"] != "assistant" || v["done"] != true || v["done_reason"] != "stop" || msg["thinking"] != nil {
			t.Fatalf("%d %v", code, v)
		}
		checkMetrics(t, v, len(fs.lastRequest(t).Prompt), 3)
	})

	t.Run("ollama names", func(t *testing.T) {
		for _, name := range []string{"fake-model:latest", "fake-model"} {
			code, v := post(t, fs.URL, "/api/chat", `{"model":"`+name+`","stream":false,"messages":[{"role":"user","content":"hi"}]}`)
			if code != 200 || v["model"] != name {
				t.Errorf("%s: %d %v", name, code, v)
			}
		}
	})

	t.Run("unknown members are ignored", func(t *testing.T) {
		code, v := post(t, fs.URL, "/api/chat", `{"model":"fake-model","stream":false,"messages":[{"role":"user","content":"hi","extra":1}],`+
			`"options":{"num_thread":4,"num_gpu":1,"num_ctx":99999,"low_vram":false,"use_mmap":true,"no_such_option":"x"},"truncate":true,"shift":true,"what":{}}`)
		if code != 200 || v["done"] != true {
			t.Fatalf("%d %v", code, v)
		}
	})

	t.Run("load and unload", func(t *testing.T) {
		for _, tc := range []struct{ body, reason string }{
			{`{"model":"fake-model","messages":[]}`, "load"},
			{`{"model":"fake-model"}`, "load"},
			{`{"model":"fake-model","messages":[],"keep_alive":0}`, "unload"},
		} {
			code, v := post(t, fs.URL, "/api/chat", tc.body)
			if code != 200 || v["done"] != true || v["done_reason"] != tc.reason || v["message"].(map[string]any)["role"] != "assistant" {
				t.Errorf("%s: %d %v", tc.body, code, v)
			}
		}
	})
}

func TestOllamaGenerate(t *testing.T) {
	tok := testTokenizer(t)
	fs := newFakeServer(t, Options{}, func(e *fakeEngine) { e.script = scriptOf(t, tok, "▁Hello", "▁world", "!") })

	var first []tokenizer.ID
	t.Run("templated, with its context", func(t *testing.T) {
		code, v := post(t, fs.URL, "/api/generate", `{"model":"fake-model","prompt":"hi","system":"Be brief.","stream":false}`)
		if code != 200 || v["response"] != " Hello world!" || v["done"] != true || v["done_reason"] != "stop" {
			t.Fatalf("%d %v", code, v)
		}
		prompt := fs.lastRequest(t).Prompt
		if got := strings.TrimSpace(tok.Decode(prompt)); got != "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant" {
			t.Errorf("rendered %q", got)
		}
		checkMetrics(t, v, len(prompt), 3)
		var ctx []tokenizer.ID
		raw, _ := json.Marshal(v["context"])
		json.Unmarshal(raw, &ctx)
		want := append(slices.Clone(prompt), tok.Encode(" Hello world!", tokenizer.EncodeOptions{ParseSpecial: true})...)
		if !slices.Equal(ctx, want) {
			t.Errorf("context %v, want %v", ctx, want)
		}
		first = ctx
	})

	t.Run("context goes first", func(t *testing.T) {
		cj, _ := json.Marshal(first)
		resp, b := do(t, "POST", fs.URL+"/api/generate", `{"model":"fake-model","prompt":"more","context":`+string(cj)+`}`)
		lines := ndjson(t, resp, b)
		var text string
		for _, l := range lines {
			text += l["response"].(string)
		}
		last := lines[len(lines)-1]
		prompt := fs.lastRequest(t).Prompt
		rest := session.EncodePrompt(tok, "<|im_start|>user\nmore<|im_end|>\n<|im_start|>assistant\n")[1:] // its BOS dropped
		if text != " Hello world!" || last["done"] != true || last["context"] == nil || !slices.Equal(prompt, append(slices.Clone(first), rest...)) {
			t.Errorf("text %q, prompt %v (want the context %v, then %v)", text, prompt, first, rest)
		}
		checkMetrics(t, last, len(prompt), 3)
	})

	t.Run("raw", func(t *testing.T) {
		code, v := post(t, fs.URL, "/api/generate", `{"model":"fake-model","prompt":"[INST] hi [/INST]","raw":true,"stream":false}`)
		if code != 200 || v["response"] != " Hello world!" || v["context"] != nil {
			t.Fatalf("%d %v", code, v)
		}
		if got := fs.lastRequest(t).Prompt; !slices.Equal(got, session.EncodePrompt(tok, "[INST] hi [/INST]")) {
			t.Errorf("raw prompt %q", tok.Decode(got))
		}
	})

	t.Run("refusals", func(t *testing.T) {
		ollamaError(t, fs.URL, "/api/generate", `{"model":"fake-model","prompt":"x","raw":true,"system":"s"}`, 400, "raw mode does not support template, system, or context")
		ollamaError(t, fs.URL, "/api/generate", `{"model":"fake-model","prompt":"x","template":"{{ .Prompt }}"}`, 400, "template is not supported")
		ollamaError(t, fs.URL, "/api/generate", `{"model":"fake-model","prompt":"x","suffix":"end"}`, 400, `"fake-model" does not support insert`)
		ollamaError(t, fs.URL, "/api/generate", `{"model":"fake-model","prompt":"x","images":["aGk="]}`, 400, "does not support images")
		ollamaError(t, fs.URL, "/api/generate", `{"model":"fake-model","prompt":"x","context":[1,99999999]}`, 400, "outside the vocabulary")
		ollamaError(t, fs.URL, "/api/generate", `{"model":"fake-model","prompt":"x","context":"abc"}`, 400, "context must be an array of token ids")
	})

	t.Run("load", func(t *testing.T) {
		code, v := post(t, fs.URL, "/api/generate", `{"model":"fake-model"}`)
		if code != 200 || v["done_reason"] != "load" || v["response"] != "" {
			t.Errorf("%d %v", code, v)
		}
	})
}

func TestOllamaOptions(t *testing.T) {
	tok := testTokenizer(t)
	fs := newFakeServer(t, Options{}, nil) // "▁Hello" forever
	chat := func(options string) string {
		return `{"model":"fake-model","stream":false,"messages":[{"role":"user","content":"hi"}],"options":` + options + `}`
	}

	t.Run("num_predict caps", func(t *testing.T) {
		resp, b := do(t, "POST", fs.URL+"/api/chat", `{"model":"fake-model","messages":[{"role":"user","content":"hi"}],"options":{"num_predict":4}}`)
		lines := ndjson(t, resp, b)
		last := lines[len(lines)-1]
		if last["done_reason"] != "length" || len(lines) != 5 {
			t.Fatalf("%d lines, last %v", len(lines), last)
		}
		checkMetrics(t, last, len(fs.lastRequest(t).Prompt), 4)
	})

	t.Run("no cap", func(t *testing.T) {
		for _, n := range []string{"-1", "-2", "0", "1000000"} {
			fs.eng.maxLen = 60
			code, v := post(t, fs.URL, "/api/chat", chat(`{"num_predict":`+n+`}`))
			r := fs.lastRequest(t)
			if code != 200 || v["done_reason"] != "length" || r.MaxTokens != 60-len(r.Prompt) {
				t.Errorf("num_predict %s: %d %v, max tokens %d", n, code, v, r.MaxTokens)
			}
		}
		fs.eng.maxLen = 256
	})

	t.Run("sampling", func(t *testing.T) {
		code, v := post(t, fs.URL, "/api/chat", chat(`{"num_predict":1,"temperature":0.3,"top_k":7,"top_p":0.5,"min_p":0.1,"seed":42,`+
			`"repeat_penalty":1.3,"repeat_last_n":16,"presence_penalty":0.5,"frequency_penalty":-0.5,"typical_p":1,"mirostat":0,"mirostat_tau":5,"tfs_z":1}`))
		if code != 200 {
			t.Fatalf("%d %v", code, v)
		}
		p := fs.lastRequest(t).Sampling
		if p.Temperature != 0.3 || p.TopK != 7 || p.TopP != 0.5 || p.MinP != float32(0.1) || p.Seed == nil || *p.Seed != 42 ||
			p.RepeatPenalty != float32(1.3) || p.RepeatLastN != 16 || p.PresencePenalty != 0.5 || p.FrequencyPenalty != -0.5 {
			t.Errorf("sampling %+v", p)
		}
		post(t, fs.URL, "/api/chat", chat(`{"num_predict":1,"seed":-1,"top_k":0,"repeat_penalty":1.5,"repeat_last_n":0}`))
		p = fs.lastRequest(t).Sampling
		if p.Seed != nil || p.TopK != 0 || p.RepeatPenalty != 1 {
			t.Errorf("seed -1, top_k 0, repeat_last_n 0: %+v", p)
		}
		// Left out: the server's defaults.
		post(t, fs.URL, "/api/chat", chat(`{"num_predict":1}`))
		if p, d := fs.lastRequest(t).Sampling, backends.DefaultParams(); p.Temperature != d.Temperature || p.TopK != d.TopK || p.TopP != d.TopP {
			t.Errorf("defaults %+v", p)
		}
	})

	t.Run("stop", func(t *testing.T) {
		fs.eng.script = scriptOf(t, tok, "▁Hello", "▁world", "!")
		defer func() { fs.eng.script = nil }()
		code, v := post(t, fs.URL, "/api/chat", chat(`{"stop":["world"]}`))
		if code != 200 || v["message"].(map[string]any)["content"] != " Hello " || v["done_reason"] != "stop" {
			t.Errorf("%d %v", code, v)
		}
	})

	t.Run("refused", func(t *testing.T) {
		ollamaError(t, fs.URL, "/api/chat", chat(`{"typical_p":0.5}`), 400, "options.typical_p is not supported")
		ollamaError(t, fs.URL, "/api/chat", chat(`{"mirostat":2}`), 400, "options.mirostat")
		ollamaError(t, fs.URL, "/api/chat", chat(`{"temperature":"hot"}`), 400, "options.temperature must be a number")
		ollamaError(t, fs.URL, "/api/chat", chat(`{"temperature":5}`), 400, "options.temperature")
		ollamaError(t, fs.URL, "/api/chat", chat(`{"num_predict":2.5}`), 400, "options.num_predict must be an integer")
		ollamaError(t, fs.URL, "/api/chat", chat(`{"stop":[1]}`), 400, "options.stop[0] must be a string")
		ollamaError(t, fs.URL, "/api/chat", chat(`[]`), 400, "options must be an object")
	})
}

func TestOllamaErrors(t *testing.T) {
	fs := newFakeServer(t, Options{}, nil)
	msg := `"messages":[{"role":"user","content":"hi"}]`
	for _, path := range []string{"/api/chat", "/api/generate", "/api/show", "/api/embed", "/api/embeddings"} {
		ollamaError(t, fs.URL, path, `{"model":"nope:7b",`+msg+`,"prompt":"x","input":"x"}`, 404, "model 'nope:7b' not found")
	}
	ollamaError(t, fs.URL, "/api/chat", `{`+msg+`}`, 400, "model is required")
	ollamaError(t, fs.URL, "/api/show", `{}`, 400, "model is required")
	ollamaError(t, fs.URL, "/api/chat", `{"model":"fake-model",`, 400, "malformed JSON")
	ollamaError(t, fs.URL, "/api/chat", `{"model":"fake-model","messages":[{"role":"wizard","content":"x"}]}`, 400, "messages[0].role")
	ollamaError(t, fs.URL, "/api/chat", `{"model":"fake-model","messages":[{"role":"user","content":["x"]}]}`, 400, "messages[0].content must be a string")
	ollamaError(t, fs.URL, "/api/chat", `{"model":"fake-model","messages":[{"role":"user","content":"x","images":["aGk="]}]}`, 400, `"fake-model" does not support images`)
	ollamaError(t, fs.URL, "/api/chat", `{"model":"fake-model",`+msg+`,"think":"extreme"}`, 400, "invalid think value")
	ollamaError(t, fs.URL, "/api/chat", `{"model":"fake-model",`+msg+`,"think":true}`, 400, `"fake-model" does not support thinking`)
	ollamaError(t, fs.URL, "/api/chat", `{"model":"fake-model",`+msg+`,"format":"xml"}`, 400, "invalid format")
	ollamaError(t, fs.URL, "/api/chat", `{"model":"fake-model",`+msg+`,"format":{"type":"object","properties":{"a":{"type":"string","pattern":"(?<=x)"}}}}`, 400, "format")
	ollamaError(t, fs.URL, "/api/chat", `{"model":"fake-model",`+msg+`,"keep_alive":"soon"}`, 400, "keep_alive")
	ollamaError(t, fs.URL, "/api/chat", `{"model":"fake-model",`+msg+`,"top_logprobs":21}`, 400, "top_logprobs must be between 0 and 20")
	ollamaError(t, fs.URL, "/api/chat", `{"model":"fake-model",`+msg+`,"tools":[{"type":"retrieval"}]}`, 400, `tools of type "retrieval" are not supported`)
	// think false is fine on a model that does not think.
	if code, v := post(t, fs.URL, "/api/chat", `{"model":"fake-model","stream":false,`+msg+`,"think":false,"options":{"num_predict":1}}`); code != 200 {
		t.Errorf("think false: %d %v", code, v)
	}
	// A failure the template raises is the client's.
	ollamaError(t, fs.URL, "/api/chat", `{"model":"fake-model","messages":[{"role":"user","content":"boom"}]}`, 400, "boom is not allowed")
}

func TestOllamaLogprobs(t *testing.T) {
	fs := newFakeServer(t, Options{}, func(e *fakeEngine) { e.script = scriptOf(t, testTokenizer(t), "▁Hello", "▁world") })
	code, v := post(t, fs.URL, "/api/chat", `{"model":"fake-model","stream":false,"messages":[{"role":"user","content":"hi"}],"logprobs":true,"top_logprobs":2}`)
	lps, _ := v["logprobs"].([]any)
	if code != 200 || len(lps) != 2 {
		t.Fatalf("%d %v", code, v)
	}
	first := lps[0].(map[string]any)
	if first["token"] != " Hello" || first["logprob"] != -0.25 || len(first["top_logprobs"].([]any)) != 2 || first["bytes"] == nil {
		t.Errorf("logprob %v", first)
	}
}

// TestOllamaTools drives tool calls over scripted outputs: the calls come
// as ollama's objects (arguments an object, an id and an index), whole in
// a chunk of their own when streamed, and a history with calls and
// results reaches the template as templates read it.
func TestOllamaTools(t *testing.T) {
	tmpl, err := chat.Parse(chatMLTools)
	if err != nil {
		t.Fatal(err)
	}
	tok := testTokenizer(t)
	var output string
	fs := newFakeServerWith(t, Options{}, templateChat{tmpl}, func(e *fakeEngine) {
		e.maxLen = 8192 // the test vocabulary spells most text byte by byte
		e.script = func(backends.Request) []tokenizer.ID { return tok.Encode(output, tokenizer.EncodeOptions{}) }
	})
	tools := `"tools":[{"type":"function","function":{"name":"get_weather","description":"The weather","parameters":{"type":"object",` +
		`"properties":{"city":{"type":"string"}},"required":["city"]}}},{"function":{"name":"search","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}}]`
	body := `{"model":"fake-model",` + tools + `,"messages":[{"role":"user","content":"Weather in Paris?"}]`
	type call struct{ name, args string }
	checkCalls := func(t *testing.T, got []any, want []call) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("calls %v, want %v", got, want)
		}
		for i, c := range got {
			cm := c.(map[string]any)
			fn := cm["function"].(map[string]any)
			args, _ := json.Marshal(fn["arguments"])
			if fn["name"] != want[i].name || string(args) != want[i].args || fn["index"] != float64(i) || !strings.HasPrefix(cm["id"].(string), "call_") {
				t.Errorf("call %d: %v, want %v", i, cm, want[i])
			}
		}
	}
	tests := []struct {
		name, output, content string
		calls                 []call
	}{
		{"one call", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", "", []call{{"get_weather", `{"city":"Paris"}`}}},
		{"text and two calls", "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"unit\": \"c\"}}\n</tool_call>\n" +
			"<tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\": \"Oslo\"}}\n</tool_call>", "Let me check.",
			[]call{{"get_weather", `{"city":"Oslo","unit":"c"}`}, {"search", `{"q":"Oslo"}`}}},
		{"no call", "It is sunny.", "It is sunny.", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			output = tc.output
			code, v := post(t, fs.URL, "/api/chat", body+`,"stream":false}`)
			msg := v["message"].(map[string]any)
			if code != 200 || msg["content"] != tc.content || v["done_reason"] != "stop" {
				t.Fatalf("%d %v", code, v)
			}
			calls, _ := msg["tool_calls"].([]any)
			checkCalls(t, calls, tc.calls)
			if prompt := tok.Decode(fs.lastRequest(t).Prompt); !strings.Contains(prompt, `"name": "get_weather"`) {
				t.Errorf("the template was not shown the tools: %q", prompt)
			}

			resp, b := do(t, "POST", fs.URL+"/api/chat", body+`}`)
			lines := ndjson(t, resp, b)
			var streamed []any
			var content string
			for _, l := range lines {
				m := l["message"].(map[string]any)
				if c, ok := m["tool_calls"].([]any); ok {
					streamed = append(streamed, c...)
				}
				content += m["content"].(string)
			}
			checkCalls(t, streamed, tc.calls)
			if strings.TrimSpace(content) != tc.content || lines[len(lines)-1]["done_reason"] != "stop" {
				t.Errorf("streamed content %q, last %v", content, lines[len(lines)-1])
			}
		})
	}

	t.Run("history", func(t *testing.T) {
		output = "It is 11 degrees."
		code, v := post(t, fs.URL, "/api/chat", `{"model":"fake-model","stream":false,`+tools+`,"messages":[{"role":"user","content":"Weather in Toronto?"},`+
			`{"role":"assistant","content":"","thinking":"I should call it.","tool_calls":[{"function":{"name":"get_weather","arguments":{"city":"Toronto"}}}]},`+
			`{"role":"tool","content":"11 degrees celsius","tool_name":"get_weather"}]}`)
		if code != 200 || v["message"].(map[string]any)["content"] != "It is 11 degrees." {
			t.Fatalf("%d %v", code, v)
		}
		prompt := tok.Decode(fs.lastRequest(t).Prompt)
		for _, want := range []string{`<tool_call>` + "\n" + `{"name": "get_weather", "arguments": {"city": "Toronto"}}`, "<|im_start|>tool\n11 degrees celsius<|im_end|>"} {
			if !strings.Contains(prompt, want) {
				t.Errorf("the prompt lacks %q:\n%s", want, prompt)
			}
		}
	})
}

// TestOllamaFormat asks the synthesized model (gibberish, but constrained)
// for format "json" and for a schema: the output must be a JSON object,
// and valid under the schema, streamed or not.
func TestOllamaFormat(t *testing.T) {
	rs := startRealServer(t, realOptions{parallel: 2})
	schema := `{"type":"object","properties":{"name":{"type":"string","maxLength":12},"age":{"type":"integer","minimum":0,"maximum":120},` +
		`"ok":{"type":"boolean"}},"required":["name","age","ok"],"additionalProperties":false}`
	val := schematest.Compile(t, schema)
	for _, route := range []string{"/api/chat", "/api/generate"} {
		for _, stream := range []bool{false, true} {
			req := `"model":"tiny","options":{"temperature":1,"seed":7},"stream":` + map[bool]string{false: "false", true: "true"}[stream]
			if route == "/api/chat" {
				req += `,"messages":[{"role":"user","content":"JSON please"}]`
			} else {
				req += `,"prompt":"JSON please"`
			}
			text := func(format string) string {
				resp, b := do(t, "POST", rs.URL+route, `{`+req+`,"format":`+format+`}`)
				var objs []map[string]any
				if stream {
					objs = ndjson(t, resp, b)
				} else {
					objs = []map[string]any{decode[map[string]any](t, b)}
				}
				var out string
				for _, o := range objs {
					if route == "/api/chat" {
						out += o["message"].(map[string]any)["content"].(string)
					} else {
						out += o["response"].(string)
					}
				}
				if last := objs[len(objs)-1]; last["done"] != true || last["done_reason"] != "stop" {
					t.Errorf("%s: last %v", route, last)
				}
				return out
			}
			var obj map[string]any
			if out := text(`"json"`); json.Unmarshal([]byte(out), &obj) != nil {
				t.Errorf("%s stream %v: format json gave %q", route, stream, out)
			}
			schematest.Check(t, val, text(schema))
		}
	}
}

// TestOllamaListings checks /api/tags, /api/show, /api/ps and
// /api/version on the synthesized model, whose file describes it.
func TestOllamaListings(t *testing.T) {
	rs := startRealServer(t, realOptions{})
	hex64 := regexp.MustCompile(`^[0-9a-f]{64}$`)
	checkDetails := func(t *testing.T, d map[string]any) {
		t.Helper()
		fam, _ := d["families"].([]any)
		if d["format"] != "gguf" || d["family"] != rs.model.Config.Arch || len(fam) != 1 || d["parameter_size"] == "" ||
			d["quantization_level"] != "F32" || d["parent_model"] != "" {
			t.Errorf("details %v", d)
		}
	}

	t.Run("tags", func(t *testing.T) {
		resp, b := do(t, "GET", rs.URL+"/api/tags", "")
		v := decode[map[string][]map[string]any](t, b)
		if resp.StatusCode != 200 || len(v["models"]) != 1 {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
		m := v["models"][0]
		st, _ := os.Stat(rs.model.Path)
		if m["name"] != "tiny:latest" || m["model"] != "tiny:latest" || m["size"] != float64(st.Size()) || !hex64.MatchString(m["digest"].(string)) {
			t.Errorf("model %v", m)
		}
		if _, err := time.Parse(time.RFC3339Nano, m["modified_at"].(string)); err != nil {
			t.Error(err)
		}
		checkDetails(t, m["details"].(map[string]any))
		if resp, _ := do(t, "HEAD", rs.URL+"/api/tags", ""); resp.StatusCode != 200 {
			t.Errorf("HEAD: %d", resp.StatusCode)
		}
	})

	t.Run("show", func(t *testing.T) {
		code, v := post(t, rs.URL, "/api/show", `{"model":"tiny:latest"}`)
		if code != 200 {
			t.Fatalf("%d %v", code, v)
		}
		checkDetails(t, v["details"].(map[string]any))
		info := v["model_info"].(map[string]any)
		arch := rs.model.Config.Arch
		if info["general.architecture"] != arch || info[arch+".context_length"] == nil || info["general.name"] != nil {
			t.Errorf("model_info %v", info)
		}
		if toks, ok := info["tokenizer.ggml.tokens"].([]any); !ok || len(toks) != 0 {
			t.Errorf("tokens shown without verbose: %v", info["tokenizer.ggml.tokens"])
		}
		caps, _ := v["capabilities"].([]any)
		if !slices.Contains(caps, any("completion")) || v["template"] == "" || !strings.Contains(v["parameters"].(string), "num_ctx") ||
			!strings.Contains(v["modelfile"].(string), "FROM tiny") || len(v["tensors"].([]any)) != len(rs.model.File.Tensors) {
			t.Errorf("show %v", v)
		}
		_, verbose := post(t, rs.URL, "/api/show", `{"name":"tiny","verbose":true}`)
		if toks := verbose["model_info"].(map[string]any)["tokenizer.ggml.tokens"].([]any); len(toks) != len(rs.model.Tokenizer.Vocab().Tokens) {
			t.Errorf("verbose shows %d tokens", len(toks))
		}
	})

	t.Run("ps", func(t *testing.T) {
		resp, b := do(t, "GET", rs.URL+"/api/ps", "")
		v := decode[map[string][]map[string]any](t, b)
		if resp.StatusCode != 200 || len(v["models"]) != 1 {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
		m := v["models"][0]
		exp, err := time.Parse(time.RFC3339Nano, m["expires_at"].(string))
		if m["name"] != "tiny:latest" || m["size_vram"] != float64(0) || m["size"].(float64) <= 0 || m["context_length"] != float64(512) ||
			err != nil || exp.Before(time.Now().AddDate(100, 0, 0)) {
			t.Errorf("ps %v (%v)", m, err)
		}
		checkDetails(t, m["details"].(map[string]any))
	})

	t.Run("version", func(t *testing.T) {
		resp, b := do(t, "GET", rs.URL+"/api/version", "")
		code, v := resp.StatusCode, decode[map[string]any](t, b)
		if code != 200 || v["version"] != "test-version" || len(v) != 1 {
			t.Errorf("%d %v", code, v)
		}
	})

	t.Run("a real generation's numbers", func(t *testing.T) {
		code, v := post(t, rs.URL, "/api/generate", `{"model":"tiny","prompt":"hi","stream":false,"options":{"num_predict":6}}`)
		if code != 200 || v["done_reason"] != "length" {
			t.Fatalf("%d %v", code, v)
		}
		ctx, _ := v["context"].([]any)
		checkMetrics(t, v, int(v["prompt_eval_count"].(float64)), 6)
		if len(ctx) < int(v["prompt_eval_count"].(float64)) {
			t.Errorf("context of %d tokens", len(ctx))
		}
	})
}

// TestOllamaBeforeModels: the version and the listings answer while no
// model is served; generations wait for one (503).
func TestOllamaBeforeModels(t *testing.T) {
	hs := startHTTP(t, New(Options{Version: "v9"}))
	resp, b := do(t, "GET", hs.URL+"/api/version", "")
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"v9"`) {
		t.Errorf("version %d %s", resp.StatusCode, b)
	}
	if resp, b := do(t, "GET", hs.URL+"/api/tags", ""); resp.StatusCode != 200 || string(b) != `{"models":[]}`+"\n" {
		t.Errorf("tags %d %s", resp.StatusCode, b)
	}
	ollamaError(t, hs.URL, "/api/chat", `{"model":"x","messages":[]}`, 503, "loading")
}

// TestOllamaResidency: an empty chat loads a model on demand, keep_alive 0
// unloads it, and /api/ps lists it while loaded with its expiry.
func TestOllamaResidency(t *testing.T) {
	dm := &demandModel{id: "m"}
	hs, s := demandServer(t, Options{KeepAlive: time.Hour}, dm)
	url := hs.URL
	loaded := func() bool { m, _ := s.Models().Get("m"); return s.Models().Loaded(m) }
	if code, v := post(t, url, "/api/chat", `{"model":"m","messages":[],"keep_alive":"10m"}`); code != 200 || v["done_reason"] != "load" || !loaded() {
		t.Fatalf("load: %d %v", code, v)
	}
	_, b := do(t, "GET", url+"/api/ps", "")
	ps := decode[map[string][]map[string]any](t, b)["models"]
	if len(ps) != 1 {
		t.Fatalf("ps %s", b)
	}
	exp, _ := time.Parse(time.RFC3339Nano, ps[0]["expires_at"].(string))
	if d := time.Until(exp); d < 9*time.Minute || d > 10*time.Minute {
		t.Errorf("expires in %v, want about 10m", d)
	}
	if code, v := post(t, url, "/api/generate", `{"model":"m:latest","keep_alive":0}`); code != 200 || v["done_reason"] != "unload" {
		t.Fatalf("unload: %d %v", code, v)
	}
	eventually(t, "the model unloads", func() bool { return !loaded() })
	if _, b := do(t, "GET", url+"/api/ps", ""); string(b) != `{"models":[]}`+"\n" {
		t.Errorf("ps after the unload: %s", b)
	}
	// A generation loads it again.
	if code, v := post(t, url, "/api/generate", `{"model":"m","prompt":"hi","stream":false,"options":{"num_predict":2}}`); code != 200 || !loaded() {
		t.Errorf("%d %v", code, v)
	}
	// An unload while a request runs waits for it.
	dm.setup = func(e *fakeEngine) { e.delay = 20 * time.Millisecond }
	post(t, url, "/api/chat", `{"model":"m","messages":[],"keep_alive":0}`)
	eventually(t, "the model unloads", func() bool { return !loaded() })
	done := make(chan struct{})
	go func() {
		defer close(done)
		post(t, url, "/api/generate", `{"model":"m","prompt":"hi","stream":false,"options":{"num_predict":10}}`)
	}()
	eventually(t, "the generation holds the model", func() bool { m, _ := s.Models().Get("m"); return s.Models().Leases(m.ID) > 0 })
	if code, v := post(t, url, "/api/generate", `{"model":"m","keep_alive":0}`); code != 200 || v["done_reason"] != "unload" || !loaded() {
		t.Errorf("unload while busy: %d %v, loaded %v", code, v, loaded())
	}
	<-done
	eventually(t, "the model unloads once the generation ends", func() bool { return !loaded() })
}

func TestOllamaEmbed(t *testing.T) {
	fs := newFakeServer(t, Options{}, nil)
	code, v := post(t, fs.URL, "/api/embed", `{"model":"fake-model","input":["hi","there"]}`)
	embs, _ := v["embeddings"].([]any)
	if code != 200 || len(embs) != 2 || v["model"] != "fake-model" || v["prompt_eval_count"].(float64) <= 0 || v["total_duration"] == nil {
		t.Fatalf("%d %v", code, v)
	}
	code, v = post(t, fs.URL, "/api/embed", `{"model":"fake-model","input":"hi","dimensions":2}`)
	vec := v["embeddings"].([]any)[0].([]any)
	if x, y := vec[0].(float64), vec[1].(float64); code != 200 || len(vec) != 2 || math.Abs(x*x+y*y-1) > 1e-5 {
		t.Errorf("dimensions 2: %d %v", code, v)
	}
	if code, v = post(t, fs.URL, "/api/embed", `{"model":"fake-model"}`); code != 200 || len(v["embeddings"].([]any)) != 0 {
		t.Errorf("no input: %d %v", code, v)
	}
	long := `"` + strings.Repeat("word ", 300) + `"`
	ollamaError(t, fs.URL, "/api/embed", `{"model":"fake-model","input":`+long+`,"truncate":false}`, 400, "the input length exceeds the context length")
	if code, v = post(t, fs.URL, "/api/embed", `{"model":"fake-model","input":`+long+`}`); code != 200 || v["prompt_eval_count"] != float64(fs.eng.maxLen) {
		t.Errorf("truncated: %d %v", code, v)
	}
	ollamaError(t, fs.URL, "/api/embed", `{"model":"fake-model","input":[1,2]}`, 400, "invalid input type")
	code, v = post(t, fs.URL, "/api/embeddings", `{"model":"fake-model","prompt":"hi"}`)
	if emb, _ := v["embedding"].([]any); code != 200 || len(emb) != 3 || len(v) != 1 {
		t.Errorf("embeddings: %d %v", code, v)
	}
	if code, v = post(t, fs.URL, "/api/embeddings", `{"model":"fake-model"}`); code != 200 || len(v["embedding"].([]any)) != 0 {
		t.Errorf("empty prompt: %d %v", code, v)
	}
}

func TestOllamaPull(t *testing.T) {
	var mu sync.Mutex
	var names []string
	pull := func(ctx context.Context, name string, progress func(ollama.PullProgress)) error {
		mu.Lock()
		names = append(names, name)
		mu.Unlock()
		switch name {
		case "bad":
			return session.Invalid("model", session.CodeInvalidValue, "not a reference")
		case "broken":
			progress(ollama.PullProgress{Status: "pulling manifest"})
			return session.NotFound("model", session.CodeModelNotFound, "not found on the Hub")
		}
		progress(ollama.PullProgress{Status: "pulling manifest"})
		for i := int64(0); i <= 4; i++ {
			progress(ollama.PullProgress{Status: "pulling abc", Digest: "sha256:abc", Total: 4, Completed: i})
		}
		return nil
	}
	hs := startHTTP(t, New(Options{Pull: pull}))
	resp, b := do(t, "POST", hs.URL+"/api/pull", `{"name":"hf.co/o/r:Q4_K_M"}`)
	lines := ndjson(t, resp, b)
	if len(lines) < 3 || lines[0]["status"] != "pulling manifest" || lines[len(lines)-1]["status"] != "success" {
		t.Fatalf("%s", b)
	}
	last := lines[len(lines)-2]
	if last["total"] != float64(4) || last["completed"] != float64(4) || last["digest"] != "sha256:abc" {
		t.Errorf("the last progress %v", last)
	}
	if code, v := post(t, hs.URL, "/api/pull", `{"model":"o/r","stream":false}`); code != 200 || v["status"] != "success" || len(v) != 1 {
		t.Errorf("whole: %d %v", code, v)
	}
	if names[0] != "hf.co/o/r:Q4_K_M" || names[1] != "o/r" {
		t.Errorf("names %v", names)
	}
	ollamaError(t, hs.URL, "/api/pull", `{"model":"bad"}`, 400, "not a reference")
	ollamaError(t, hs.URL, "/api/pull", `{}`, 400, "model is required")
	resp, b = do(t, "POST", hs.URL+"/api/pull", `{"model":"broken"}`)
	if lines := ndjson(t, resp, b); len(lines) != 2 || lines[1]["error"] != "not found on the Hub" {
		t.Errorf("broken: %s", b)
	}
	off := startHTTP(t, New(Options{}))
	ollamaError(t, off.URL, "/api/pull", `{"model":"o/r"}`, 403, "pulling models is turned off")
}

// TestOllamaThinkQwen3 runs a tiny qwen3 with Qwen3's own chat template
// (from ../shared): think false renders the empty think block that turns
// thinking off, think true (and no think) does not; /api/show says the
// model thinks and knows tools.
func TestOllamaThinkQwen3(t *testing.T) {
	var mu sync.Mutex
	var prompts [][]tokenizer.ID
	rs := startRealServer(t, realOptions{shared: []string{"models", "mini", "mini-qwen3-F32.gguf"}, template: "Qwen-Qwen3-0.6B.jinja",
		wrap: func(e session.Engine) session.Engine {
			return promptRecorder{Engine: e, record: func(p []tokenizer.ID) { mu.Lock(); prompts = append(prompts, p); mu.Unlock() }}
		}})
	last := func() string {
		mu.Lock()
		defer mu.Unlock()
		return rs.model.Tokenizer.Decode(prompts[len(prompts)-1])
	}
	for _, tc := range []struct {
		think string
		empty bool
	}{{`,"think":false`, true}, {`,"think":true`, false}, {``, false}, {`,"think":"high"`, false}} {
		code, v := post(t, rs.URL, "/api/chat", `{"model":"mini-qwen3-F32","stream":false,"messages":[{"role":"user","content":"hi"}],"options":{"num_predict":3}`+tc.think+`}`)
		if code != 200 || v["done"] != true {
			t.Fatalf("%s: %d %v", tc.think, code, v)
		}
		p := last()
		if got := strings.HasSuffix(p, "<|im_start|>assistant\n<think>\n\n</think>\n\n"); got != tc.empty || !strings.HasSuffix(p, "<|im_start|>assistant\n"+map[bool]string{true: "<think>\n\n</think>\n\n"}[tc.empty]) {
			t.Errorf("think %q: prompt %q", tc.think, p)
		}
	}
	code, v := post(t, rs.URL, "/api/show", `{"model":"mini-qwen3-F32"}`)
	caps, _ := v["capabilities"].([]any)
	if code != 200 || !slices.Contains(caps, any("thinking")) || !slices.Contains(caps, any("tools")) || !strings.Contains(v["template"].(string), "enable_thinking") {
		t.Errorf("show: %d %v", code, caps)
	}
}

// promptRecorder is an engine that records the prompts submitted to it.
type promptRecorder struct {
	session.Engine
	record func([]tokenizer.ID)
}

func (p promptRecorder) Submit(ctx context.Context, r backends.Request) (*backends.Stream, error) {
	p.record(r.Prompt)
	return p.Engine.Submit(ctx, r)
}

// TestOllamaThinking separates a thinking model's reasoning into
// message.thinking (and generate's thinking), streamed and whole, over a
// scripted output and Qwen3's template.
func TestOllamaThinking(t *testing.T) {
	src, err := os.ReadFile(shared.Path(t, "templates", "Qwen-Qwen3-0.6B.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := chat.Parse(string(src))
	if err != nil {
		t.Fatal(err)
	}
	tok := testTokenizer(t)
	fs := newFakeServerWith(t, Options{}, templateChat{tmpl}, func(e *fakeEngine) {
		e.maxLen = 8192
		e.script = func(backends.Request) []tokenizer.ID {
			return tok.Encode("<think>\nThe user greets me.\n</think>\n\nHello!", tokenizer.EncodeOptions{})
		}
	})
	code, v := post(t, fs.URL, "/api/chat", `{"model":"fake-model","stream":false,"messages":[{"role":"user","content":"hi"}]}`)
	msg := v["message"].(map[string]any)
	if code != 200 || msg["thinking"] != "The user greets me." || msg["content"] != "Hello!" {
		t.Fatalf("%d %v", code, v)
	}
	resp, b := do(t, "POST", fs.URL+"/api/chat", `{"model":"fake-model","messages":[{"role":"user","content":"hi"}],"think":true}`)
	var thinking, content string
	for _, l := range ndjson(t, resp, b) {
		m := l["message"].(map[string]any)
		th, _ := m["thinking"].(string)
		thinking += th
		content += m["content"].(string)
	}
	if strings.TrimSpace(thinking) != "The user greets me." || strings.TrimSpace(content) != "Hello!" {
		t.Errorf("streamed thinking %q content %q", thinking, content)
	}
	code, v = post(t, fs.URL, "/api/generate", `{"model":"fake-model","stream":false,"prompt":"hi"}`)
	if code != 200 || v["thinking"] != "The user greets me." || v["response"] != "Hello!" {
		t.Errorf("generate: %d %v", code, v)
	}
	// A past turn's thinking reaches the template as reasoning_content.
	post(t, fs.URL, "/api/chat", `{"model":"fake-model","stream":false,"messages":[{"role":"user","content":"hi"},`+
		`{"role":"assistant","content":"Hello!","thinking":"They greet."},{"role":"user","content":"again"}],"options":{"num_predict":1}}`)
	if p := tok.Decode(fs.lastRequest(t).Prompt); !strings.Contains(p, "Hello!") {
		t.Errorf("prompt %q", p)
	}
}
