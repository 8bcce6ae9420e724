package api

import (
	"bufio"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ruvllm/ruvllm/api/jsonhttp"
	"github.com/ruvllm/ruvllm/api/openai"
	"github.com/ruvllm/ruvllm/models/chat"
	"github.com/ruvllm/ruvllm/models/tokenizer"
	"github.com/ruvllm/ruvllm/session"
)

// TestErrors checks every refusal: status, OpenAI's error shape and the
// field named; none of them may reach the engine.
func TestErrors(t *testing.T) {
	fs := newFakeServer(t, Options{MaxN: 4, MaxBodyBytes: 4096}, nil)
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	const chat, text = "/v1/chat/completions", "/v1/completions"
	tests := []struct {
		name, method, path, body string
		status                   int
		param, code              string
	}{
		{"malformed JSON", "POST", chat, `{"messages":`, 400, "", session.CodeInvalidJSON},
		{"not an object", "POST", chat, `[1,2]`, 400, "", session.CodeInvalidJSON},
		{"trailing data", "POST", chat, `{` + msgs + `} {}`, 400, "", session.CodeInvalidJSON},
		{"empty body", "POST", chat, ``, 400, "", session.CodeInvalidJSON},
		{"missing messages", "POST", chat, `{}`, 400, "messages", session.CodeMissing},
		{"null messages", "POST", chat, `{"messages":null}`, 400, "messages", session.CodeMissing},
		{"empty messages", "POST", chat, `{"messages":[]}`, 400, "messages", session.CodeInvalidValue},
		{"messages not a list", "POST", chat, `{"messages":"hi"}`, 400, "messages", session.CodeInvalidType},
		{"message not an object", "POST", chat, `{"messages":["hi"]}`, 400, "messages[0]", session.CodeInvalidType},
		{"unknown role", "POST", chat, `{"messages":[{"role":"wizard","content":"hi"}]}`, 400, "messages[0].role", session.CodeInvalidValue},
		{"role of wrong type", "POST", chat, `{"messages":[{"role":1,"content":"hi"}]}`, 400, "messages[0].role", session.CodeInvalidType},
		{"missing role", "POST", chat, `{"messages":[{"content":"hi"}]}`, 400, "messages[0].role", session.CodeMissing},
		{"missing content", "POST", chat, `{"messages":[{"role":"user"}]}`, 400, "messages[0].content", session.CodeMissing},
		{"content of wrong type", "POST", chat, `{"messages":[{"role":"user","content":5}]}`, 400, "messages[0].content", session.CodeInvalidType},
		{"image part", "POST", chat, `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, 400, "messages[0].content[0].type", session.CodeUnsupported},
		{"tool message without id", "POST", chat, `{"messages":[{"role":"tool","content":"42"}]}`, 400, "messages[0].tool_call_id", session.CodeMissing},
		{"unknown message field", "POST", chat, `{"messages":[{"role":"user","content":"hi","mood":"happy"}]}`, 400, "messages[0].mood", session.CodeUnknownParam},
		{"temperature too high", "POST", chat, `{` + msgs + `,"temperature":2.5}`, 400, "temperature", session.CodeInvalidValue},
		{"temperature negative", "POST", chat, `{` + msgs + `,"temperature":-0.1}`, 400, "temperature", session.CodeInvalidValue},
		{"temperature a string", "POST", chat, `{` + msgs + `,"temperature":"hot"}`, 400, "temperature", session.CodeInvalidType},
		{"top_p zero", "POST", chat, `{` + msgs + `,"top_p":0}`, 400, "top_p", session.CodeInvalidValue},
		{"top_p above one", "POST", chat, `{` + msgs + `,"top_p":1.5}`, 400, "top_p", session.CodeInvalidValue},
		{"presence_penalty", "POST", chat, `{` + msgs + `,"presence_penalty":3}`, 400, "presence_penalty", session.CodeInvalidValue},
		{"n zero", "POST", chat, `{` + msgs + `,"n":0}`, 400, "n", session.CodeInvalidValue},
		{"n over the cap", "POST", chat, `{` + msgs + `,"n":5}`, 400, "n", session.CodeInvalidValue},
		{"n fractional", "POST", chat, `{` + msgs + `,"n":1.5}`, 400, "n", session.CodeInvalidType},
		{"stream not a boolean", "POST", chat, `{` + msgs + `,"stream":"yes"}`, 400, "stream", session.CodeInvalidType},
		{"max_tokens zero", "POST", chat, `{` + msgs + `,"max_tokens":0}`, 400, "max_tokens", session.CodeInvalidValue},
		{"max_tokens negative", "POST", chat, `{` + msgs + `,"max_tokens":-5}`, 400, "max_tokens", session.CodeInvalidValue},
		{"max_completion_tokens zero", "POST", chat, `{` + msgs + `,"max_completion_tokens":0}`, 400, "max_completion_tokens", session.CodeInvalidValue},
		{"context exceeded", "POST", chat, `{` + msgs + `,"max_tokens":100000}`, 400, "max_tokens", session.CodeContextLength},
		{"context exceeded before a stream", "POST", chat, `{` + msgs + `,"max_tokens":100000,"stream":true}`, 400, "max_tokens", session.CodeContextLength},
		{"prompt longer than the context", "POST", text, `{"prompt":"` + strings.Repeat("x", 300) + `"}`, 400, "prompt", session.CodeContextLength},
		{"conversation longer than the context", "POST", chat, `{"messages":[{"role":"user","content":"` + strings.Repeat("x", 300) + `"}]}`, 400, "messages", session.CodeContextLength},
		{"stop of wrong type", "POST", chat, `{` + msgs + `,"stop":5}`, 400, "stop", session.CodeInvalidType},
		{"stop list of wrong type", "POST", chat, `{` + msgs + `,"stop":["a",5]}`, 400, "stop[1]", session.CodeInvalidType},
		{"empty stop", "POST", chat, `{` + msgs + `,"stop":[""]}`, 400, "stop", session.CodeInvalidValue},
		{"logit_bias bad key", "POST", chat, `{` + msgs + `,"logit_bias":{"x":1}}`, 400, "logit_bias", session.CodeInvalidValue},
		{"logit_bias outside the vocabulary", "POST", chat, `{` + msgs + `,"logit_bias":{"99999":1}}`, 400, "logit_bias", session.CodeInvalidValue},
		{"logit_bias too large", "POST", chat, `{` + msgs + `,"logit_bias":{"5":101}}`, 400, "logit_bias", session.CodeInvalidValue},
		{"logit_bias not an object", "POST", chat, `{` + msgs + `,"logit_bias":[1]}`, 400, "logit_bias", session.CodeInvalidType},
		{"top_logprobs without logprobs", "POST", chat, `{` + msgs + `,"top_logprobs":2}`, 400, "top_logprobs", session.CodeInvalidValue},
		{"top_logprobs too many", "POST", chat, `{` + msgs + `,"logprobs":true,"top_logprobs":21}`, 400, "top_logprobs", session.CodeInvalidValue},
		{"stream_options without stream", "POST", chat, `{` + msgs + `,"stream_options":{"include_usage":true}}`, 400, "stream_options", session.CodeInvalidValue},
		{"seed fractional", "POST", chat, `{` + msgs + `,"seed":1.5}`, 400, "seed", session.CodeInvalidType},
		{"tool of another type", "POST", chat, `{` + msgs + `,"tools":[{"type":"retrieval"}]}`, 400, "tools[0].type", session.CodeUnsupported},
		{"tool without a name", "POST", chat, `{` + msgs + `,"tools":[{"type":"function","function":{}}]}`, 400, "tools[0].function.name", session.CodeMissing},
		{"tool name with a space", "POST", chat, `{` + msgs + `,"tools":[{"type":"function","function":{"name":"a b"}}]}`, 400, "tools[0].function.name", session.CodeInvalidValue},
		{"tool parameters not an object", "POST", chat, `{` + msgs + `,"tools":[{"type":"function","function":{"name":"f","parameters":[]}}]}`,
			400, "tools[0].function.parameters", session.CodeInvalidType},
		{"tool_choice required without tools", "POST", chat, `{` + msgs + `,"tool_choice":"required"}`, 400, "tool_choice", session.CodeInvalidValue},
		{"tool_choice unknown", "POST", chat, `{` + msgs + `,"tool_choice":"always"}`, 400, "tool_choice", session.CodeInvalidValue},
		{"tool_choice names no tool", "POST", chat, `{` + msgs + `,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"g"}}}`,
			400, "tool_choice.function.name", session.CodeInvalidValue},
		{"tool parameters unsupported", "POST", chat, `{` + msgs + `,"tools":[{"type":"function","function":{"name":"f","parameters":{"not":{}}}}],"tool_choice":"required"}`,
			400, "tools", session.CodeInvalidValue},
		{"parallel_tool_calls not a boolean", "POST", chat, `{` + msgs + `,"parallel_tool_calls":"yes"}`, 400, "parallel_tool_calls", session.CodeInvalidType},
		{"response_format with a required call", "POST", chat, `{` + msgs + `,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required","response_format":{"type":"json_object"}}`,
			400, "response_format", session.CodeUnsupported},
		{"json_schema unsupported", "POST", chat, `{` + msgs + `,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"not":{}}}}}`,
			400, "response_format.json_schema.schema", session.CodeInvalidValue},
		{"json_schema missing", "POST", chat, `{` + msgs + `,"response_format":{"type":"json_schema"}}`, 400, "response_format.json_schema", session.CodeMissing},
		{"json_schema bad name", "POST", chat, `{` + msgs + `,"response_format":{"type":"json_schema","json_schema":{"name":"a b"}}}`,
			400, "response_format.json_schema.name", session.CodeInvalidValue},
		{"json_schema not JSON", "POST", chat, `{` + msgs + `,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":7}}}`,
			400, "response_format.json_schema.schema", session.CodeInvalidValue},
		{"response_format type", "POST", chat, `{` + msgs + `,"response_format":{"type":"xml"}}`, 400, "response_format.type", session.CodeInvalidValue},
		{"response_format in completions", "POST", text, `{"prompt":"x","response_format":{"type":"json_schema","json_schema":{"schema":{"not":{}}}}}`,
			400, "response_format.json_schema.schema", session.CodeInvalidValue},
		{"unknown parameter", "POST", chat, `{` + msgs + `,"frobnicate":1}`, 400, "frobnicate", session.CodeUnknownParam},
		{"template refusal", "POST", chat, `{"messages":[{"role":"user","content":"boom"}]}`, 400, "messages", session.CodeTemplate},
		{"unknown model", "POST", chat, `{"model":"gpt-9",` + msgs + `}`, 404, "model", session.CodeModelNotFound},
		{"model of wrong type", "POST", chat, `{"model":7,` + msgs + `}`, 400, "model", session.CodeInvalidType},
		{"unknown model in completions", "POST", text, `{"model":"gpt-9","prompt":"x"}`, 404, "model", session.CodeModelNotFound},
		{"unknown model in embeddings", "POST", "/v1/embeddings", `{"model":"gpt-9","input":"x"}`, 404, "model", session.CodeModelNotFound},
		{"unknown model by id", "GET", "/v1/models/gpt-9", ``, 404, "model", session.CodeModelNotFound},
		{"missing prompt", "POST", text, `{}`, 400, "prompt", session.CodeMissing},
		{"prompt of wrong type", "POST", text, `{"prompt":{"a":1}}`, 400, "prompt", session.CodeInvalidType},
		{"empty prompt list", "POST", text, `{"prompt":[]}`, 400, "prompt", session.CodeInvalidValue},
		{"prompt token outside the vocabulary", "POST", text, `{"prompt":[1,99999]}`, 400, "prompt", session.CodeInvalidValue},
		{"too many choices", "POST", text, `{"prompt":["a","b","c"],"n":2}`, 400, "n", session.CodeInvalidValue},
		{"echo with logprobs streamed", "POST", text, `{"prompt":"x","echo":true,"logprobs":1,"stream":true}`, 400, "stream", session.CodeUnsupported},
		{"max_tokens 0 without echo", "POST", text, `{"prompt":"x","max_tokens":0}`, 400, "max_tokens", session.CodeInvalidValue},
		{"legacy logprobs too many", "POST", text, `{"prompt":"x","logprobs":6}`, 400, "logprobs", session.CodeInvalidValue},
		{"suffix", "POST", text, `{"prompt":"x","suffix":"y"}`, 400, "suffix", session.CodeUnsupported},
		{"best_of", "POST", text, `{"prompt":"x","best_of":3}`, 400, "best_of", session.CodeUnsupported},
		{"embedding of nothing", "POST", "/v1/embeddings", `{"input":""}`, 400, "input", session.CodeInvalidValue},
		{"embedding without input", "POST", "/v1/embeddings", `{}`, 400, "input", session.CodeMissing},
		{"embedding format", "POST", "/v1/embeddings", `{"input":"x","encoding_format":"hex"}`, 400, "encoding_format", session.CodeInvalidValue},
		{"embedding too long", "POST", "/v1/embeddings", `{"input":"` + strings.Repeat("y", 300) + `"}`, 400, "input", session.CodeContextLength},
		{"tokenize without content", "POST", "/tokenize", `{}`, 400, "content", session.CodeMissing},
		{"detokenize bad id", "POST", "/detokenize", `{"tokens":[-1]}`, 400, "tokens[0]", session.CodeInvalidValue},
		{"unknown path", "GET", "/v1/nothing", ``, 404, "", codeNotFound},
		{"wrong method", "GET", chat, ``, 405, "", codeMethod},
		{"body too large", "POST", chat, `{"messages":[{"role":"user","content":"` + strings.Repeat("x", 5000) + `"}]}`, 413, "", jsonhttp.CodeTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, b := do(t, tc.method, fs.URL+tc.path, tc.body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, b)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("content type %q", ct)
			}
			e := decode[wireError](t, b)
			wantType := session.TypeInvalidRequest
			if tc.code == session.CodeContextLength {
				// llama-server's type; the code stays OpenAI's.
				wantType = openai.TypeExceedContext
			}
			if e.Error.Message == "" || e.Error.Type != wantType {
				t.Errorf("error %s", b)
			}
			if param := deref(e.Error.Param); param != tc.param {
				t.Errorf("param %q, want %q: %s", param, tc.param, b)
			}
			if code := deref(e.Error.Code); code != tc.code {
				t.Errorf("code %q, want %q: %s", code, tc.code, b)
			}
		})
	}
	if got := fs.eng.requests(); len(got) != 0 {
		t.Errorf("%d refused requests reached the engine", len(got))
	}
	resp, _ := do(t, "DELETE", fs.URL+"/v1/models", "")
	if resp.StatusCode != 405 || resp.Header.Get("Allow") != "GET" {
		t.Errorf("405 with Allow %q", resp.Header.Get("Allow"))
	}
}

// TestContentType checks that a body declared as anything but JSON is
// refused with 415 on every JSON route, while JSON with parameters, a
// +json type and no declared type at all are read.
func TestContentType(t *testing.T) {
	fs := newFakeServer(t, Options{}, nil)
	routes := map[string]string{
		"/v1/chat/completions": `{"messages":[{"role":"user","content":"hi"}],"max_tokens":1}`,
		"/v1/completions":      `{"prompt":"hi","max_tokens":1}`,
		"/v1/embeddings":       `{"input":"hi"}`,
		"/tokenize":            `{"content":"hi"}`,
		"/detokenize":          `{"tokens":[5]}`,
	}
	tests := []struct {
		contentType string
		status      int
	}{
		{"application/json", 200},
		{"application/json; charset=utf-8", 200},
		{"Application/JSON", 200},
		{"application/vnd.api+json", 200},
		{"", 200},
		{"text/plain", 415},
		// curl -d without -H: the body is the JSON it is, as llama-server
		// and ollama read it.
		{"application/x-www-form-urlencoded", 200},
		{"multipart/form-data; boundary=x", 415},
		{"application/jsonx", 415},
		{"not a media type", 415},
	}
	for path, body := range routes {
		for _, tc := range tests {
			t.Run(path+"/"+tc.contentType, func(t *testing.T) {
				req, err := http.NewRequest("POST", fs.URL+path, strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				if tc.contentType != "" {
					req.Header.Set("Content-Type", tc.contentType)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				var e wireError
				json.NewDecoder(resp.Body).Decode(&e)
				if resp.StatusCode != tc.status {
					t.Fatalf("status %d, want %d: %+v", resp.StatusCode, tc.status, e)
				}
				if tc.status == 415 && (deref(e.Error.Code) != jsonhttp.CodeMediaType || e.Error.Type != session.TypeInvalidRequest) {
					t.Errorf("error %+v", e)
				}
			})
		}
	} // A form that is a form, not JSON, stays a 415.
	for _, body := range []string{"prompt=hi&max_tokens=1", "", "[1,2]"} {
		resp, b := do(t, "POST", fs.URL+"/v1/completions", body, "Content-Type", "application/x-www-form-urlencoded")
		wantError(t, "form "+body, resp, b, 415, jsonhttp.CodeMediaType, "must be JSON")
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func TestQueueFull(t *testing.T) {
	fs := newFakeServer(t, Options{}, func(e *fakeEngine) { e.capacity = 2; e.delay = 5 * time.Millisecond })
	// n=3 needs three engine requests; the third is refused and the two
	// already queued are cancelled.
	resp, b := do(t, "POST", fs.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"n":3,"max_tokens":50}`)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("status %d, Retry-After %q: %s", resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
	if e := decode[wireError](t, b); e.Error.Type != session.TypeRateLimit {
		t.Errorf("%s", b)
	}
	fs.eng.waitIdle(t, 2*time.Second)
	if resp, b := do(t, "POST", fs.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"n":2,"max_tokens":2}`); resp.StatusCode != 200 {
		t.Fatalf("after the 429: status %d: %s", resp.StatusCode, b)
	}
}

func TestHealthWhileLoading(t *testing.T) {
	s := New(Options{})
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	resp, b := do(t, "GET", hs.URL+"/health", "")
	if resp.StatusCode != 503 || decode[wireError](t, b).Error.Type != session.TypeUnavailable {
		t.Fatalf("loading: status %d: %s", resp.StatusCode, b)
	}
	if resp, _ := do(t, "POST", hs.URL+"/v1/chat/completions", `{}`); resp.StatusCode != 503 {
		t.Errorf("chat while loading: status %d", resp.StatusCode)
	}
	tk := testTokenizer(t)
	// Registered but still loading at start: not healthy yet.
	s.SetStarting(true)
	if err := s.AddModel(&session.Model{ID: "m", Tokenizer: tk, Engine: newFakeEngine(tk)}); err != nil {
		t.Fatal(err)
	}
	if resp, b := do(t, "GET", hs.URL+"/health", ""); resp.StatusCode != 503 || decode[wireError](t, b).Error.Type != session.TypeUnavailable {
		t.Fatalf("registered, starting: status %d: %s", resp.StatusCode, b)
	}
	s.SetStarting(false)
	if resp, b := do(t, "GET", hs.URL+"/health", ""); resp.StatusCode != 200 || string(b) != "{\"status\":\"ok\"}\n" {
		t.Fatalf("ready: status %d: %s", resp.StatusCode, b)
	}
}

func TestAuth(t *testing.T) {
	fs := newFakeServer(t, Options{APIKeys: []string{"k1", "k2"}}, nil)
	tests := []struct {
		method, path, header string
		status               int
	}{
		{"GET", "/v1/models", "BEARER k1", 200}, // the scheme is case-insensitive
		{"GET", "/v1/models", "bearer k2", 200},
		{"GET", "/v1/models", "", 401},
		{"GET", "/v1/models", "Bearer wrong", 401},
		{"GET", "/v1/models", "Basic azE=", 401},
		{"GET", "/v1/models", "Bearer k1", 200},
		{"GET", "/v1/models", "Bearer k2", 200},
		{"POST", "/v1/chat/completions", "", 401},
		{"GET", "/metrics", "", 401},
		{"GET", "/health", "", 200},
		{"GET", "/v1/nothing", "Bearer k1", 404},
	}
	for _, tc := range tests {
		resp, b := do(t, tc.method, fs.URL+tc.path, "", "Authorization", tc.header)
		if resp.StatusCode != tc.status {
			t.Errorf("%s with %q: status %d, want %d: %s", tc.path, tc.header, resp.StatusCode, tc.status, b)
		}
		if tc.status == 401 && deref(decode[wireError](t, b).Error.Code) != codeInvalidAPIKey {
			t.Errorf("401 body %s", b)
		}
	}
	// With PublicMetrics a scraper needs no key; the rest still does.
	pub := newFakeServer(t, Options{APIKeys: []string{"k1"}, PublicMetrics: true}, nil)
	for path, status := range map[string]int{"/metrics": 200, "/v1/models": 401} {
		if resp, b := do(t, "GET", pub.URL+path, ""); resp.StatusCode != status {
			t.Errorf("public metrics: %s: status %d, want %d: %s", path, resp.StatusCode, status, b)
		}
	}
	// Anthropic's clients send the key as x-api-key.
	for key, status := range map[string]int{"k1": 200, "wrong": 401} {
		if resp, b := do(t, "GET", fs.URL+"/v1/models", "", "x-api-key", key); resp.StatusCode != status {
			t.Errorf("x-api-key %q: status %d, want %d: %s", key, resp.StatusCode, status, b)
		}
	}
}

func TestModels(t *testing.T) {
	fs := newFakeServer(t, Options{}, nil)
	_, b := do(t, "GET", fs.URL+"/v1/models", "")
	l := decode[modelList](t, b)
	if l.Object != "list" || len(l.Data) != 1 || l.Data[0].ID != "fake-model" || l.Data[0].Object != "model" || l.Data[0].Created == 0 || l.Data[0].OwnedBy == "" {
		t.Errorf("%s", b)
	}
	resp, b := do(t, "GET", fs.URL+"/v1/models/fake-model", "")
	if m := decode[modelObject](t, b); resp.StatusCode != 200 || m.ID != "fake-model" {
		t.Errorf("%d %s", resp.StatusCode, b)
	}
}

func TestEmbeddings(t *testing.T) {
	fs := newFakeServer(t, Options{}, nil)
	resp, b := do(t, "POST", fs.URL+"/v1/embeddings", `{"input":["hello","world!"],"model":"fake-model"}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	type embeddings struct {
		Object string
		Model  string
		Data   []struct {
			Object    string
			Index     int
			Embedding []float32
		}
		Usage embeddingUsage
	}
	l := decode[embeddings](t, b)
	if l.Object != "list" || l.Model != "fake-model" || len(l.Data) != 2 || l.Data[1].Index != 1 || l.Data[0].Object != "embedding" {
		t.Fatalf("%s", b)
	}
	if l.Usage.PromptTokens == 0 || l.Usage.TotalTokens != l.Usage.PromptTokens {
		t.Errorf("usage %+v", l.Usage)
	}
	_, b = do(t, "POST", fs.URL+"/v1/embeddings", `{"input":"hello","encoding_format":"base64"}`)
	e := decode[struct{ Data []struct{ Embedding string } }](t, b)
	raw, err := base64.StdEncoding.DecodeString(e.Data[0].Embedding)
	if err != nil || len(raw) != 4*len(l.Data[0].Embedding) {
		t.Fatalf("base64 %q: %v", e.Data[0].Embedding, err)
	}
	for i, want := range l.Data[0].Embedding {
		if got := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])); got != want {
			t.Errorf("component %d: %v, want %v", i, got, want)
		}
	}
}

func TestTokenize(t *testing.T) {
	fs := newFakeServer(t, Options{}, nil)
	_, b := do(t, "POST", fs.URL+"/tokenize", `{"content":"Hé"}`)
	toks := decode[struct{ Tokens []int }](t, b).Tokens
	if len(toks) != 4 || toks[0] == 1 { // "▁", "H", 0xC3, 0xA9; no BOS by default
		t.Fatalf("%s", b)
	}
	_, b = do(t, "POST", fs.URL+"/tokenize", `{"content":"Hé","add_special":true,"with_pieces":true}`)
	if !strings.Contains(string(b), `{"id":1,"piece":"<s>"}`) || !strings.Contains(string(b), `"piece":[195]`) {
		t.Errorf("%s", b)
	}
	req, _ := json.Marshal(map[string]any{"tokens": toks})
	_, b = do(t, "POST", fs.URL+"/detokenize", string(req))
	if d := decode[struct{ Content, Prompt string }](t, b); d.Content != " Hé" || d.Prompt != d.Content {
		t.Errorf("detokenize %s", b)
	}
}

// TestTokenizeVLLM sends /tokenize the fields vLLM's takes: a prompt (BOS
// added unless add_special_tokens is false), or messages rendered by the
// chat template and encoded as a chat completion's prompt is.
func TestTokenizeVLLM(t *testing.T) {
	fs := newFakeServer(t, Options{}, nil)
	type resp struct {
		Count       int
		MaxModelLen int `json:"max_model_len"`
		Tokens      []tokenizer.ID
		TokenStrs   []string `json:"token_strs"`
	}
	hello := fs.tok.Encode("Hello", tokenizer.EncodeOptions{})
	msgs := []map[string]any{{"role": "user", "content": "hi"}}
	rendered, err := templateChatOf(t).RenderChat(chat.Input{Messages: msgs, AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	chatIDs := session.EncodePrompt(fs.tok, rendered)
	tests := []struct {
		name, body string
		want       []tokenizer.ID
		strs       bool
	}{
		{"prompt adds BOS by default", `{"model":"fake-model","prompt":"Hello"}`, append([]tokenizer.ID{1}, hello...), false},
		{"prompt without special tokens", `{"prompt":"Hello","add_special_tokens":false,"return_token_strs":true}`, hello, true},
		{"messages as a chat completion feeds them", `{"messages":[{"role":"user","content":"hi"}]}`, chatIDs, false},
		{"messages without special tokens", `{"messages":[{"role":"user","content":"hi"}],"add_special_tokens":false}`,
			fs.tok.Encode(rendered, tokenizer.EncodeOptions{ParseSpecial: true}), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, b := do(t, "POST", fs.URL+"/tokenize", tc.body)
			if r.StatusCode != 200 {
				t.Fatalf("%d %s", r.StatusCode, b)
			}
			got := decode[resp](t, b)
			if !slices.Equal(got.Tokens, tc.want) || got.Count != len(tc.want) || got.MaxModelLen != fs.eng.MaxLen() {
				t.Errorf("got %s, want tokens %v", b, tc.want)
			}
			if tc.strs != (got.TokenStrs != nil) {
				t.Errorf("token_strs: %s", b)
			}
			for i, s := range got.TokenStrs {
				if s != fs.tok.Vocab().Tokens[got.Tokens[i]] {
					t.Errorf("token_strs[%d] = %q", i, s)
				}
			}
		})
	}
	r, b := do(t, "POST", fs.URL+"/tokenize", `{"messages":[{"role":"user","content":"hi"}],"continue_final_message":true}`)
	if e := decode[wireError](t, b); r.StatusCode != 400 || deref(e.Error.Param) != "continue_final_message" {
		t.Errorf("continue_final_message: %d %s", r.StatusCode, b)
	}
}

// TestClientDisconnect drops a stream mid-way: the engine request must be
// cancelled and freed, and the server keeps answering.
func TestClientDisconnect(t *testing.T) {
	fs := newFakeServer(t, Options{}, func(e *fakeEngine) { e.delay = 2 * time.Millisecond })
	req, _ := http.NewRequest("POST", fs.URL+"/v1/chat/completions", strings.NewReader(`{"messages":[{"role":"user","content":"hi"}],"stream":true}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(resp.Body)
	for range 6 { // the role chunk and two tokens
		if _, err := r.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
	}
	resp.Body.Close()
	fs.eng.waitIdle(t, 2*time.Second)
	if n := fs.eng.cancelledCount(); n != 1 {
		t.Errorf("%d requests cancelled", n)
	}
	if resp, b := do(t, "POST", fs.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`); resp.StatusCode != 200 {
		t.Fatalf("after the disconnect: %d %s", resp.StatusCode, b)
	}
}

func TestMiddleware(t *testing.T) {
	fs := newFakeServer(t, Options{}, nil)
	t.Run("request id", func(t *testing.T) {
		resp, _ := do(t, "GET", fs.URL+"/health", "")
		if !regexp.MustCompile(`^` + uuidRE + `$`).MatchString(resp.Header.Get("X-Request-Id")) {
			t.Errorf("X-Request-Id %q", resp.Header.Get("X-Request-Id"))
		}
		resp, _ = do(t, "GET", fs.URL+"/health", "", "X-Request-Id", "client-id-1")
		if resp.Header.Get("X-Request-Id") != "client-id-1" {
			t.Errorf("client id not echoed: %q", resp.Header.Get("X-Request-Id"))
		}
		resp, _ = do(t, "GET", fs.URL+"/health", "", "X-Request-Id", "bad id")
		if resp.Header.Get("X-Request-Id") == "bad id" {
			t.Error("a bad client id was echoed")
		}
	})
	t.Run("panic", func(t *testing.T) {
		resp, b := do(t, "POST", fs.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"panic please"}]}`)
		if resp.StatusCode != 500 || decode[wireError](t, b).Error.Type != session.TypeServer {
			t.Fatalf("status %d: %s", resp.StatusCode, b)
		}
		if resp, _ := do(t, "GET", fs.URL+"/health", ""); resp.StatusCode != 200 {
			t.Error("the server does not answer after a panic")
		}
	})
}

func TestMetrics(t *testing.T) {
	fs := newFakeServer(t, Options{}, nil)
	do(t, "POST", fs.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":3}`)
	_, b := do(t, "GET", fs.URL+"/metrics", "")
	for _, want := range []string{
		"ruvllm_prompt_tokens_total ",
		"ruvllm_generation_tokens_total 3",
		`ruvllm_time_to_first_token_seconds_count{route="/v1/chat/completions"} 1`,
		`ruvllm_request_duration_seconds_count{route="/v1/chat/completions"} 1`,
		`ruvllm_http_requests_total{code="200",route="/v1/chat/completions"} 1`,
		"ruvllm_queue_depth 0",
		"ruvllm_kv_cache_bytes 0",
		`ruvllm_kv_tier_blocks{tier="q4"} 0`,
		"ruvllm_kv_store_pages 0",
		"ruvllm_kv_store_checksum_failures_total 0",
		`ruvllm_kv_restore_seconds_bucket{le="0.01"} 0`,
		"ruvllm_kv_restore_seconds_count 0",
		"go_goroutines ",
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// TestHandle checks the one place handler errors become responses.
func TestHandle(t *testing.T) {
	s := New(Options{})
	var nilError *session.Error
	tests := []struct {
		name   string
		err    error
		status int
		code   string
	}{
		{"no error", nil, 200, ""},
		{"a nil *session.Error, a bug", nilError, 500, session.CodeInternal},
		{"a session.Error", session.Invalid("x", session.CodeInvalidValue, "bad x"), 400, session.CodeInvalidValue},
		{"a wrapped session.Error", fmt.Errorf("wrapped: %w", session.Loading()), 503, session.CodeLoading},
		{"another error", errors.New("disk on fire"), 500, session.CodeInternal},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			s.handle(func(http.ResponseWriter, *http.Request) error { return tc.err })(rec, httptest.NewRequest("GET", "/", nil))
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d", rec.Code, tc.status)
			}
			if tc.code == "" {
				if rec.Body.Len() != 0 {
					t.Errorf("body %s", rec.Body)
				}
				return
			}
			if e := decode[wireError](t, rec.Body.Bytes()); deref(e.Error.Code) != tc.code || e.Error.Message == "" {
				t.Errorf("body %s", rec.Body)
			}
		})
	}
}
