package openai

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ruvllm/ruvllm/api/jsonhttp"
	"github.com/ruvllm/ruvllm/session"
)

// FuzzChatRequest decodes arbitrary bodies as chat completion requests:
// each is read or refused with a *session.Error (a 4xx), never a panic.
func FuzzChatRequest(f *testing.F) {
	for _, s := range []string{
		`{"messages":[{"role":"user","content":"hi"}]}`,
		`{"messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"f"}}}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object"}}},"logit_bias":[[1,false]]}`,
		`{"messages":[],"n":3,"stop":["a"],"stream":true,"stream_options":{"include_usage":true},"chat_template_kwargs":{"enable_thinking":false}}`,
		`{"messages":[{"role":"user","content":"x"}],"guided_choice":["a","b"],"structured_outputs":{"regex":"a+"},"grammar":"root ::= \"a\""}`,
		`{"messages":[{"role":"user","content":"x"}],"speculative":{"source":"suffix","n_max":4,"n_min":1,"p_min":0.5},"speculative.n_max":3}`,
		`{"messages":[{"role":"user","content":"x"}],"speculative":"ngram","speculative.n_min":2}`,
	} {
		f.Add(s)
	}
	a := &API{Models: session.New(session.Options{})}
	f.Fuzz(func(t *testing.T, body string) {
		r := httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(body))
		fields, err := jsonhttp.Read(r)
		if err == nil {
			_, err = a.chatRequest(fields)
		}
		if err != nil {
			if e := session.AsError(err); e.Status < 400 || e.Status >= 500 {
				t.Fatalf("body %q: %v (status %d)", body, err, e.Status)
			}
		}
	})
}
