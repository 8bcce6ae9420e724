package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	wire "github.com/ruvllm/ruvllm/api/openai"
	"github.com/ruvllm/ruvllm/internal/httpcheck"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// do sends a request and returns the response with its body read.
func do(t *testing.T, method, url, body string, header ...string) (*http.Response, []byte) {
	t.Helper()
	return httpcheck.Do(t, method, url, body, header...)
}

func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
	return v
}

// sseData splits an event stream into its data payloads, checking the
// framing: every event is exactly one "data: ..." line and a blank line.
func sseData(t *testing.T, body []byte) []string {
	t.Helper()
	if !bytes.HasSuffix(body, []byte("\n\n")) {
		t.Fatalf("stream does not end with a blank line: %q", body)
	}
	var out []string
	for _, ev := range strings.Split(strings.TrimSuffix(string(body), "\n\n"), "\n\n") {
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok || strings.Contains(data, "\n") {
			t.Fatalf("malformed event %q", ev)
		}
		out = append(out, data)
	}
	return out
}

type wireError struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

type wireChunk struct {
	ID                string `json:"id"`
	Object            string `json:"object"`
	Created           int64  `json:"created"`
	Model             string `json:"model"`
	SystemFingerprint string `json:"system_fingerprint"`
	Choices           []struct {
		Index int `json:"index"`
		Delta struct {
			Role    string  `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		Text         string             `json:"text"`
		Logprobs     *wire.ChatLogprobs `json:"logprobs"`
		FinishReason *string            `json:"finish_reason"`
	} `json:"choices"`
	Usage *wire.Usage `json:"usage"`
}

const uuidRE = `[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`

func TestChatCompletion(t *testing.T) {
	fs := newFakeServer(t, Options{}, nil)
	fs.eng.script = scriptOf(t, fs.tok, "▁Hello", "▁world", "!")
	before := time.Now().Unix()
	resp, b := do(t, "POST", fs.URL+"/v1/chat/completions",
		`{"model":"fake-model","messages":[{"role":"developer","content":"be brief"},{"role":"user","content":[{"type":"text","text":"hi"},{"type":"text","text":"there"}]}]}`)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	got := decode[wire.ChatCompletion](t, b)
	if !regexp.MustCompile(`^chatcmpl-` + uuidRE + `$`).MatchString(got.ID) {
		t.Errorf("id %q", got.ID)
	}
	if got.Object != "chat.completion" || got.Model != "fake-model" || got.SystemFingerprint != "test-version" {
		t.Errorf("object %q model %q fingerprint %q", got.Object, got.Model, got.SystemFingerprint)
	}
	if got.Created < before || got.Created > time.Now().Unix() {
		t.Errorf("created %d is not now in seconds", got.Created)
	}
	if len(got.Choices) != 1 || deref(got.Choices[0].Message.Content) != " Hello world!" || got.Choices[0].Message.Role != "assistant" || got.Choices[0].FinishReason != "stop" {
		t.Errorf("choices %+v", got.Choices)
	}
	reqs := fs.eng.requests()
	// The SPM space prefix decodes as a leading space.
	prompt := strings.TrimPrefix(fs.tok.Decode(reqs[0].Prompt), " ")
	if want := "<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nhi\nthere<|im_end|>\n<|im_start|>assistant\n"; prompt != want {
		t.Errorf("prompt %q, want %q", prompt, want)
	}
	u := got.Usage
	if u.PromptTokens != len(reqs[0].Prompt) || u.CompletionTokens != 3 || u.TotalTokens != u.PromptTokens+3 {
		t.Errorf("usage %+v", u)
	}
	// No max_tokens: the context left, never a small cap.
	if left := fs.eng.maxLen - len(reqs[0].Prompt); reqs[0].MaxTokens != left {
		t.Errorf("max tokens %d, want the %d tokens left", reqs[0].MaxTokens, left)
	}
	if !strings.Contains(string(b), `"logprobs":null`) || !strings.Contains(string(b), `"refusal":null`) {
		t.Errorf("null fields missing: %s", b)
	}
}

func TestChatStream(t *testing.T) {
	for _, includeUsage := range []bool{false, true} {
		t.Run("include_usage="+strconv.FormatBool(includeUsage), func(t *testing.T) {
			fs := newFakeServer(t, Options{}, nil)
			fs.eng.script = scriptOf(t, fs.tok, "▁Hello", "▁world")
			body := `{"messages":[{"role":"user","content":"hi"}],"stream":true,"n":2,"max_tokens":5`
			if includeUsage {
				body += `,"stream_options":{"include_usage":true}`
			}
			resp, b := do(t, "POST", fs.URL+"/v1/chat/completions", body+"}")
			if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
				t.Fatalf("status %d type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
			}
			events := sseData(t, b)
			if events[len(events)-1] != "[DONE]" {
				t.Fatalf("last event %q", events[len(events)-1])
			}
			events = events[:len(events)-1]
			var id string
			text := map[int]string{}
			finished := map[int]bool{}
			roleSeen := map[int]bool{}
			for i, ev := range events {
				c := decode[wireChunk](t, []byte(ev))
				if i == 0 {
					id = c.ID
				}
				if c.ID != id || c.Object != "chat.completion.chunk" || c.Model != "fake-model" || c.SystemFingerprint != "test-version" {
					t.Fatalf("chunk %d: id %q object %q model %q", i, c.ID, c.Object, c.Model)
				}
				if includeUsage != strings.Contains(ev, `"usage"`) {
					t.Errorf("chunk %d: usage field present = %v with include_usage %v", i, !includeUsage, includeUsage)
				}
				if len(c.Choices) == 0 {
					if !includeUsage || i != len(events)-1 || c.Usage == nil {
						t.Fatalf("chunk %d without choices: %s", i, ev)
					}
					if c.Usage.CompletionTokens != 4 || c.Usage.TotalTokens != c.Usage.PromptTokens+4 {
						t.Errorf("usage %+v", c.Usage)
					}
					continue
				}
				if c.Usage != nil {
					t.Errorf("chunk %d has usage %+v", i, c.Usage)
				}
				ch := c.Choices[0]
				if finished[ch.Index] {
					t.Fatalf("chunk %d for choice %d after its finish", i, ch.Index)
				}
				if !roleSeen[ch.Index] {
					if ch.Delta.Role != "assistant" {
						t.Fatalf("first chunk of choice %d has no assistant role: %s", ch.Index, ev)
					}
					roleSeen[ch.Index] = true
				} else if ch.Delta.Role != "" {
					t.Errorf("role repeated: %s", ev)
				}
				if ch.Delta.Content != nil {
					text[ch.Index] += *ch.Delta.Content
				}
				if ch.FinishReason != nil {
					if *ch.FinishReason != "stop" {
						t.Errorf("finish %q", *ch.FinishReason)
					}
					finished[ch.Index] = true
				}
			}
			if includeUsage && len(decode[wireChunk](t, []byte(events[len(events)-1])).Choices) != 0 {
				t.Error("the usage chunk is not the last before [DONE]")
			}
			for i := range 2 {
				if text[i] != " Hello world" || !finished[i] {
					t.Errorf("choice %d: text %q finished %v", i, text[i], finished[i])
				}
			}
		})
	}
}

// TestStopStrings checks that a stop string split over tokens never reaches
// the client, that finish_reason is stop, and that the engine request is
// cancelled at once rather than run to its token limit.
func TestStopStrings(t *testing.T) {
	fs := newFakeServer(t, Options{}, nil)
	head := ids(t, fs.tok, "▁Hello", "▁S", "TOP", "▁here")
	fs.eng.script = func(backends.Request) []tokenizer.ID {
		s := append([]tokenizer.ID(nil), head...)
		for range 200 {
			s = append(s, head[0])
		}
		return s
	}
	fs.eng.delay = time.Millisecond
	for _, stream := range []bool{false, true} {
		body := `{"messages":[{"role":"user","content":"hi"}],"stop":["STOP","nothing"],"stream":` + strconv.FormatBool(stream) + `}`
		resp, b := do(t, "POST", fs.URL+"/v1/chat/completions", body)
		if resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, b)
		}
		var text, finish string
		if stream {
			for _, ev := range sseData(t, b) {
				if ev == "[DONE]" {
					continue
				}
				c := decode[wireChunk](t, []byte(ev))
				if ch := c.Choices[0]; ch.Delta.Content != nil {
					text += *ch.Delta.Content
				} else if ch.FinishReason != nil {
					finish = *ch.FinishReason
				}
			}
		} else {
			c := decode[wire.ChatCompletion](t, b)
			text, finish = deref(c.Choices[0].Message.Content), c.Choices[0].FinishReason
		}
		if text != " Hello " || finish != "stop" || strings.Contains(string(b), "TOP") {
			t.Errorf("stream %v: text %q finish %q", stream, text, finish)
		}
	}
	fs.eng.waitIdle(t, 2*time.Second)
	if n := fs.eng.cancelledCount(); n != 2 {
		t.Errorf("%d engine requests were cancelled, want 2", n)
	}
}

func TestChatLogprobs(t *testing.T) {
	fs := newFakeServer(t, Options{}, nil)
	fs.eng.script = scriptOf(t, fs.tok, "▁Hello", "<0xC3>", "<0xA9>")
	resp, b := do(t, "POST", fs.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"logprobs":true,"top_logprobs":2}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	c := decode[wire.ChatCompletion](t, b)
	lp := c.Choices[0].Logprobs
	if deref(c.Choices[0].Message.Content) != " Helloé" || lp == nil || len(lp.Content) != 3 {
		t.Fatalf("logprobs %s", b)
	}
	if e := lp.Content[0]; e.Token != " Hello" || e.Logprob != -0.25 || !slices.Equal(e.Bytes, byteList(" Hello")) || len(e.TopLogprobs) != 2 {
		t.Errorf("first entry %+v", e)
	}
	if e := lp.Content[1]; !slices.Equal(e.Bytes, []int{0xC3}) {
		t.Errorf("byte token entry %+v", e)
	}
	if reqs := fs.eng.requests(); reqs[0].TopLogprobs != 2 {
		t.Errorf("engine asked for %d top logprobs", reqs[0].TopLogprobs)
	}
	// Without logprobs the engine is told not to compute them.
	do(t, "POST", fs.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}]}`)
	if reqs := fs.eng.requests(); reqs[1].TopLogprobs != -1 {
		t.Errorf("engine asked for %d top logprobs without logprobs", reqs[1].TopLogprobs)
	}
}

func TestSamplingParameters(t *testing.T) {
	fs := newFakeServer(t, Options{}, nil)
	resp, b := do(t, "POST", fs.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":3,"n":3,"seed":7,
		"temperature":0.5,"top_p":0.9,"presence_penalty":0.5,"frequency_penalty":-0.5,"logit_bias":{"5":-100,"7":2.5},"top_k":10,"min_p":0.1,"user":"u1"}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	reqs := fs.eng.requests()
	if len(reqs) != 3 {
		t.Fatalf("%d engine requests for n=3", len(reqs))
	}
	for i, r := range reqs {
		p := r.Sampling
		if *p.Seed != 7+int64(i) {
			t.Errorf("choice %d seed %d, want %d", i, *p.Seed, 7+i)
		}
		if p.Temperature != 0.5 || p.TopP != 0.9 || p.PresencePenalty != 0.5 || p.FrequencyPenalty != -0.5 || p.TopK != 10 || p.MinP != 0.1 {
			t.Errorf("sampling %+v", p)
		}
		if len(p.LogitBias) != 2 || p.LogitBias[5] != -100 || p.LogitBias[7] != 2.5 || r.MaxTokens != 3 {
			t.Errorf("logit bias %v, max tokens %d", p.LogitBias, r.MaxTokens)
		}
	}
	c := decode[wire.ChatCompletion](t, b)
	for i, ch := range c.Choices {
		if ch.Index != i || ch.FinishReason != "length" || deref(ch.Message.Content) != " Hello Hello Hello" {
			t.Errorf("choice %+v", ch)
		}
	}
	if c.Usage.CompletionTokens != 9 {
		t.Errorf("usage %+v", c.Usage)
	}
	// Absent fields take the server's defaults (llama-server's), and
	// max_completion_tokens wins over max_tokens.
	do(t, "POST", fs.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_completion_tokens":2,"max_tokens":9}`)
	r := fs.eng.requests()[3]
	if def := backends.DefaultParams(); r.Sampling.Temperature != def.Temperature || r.Sampling.TopK != def.TopK || r.Sampling.Seed != nil || r.MaxTokens != 2 {
		t.Errorf("defaults %+v, max tokens %d", r.Sampling, r.MaxTokens)
	}
}

func TestCompletions(t *testing.T) {
	fs := newFakeServer(t, Options{}, nil)
	fs.eng.script = scriptOf(t, fs.tok, "▁the", "▁end", "!")
	t.Run("prompts and n", func(t *testing.T) {
		resp, b := do(t, "POST", fs.URL+"/v1/completions", `{"model":"fake-model","prompt":["a","b"],"n":2,"max_tokens":2}`)
		if resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, b)
		}
		c := decode[wire.TextCompletion](t, b)
		if !regexp.MustCompile(`^cmpl-`+uuidRE+`$`).MatchString(c.ID) || c.Object != "text_completion" || len(c.Choices) != 4 {
			t.Fatalf("%s", b)
		}
		for i, ch := range c.Choices {
			if ch.Index != i || ch.Text != " the end" || *ch.FinishReason != "length" {
				t.Errorf("choice %+v", ch)
			}
		}
		// BOS, "▁" and one byte per prompt, each prompt counted once.
		if u := decode[struct{ Usage wire.Usage }](t, b).Usage; u.CompletionTokens != 8 || u.PromptTokens != 6 {
			t.Errorf("usage %+v", u)
		}
	})
	t.Run("echo and token prompt", func(t *testing.T) {
		_, b := do(t, "POST", fs.URL+"/v1/completions", `{"prompt":"Once","echo":true}`)
		if c := decode[wire.TextCompletion](t, b); c.Choices[0].Text != "Once the end!" || *c.Choices[0].FinishReason != "stop" {
			t.Errorf("%s", b)
		}
		hello := fs.tok.Vocab().IDs["▁Hello"]
		_, b = do(t, "POST", fs.URL+"/v1/completions", `{"prompt":[1,`+strconv.Itoa(int(hello))+`],"echo":true,"max_tokens":1}`)
		if c := decode[wire.TextCompletion](t, b); c.Choices[0].Text != fs.tok.Decode([]tokenizer.ID{1, hello})+" the" {
			t.Errorf("%s", b)
		}
	})
	t.Run("legacy logprobs", func(t *testing.T) {
		_, b := do(t, "POST", fs.URL+"/v1/completions", `{"prompt":"x","logprobs":2}`)
		lp := decode[wire.TextCompletion](t, b).Choices[0].Logprobs
		if lp == nil || !slices.Equal(lp.Tokens, []string{" the", " end", "!"}) || !slices.Equal(lp.TextOffset, []int{0, 4, 8}) ||
			*lp.TokenLogprobs[0] != -0.25 || len(lp.TopLogprobs[0]) != 2 {
			t.Errorf("logprobs %s", b)
		}
	})
	t.Run("stream", func(t *testing.T) {
		resp, b := do(t, "POST", fs.URL+"/v1/completions", `{"prompt":"x","stream":true,"echo":true,"stream_options":{"include_usage":true}}`)
		if resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, b)
		}
		events := sseData(t, b)
		var text string
		for _, ev := range events[:len(events)-2] {
			c := decode[wireChunk](t, []byte(ev))
			if c.Object != "text_completion" {
				t.Errorf("object %q", c.Object)
			}
			text += c.Choices[0].Text
		}
		last := decode[wireChunk](t, []byte(events[len(events)-2]))
		if text != "x the end!" || last.Usage == nil || last.Usage.CompletionTokens != 3 || events[len(events)-1] != "[DONE]" {
			t.Errorf("text %q, events %q", text, events)
		}
	})
}
