package session

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/internal/testmodel"
	"github.com/ruvllm/ruvllm/models/chat"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// parsedChat renders with a parsed template.
type parsedChat struct{ t *chat.Template }

func (c parsedChat) RenderChat(in chat.Input) (string, error) { return c.t.Render(in) }
func (c parsedChat) ChatTemplateSource() string               { return c.t.Source() }

// With thinking off (the server's NoThinking, or a request's
// enable_thinking false), a think block the generation prompt opens is
// closed, and templates that read enable_thinking see false; a request
// may turn thinking back on.
func TestNoThinking(t *testing.T) {
	opensThink := `{{ messages[0].content }}{% if add_generation_prompt %}|A|{% if enable_thinking is defined and not enable_thinking %}[off]{% endif %}<think>` + "\n" + `{% endif %}`
	cohere := `{{ messages[0].content }}{% if add_generation_prompt %}<|CHATBOT_TOKEN|>{% endif %}{# <|START_THINKING|> #}`
	yes, no := true, false
	for _, tc := range []struct {
		name, tmpl string
		server     bool
		think      *bool
		kwargs     map[string]any
		want       string
	}{
		{"open think, thinking on", opensThink, false, nil, nil, "hi|A|<think>\n"},
		{"open think, server off", opensThink, true, nil, nil, "hi|A|[off]<think>\n</think>"},
		{"open think, server off, request on", opensThink, true, &yes, nil, "hi|A|<think>\n"},
		{"open think, request off", opensThink, false, &no, nil, "hi|A|[off]<think>\n</think>"},
		{"open think, kwargs off", opensThink, false, nil, map[string]any{"enable_thinking": json.RawMessage("false")}, "hi|A|[off]<think>\n</think>"},
		{"cohere, server off", cohere, true, nil, nil, "hi<|CHATBOT_TOKEN|><|START_THINKING|><|END_THINKING|>"},
		{"cohere, thinking on", cohere, false, nil, nil, "hi<|CHATBOT_TOKEN|>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmpl, err := chat.Parse(tc.tmpl)
			if err != nil {
				t.Fatal(err)
			}
			ms := New(Options{NoThinking: tc.server})
			m := &Model{ID: "m", Tokenizer: testmodel.WordTokenizer(t), Chat: parsedChat{tmpl}, Engine: nilEngine{}}
			if err := ms.AddModel(m); err != nil {
				t.Fatal(err)
			}
			req := &Request{Messages: []Message{{"role": "user", "content": "hi"}}}
			req.Reasoning.Think = tc.think
			req.Template.Kwargs = tc.kwargs
			r, err := ms.Render(req)
			if err != nil {
				t.Fatal(err)
			}
			if r.Text != tc.want {
				t.Errorf("rendered %q, want %q", r.Text, tc.want)
			}
		})
	}
}

// nilEngine is an engine that runs nothing, for tests that only render.
type nilEngine struct{}

func (nilEngine) Submit(context.Context, backends.Request) (*backends.Stream, error) {
	return nil, backends.ErrClosed
}
func (nilEngine) Embed(context.Context, []tokenizer.ID) ([]float32, error) {
	return nil, backends.ErrClosed
}
func (nilEngine) Stats() backends.EngineStats { return backends.EngineStats{} }
func (nilEngine) MaxLen() int                 { return 256 }
