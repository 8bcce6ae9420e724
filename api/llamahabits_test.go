package api

import (
	"encoding/json"
	"strings"
	"testing"

	wire "github.com/ruvllm/ruvllm/api/openai"
)

// llama-server's habits on the OpenAI routes: the first chunk's content
// is null, and the last chunk (the usage chunk, or the finish) carries
// the timings, as every content chunk does with timings_per_token; a
// response carries them beside the usage.
func TestLlamaTimings(t *testing.T) {
	fs := newFakeServer(t, Options{}, nil)
	fs.eng.script = scriptOf(t, fs.tok, "▁Hello", "▁world")
	type chunk struct {
		Choices []struct {
			Delta        map[string]json.RawMessage `json:"delta"`
			FinishReason *string                    `json:"finish_reason"`
		} `json:"choices"`
		Usage   *wire.Usage     `json:"usage"`
		Timings *map[string]any `json:"timings"`
	}
	for _, tc := range []struct {
		name     string
		extra    string
		perToken bool
		usage    bool
	}{
		{"plain", ``, false, false},
		{"usage", `,"stream_options":{"include_usage":true}`, false, true},
		{"timings_per_token", `,"stream_options":{"include_usage":true},"timings_per_token":true`, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, b := do(t, "POST", fs.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"stream":true`+tc.extra+`}`)
			if resp.StatusCode != 200 {
				t.Fatalf("%d %s", resp.StatusCode, b)
			}
			events := sseData(t, b)
			events = events[:len(events)-1] // [DONE]
			for i, ev := range events {
				c := decode[chunk](t, []byte(ev))
				last := i == len(events)-1
				switch {
				case i == 0:
					if string(c.Choices[0].Delta["content"]) != "null" || string(c.Choices[0].Delta["role"]) != `"assistant"` || c.Timings != nil {
						t.Errorf("first chunk %s", ev)
					}
				case len(c.Choices) == 0:
					if !tc.usage || !last || c.Usage == nil || c.Timings == nil || (*c.Timings)["predicted_n"] != float64(c.Usage.CompletionTokens) {
						t.Errorf("usage chunk %s", ev)
					}
				case c.Choices[0].FinishReason != nil:
					if _, has := c.Choices[0].Delta["content"]; has || (c.Timings != nil) != (tc.perToken || !tc.usage) {
						t.Errorf("finish chunk %s", ev)
					}
				default:
					if string(c.Choices[0].Delta["content"]) == `""` || (c.Timings != nil) != tc.perToken {
						t.Errorf("content chunk %s", ev)
					}
				}
			}
		})
	}
	resp, b := do(t, "POST", fs.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}]}`)
	r := decode[struct {
		Usage   wire.Usage     `json:"usage"`
		Timings map[string]any `json:"timings"`
	}](t, b)
	if resp.StatusCode != 200 || r.Timings["predicted_n"] != float64(r.Usage.CompletionTokens) ||
		r.Timings["prompt_n"].(float64)+r.Timings["cache_n"].(float64) != float64(r.Usage.PromptTokens) {
		t.Errorf("chat response %s", b)
	}
	resp, b = do(t, "POST", fs.URL+"/v1/completions", `{"prompt":"hi","max_tokens":2}`)
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"timings":{`) || !strings.Contains(string(b), `"choices"`) {
		t.Errorf("text completion %s", b)
	}
}

// /completions without /v1 is llama-server's native completion; /v1/
// completions stays OpenAI's.
func TestLlamaCompletionsRoutes(t *testing.T) {
	fs := newFakeServer(t, Options{}, nil)
	fs.eng.script = scriptOf(t, fs.tok, "▁Hello")
	resp, b := do(t, "POST", fs.URL+"/completions", `{"prompt":"hi"}`)
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"content":" Hello"`) || strings.Contains(string(b), `"choices"`) {
		t.Errorf("/completions: %d %s", resp.StatusCode, b)
	}
	resp, b = do(t, "POST", fs.URL+"/v1/completions", `{"prompt":"hi"}`)
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"text_completion"`) {
		t.Errorf("/v1/completions: %d %s", resp.StatusCode, b)
	}
}

// With AnyModelName a server of one model serves any name and repeats it;
// without, the name is a 404.
func TestAnyModelName(t *testing.T) {
	body := `{"model":"gpt-3.5-turbo","messages":[{"role":"user","content":"hi"}]}`
	fs := newFakeServer(t, Options{AnyModelName: true}, nil)
	fs.eng.script = scriptOf(t, fs.tok, "▁Hello")
	resp, b := do(t, "POST", fs.URL+"/v1/chat/completions", body)
	if resp.StatusCode != 200 || decode[struct {
		Model string `json:"model"`
	}](t, b).Model != "gpt-3.5-turbo" {
		t.Errorf("any name: %d %s", resp.StatusCode, b)
	}
	if resp, b = do(t, "POST", fs.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}]}`); !strings.Contains(string(b), `"model":"fake-model"`) {
		t.Errorf("no name: %d %s", resp.StatusCode, b)
	}
	strict := newFakeServer(t, Options{}, nil)
	if resp, b := do(t, "POST", strict.URL+"/v1/chat/completions", body); resp.StatusCode != 404 {
		t.Errorf("without AnyModelName: %d %s", resp.StatusCode, b)
	}
}

// Auth on llama-server's routes answers in its shape; PublicModels lists
// the models without a key; preflights of its routes are answered as it
// does.
func TestLlamaAuthAndCORS(t *testing.T) {
	fs := newFakeServer(t, Options{APIKeys: []string{"k"}, PublicModels: true, CORSOrigins: []string{"*"}}, nil)
	fs.eng.script = scriptOf(t, fs.tok, "▁Hello")
	resp, b := do(t, "POST", fs.URL+"/completions", `{"prompt":"hi"}`, "Authorization", "Bearer nope")
	e := decode[struct {
		Error map[string]any `json:"error"`
	}](t, b)
	if resp.StatusCode != 401 || e.Error["type"] != "authentication_error" || e.Error["code"] != float64(401) {
		t.Errorf("wrong key on /completions: %d %s", resp.StatusCode, b)
	}
	if resp, b := do(t, "POST", fs.URL+"/completions", `{"prompt":"hi"}`, "Authorization", "Bearer k"); resp.StatusCode != 200 || !strings.Contains(string(b), `"content"`) {
		t.Errorf("right key: %d %s", resp.StatusCode, b)
	}
	for _, path := range []string{"/models", "/v1/models"} {
		if resp, b := do(t, "GET", fs.URL+path, ""); resp.StatusCode != 200 || !strings.Contains(string(b), "fake-model") {
			t.Errorf("public %s: %d %s", path, resp.StatusCode, b)
		}
	}
	if resp, _ := do(t, "GET", fs.URL+"/v1/models/fake-model", ""); resp.StatusCode != 401 {
		t.Errorf("a model card needs the key: %d", resp.StatusCode)
	}
	closed := newFakeServer(t, Options{APIKeys: []string{"k"}}, nil)
	if resp, _ := do(t, "GET", closed.URL+"/models", ""); resp.StatusCode != 401 {
		t.Errorf("without PublicModels: %d", resp.StatusCode)
	}

	pre := []string{"Origin", "web.example", "Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "Authorization"}
	resp, _ = do(t, "OPTIONS", fs.URL+"/completions", "", pre...)
	h := resp.Header
	if resp.StatusCode != 200 || h.Get("Access-Control-Allow-Origin") != "web.example" || h.Get("Access-Control-Allow-Credentials") != "true" ||
		h.Get("Access-Control-Allow-Methods") != "GET, POST" || h.Get("Access-Control-Allow-Headers") != "*" {
		t.Errorf("llama-server preflight: %d %v", resp.StatusCode, h)
	}
	resp, _ = do(t, "OPTIONS", fs.URL+"/v1/chat/completions", "", pre...)
	if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("OpenAI route preflight: %d %v", resp.StatusCode, resp.Header)
	}
}
