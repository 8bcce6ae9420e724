package anthropic_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/ruvllm/ruvllm/api"
	"github.com/ruvllm/ruvllm/backends"
	_ "github.com/ruvllm/ruvllm/backends/native" // opened by name
	"github.com/ruvllm/ruvllm/internal/httpcheck"
	"github.com/ruvllm/ruvllm/internal/schematest"
	"github.com/ruvllm/ruvllm/internal/shared"
	"github.com/ruvllm/ruvllm/internal/testmodel"
	"github.com/ruvllm/ruvllm/models/chat"
	"github.com/ruvllm/ruvllm/models/tokenizer"
	"github.com/ruvllm/ruvllm/session"
)

// toolsTemplate is ChatML that shows tools, writes calls in Hermes'
// <tool_call> blocks and results as tool turns, as Qwen's template does,
// in a few lines.
const toolsTemplate = `{%- if tools %}<|im_start|>system
{% for t in tools %}{{ t | tojson }}
{% endfor %}Call tools in <tool_call></tool_call> tags.<|im_end|>
{% endif %}{%- for message in messages %}<|im_start|>{{ message.role }}
{% if message.content %}{{ message.content }}{% endif %}{% for c in message.tool_calls or [] %}<tool_call>
{{ {"name": c.function.name, "arguments": c.function.arguments} | tojson }}
</tool_call>{% endfor %}<|im_end|>
{% endfor %}{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}`

// serverOptions configure startServer.
type serverOptions struct {
	// shape is the synthesized model's shape ("" is "tiny").
	shape string
	// template is a chat template's Jinja, sharedTemplate one of
	// ../shared/templates (the test skips without it); neither keeps the
	// model's.
	template, sharedTemplate string
	// keys are the API keys the server requires.
	keys []string
	// maxLen is the context (0: 512).
	maxLen int
	// inject is text the engine writes before the model's own output.
	inject string
	// noEOS bans the end-of-generation tokens by default, so that every
	// generation runs to its cap.
	noEOS bool
	// failAfter, when > 0, fails every generation after that many tokens.
	failAfter int
}

// testServer is an httptest server built from api.New, serving one
// synthesized model through the real engine, with the Anthropic SDK
// pointed at it.
type testServer struct {
	url    string
	client anthropic.Client
	id     string
	tok    *tokenizer.Tokenizer
	rec    *recorder
	chat   *recordingChat
}

// templateChat renders with a parsed template and shows its source, as
// *models.Model does.
type templateChat struct{ t *chat.Template }

func (c templateChat) RenderChat(in chat.Input) (string, error) { return c.t.Render(in) }
func (c templateChat) ChatTemplateSource() string               { return c.t.Source() }

// recordingChat renders with the model's renderer and keeps the last
// render: the prompt as the template wrote it.
type recordingChat struct {
	inner interface {
		session.ChatRenderer
		ChatTemplateSource() string
	}
	mu   sync.Mutex
	last string
}

func (c *recordingChat) RenderChat(in chat.Input) (string, error) {
	s, err := c.inner.RenderChat(in)
	c.mu.Lock()
	c.last = s
	c.mu.Unlock()
	return s, err
}

func (c *recordingChat) ChatTemplateSource() string { return c.inner.ChatTemplateSource() }

func startServer(t *testing.T, o serverOptions) *testServer {
	t.Helper()
	if o.shape == "" {
		o.shape = "tiny"
	}
	if o.maxLen == 0 {
		o.maxLen = 512
	}
	src := o.template
	if o.sharedTemplate != "" {
		b, err := os.ReadFile(shared.Path(t, "templates", o.sharedTemplate))
		if err != nil {
			t.Fatal(err)
		}
		src = string(b)
	}
	m := testmodel.Load(t, testmodel.Synth(t, o.shape, "F32"))
	tok := m.Tokenizer
	b := testmodel.Backend(t, "native", m, backends.Options{Threads: 1, KVTokens: 2 * o.maxLen})
	eng, err := backends.NewEngine(b, backends.EngineOptions{Parallel: 2, MaxLen: o.maxLen, IsEOG: tok.IsEOG})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	rec := &recorder{Engine: eng, failAfter: o.failAfter}
	if o.inject != "" {
		rec.inject = tok.Encode(o.inject, tokenizer.EncodeOptions{ParseSpecial: true})
	}
	rc := &recordingChat{inner: m}
	if src != "" {
		tmpl, err := chat.Parse(src)
		if err != nil {
			t.Fatal(err)
		}
		rc.inner = templateChat{tmpl}
	}
	sm := &session.Model{ID: o.shape, Tokenizer: tok, Chat: rc, Engine: rec}
	opt := api.Options{Version: "test", APIKeys: o.keys}
	if o.noEOS {
		p := backends.DefaultParams()
		p.LogitBias = map[tokenizer.ID]float32{}
		for id := range tok.Vocab().Tokens {
			if tok.IsEOG(tokenizer.ID(id)) {
				p.LogitBias[tokenizer.ID(id)] = -backends.MaxLogitBias
			}
		}
		opt.Sampling = &p
	}
	s := api.New(opt)
	if err := s.AddModel(sm); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
	})
	key := "unused"
	if len(o.keys) > 0 {
		key = o.keys[0]
	}
	client := anthropic.NewClient(option.WithoutEnvironmentDefaults(), option.WithBaseURL(hs.URL), option.WithAPIKey(key), option.WithMaxRetries(0))
	return &testServer{url: hs.URL, client: client, id: o.shape, tok: tok, rec: rec, chat: rc}
}

// recorder is the engine as the server sees it: it keeps the prompts it
// was given, and may write tokens of its own before the model's.
type recorder struct {
	session.Engine
	mu        sync.Mutex
	prompts   [][]tokenizer.ID
	inject    []tokenizer.ID
	failAfter int
}

func (r *recorder) Submit(ctx context.Context, req backends.Request) (*backends.Stream, error) {
	r.mu.Lock()
	r.prompts = append(r.prompts, slices.Clone(req.Prompt))
	r.mu.Unlock()
	if (len(r.inject) == 0 || req.MaxTokens <= len(r.inject)) && r.failAfter == 0 {
		return r.Engine.Submit(ctx, req)
	}
	if req.MaxTokens > len(r.inject) {
		req.MaxTokens -= len(r.inject)
	}
	in, err := r.Engine.Submit(ctx, req)
	if err != nil {
		return nil, err
	}
	out := make(chan backends.Event, 16)
	st := &backends.Stream{Events: out, PromptTokens: in.PromptTokens}
	go func() {
		defer close(out)
		first, ok := <-in.Events
		st.CachedTokens = in.CachedTokens
		for _, id := range r.inject {
			out <- backends.Event{Token: &backends.Token{ID: id}}
		}
		if !ok {
			return
		}
		n := 0
		for ev := first; ; {
			if ev.Token != nil {
				n++
			}
			if r.failAfter > 0 && n > r.failAfter {
				out <- backends.Event{Err: errors.New("the backend failed")}
				for range in.Events {
				}
				return
			}
			out <- ev
			if ev, ok = <-in.Events; !ok {
				return
			}
		}
	}()
	return st, nil
}

// lastPrompt is the last prompt the chat template rendered.
func (ts *testServer) lastPrompt(t *testing.T) string {
	t.Helper()
	ts.chat.mu.Lock()
	defer ts.chat.mu.Unlock()
	if ts.chat.last == "" {
		t.Fatal("no prompt was rendered")
	}
	return ts.chat.last
}

// lastTokens are the text of the last prompt the engine was given, its
// control tokens left out.
func (ts *testServer) lastTokens(t *testing.T) string {
	t.Helper()
	ts.rec.mu.Lock()
	defer ts.rec.mu.Unlock()
	if len(ts.rec.prompts) == 0 {
		t.Fatal("no prompt reached the engine")
	}
	return ts.tok.Decode(ts.rec.prompts[len(ts.rec.prompts)-1])
}

var temperature0 = option.WithJSONSet("temperature", 0)

func user(text string) []anthropic.MessageParam {
	return []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(text))}
}

// streamed runs params streamed, accumulating the message as the SDK
// does, and returns it with the events' types.
func (ts *testServer) streamed(t *testing.T, params anthropic.MessageNewParams, opts ...option.RequestOption) (anthropic.Message, []string) {
	t.Helper()
	stream := ts.client.Messages.NewStreaming(context.Background(), params, opts...)
	var msg anthropic.Message
	var types []string
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		if err := msg.Accumulate(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	return msg, types
}

// text is the text of a message's text blocks.
func text(m *anthropic.Message) string {
	var s strings.Builder
	for _, b := range m.Content {
		if b.Type == "text" {
			s.WriteString(b.Text)
		}
	}
	return s.String()
}

var (
	msgIDRE  = regexp.MustCompile(`^msg_[0-9a-f-]{36}$`)
	toolIDRE = regexp.MustCompile(`^toolu_[A-Za-z0-9]{24}$`)
)

// TestMessages drives the Messages API with the official Go SDK: a message
// whole and streamed (the same text at temperature 0, the same usage, the
// events in Anthropic's order), max_tokens, and stop sequences.
func TestMessages(t *testing.T) {
	ts := startServer(t, serverOptions{noEOS: true})
	ctx := context.Background()
	params := anthropic.MessageNewParams{Model: anthropic.Model(ts.id), MaxTokens: 12, Messages: user("Tell me a story."),
		System: []anthropic.TextBlockParam{{Text: "You are a storyteller."}}, Metadata: anthropic.MetadataParam{UserID: anthropic.String("u-1")}}
	msg, err := ts.client.Messages.New(ctx, params, temperature0)
	if err != nil {
		t.Fatal(err)
	}
	if !msgIDRE.MatchString(msg.ID) || msg.Type != "message" || msg.Role != "assistant" || string(msg.Model) != ts.id {
		t.Errorf("id %q type %q role %q model %q", msg.ID, msg.Type, msg.Role, msg.Model)
	}
	if len(msg.Content) != 1 || msg.Content[0].Type != "text" || msg.Content[0].Text == "" {
		t.Fatalf("content %+v", msg.Content)
	}
	if msg.StopReason != anthropic.StopReasonMaxTokens || msg.StopSequence != "" || msg.Usage.OutputTokens != 12 {
		t.Errorf("stop %q %q, usage %+v", msg.StopReason, msg.StopSequence, msg.Usage)
	}
	if in := msg.Usage.InputTokens + msg.Usage.CacheReadInputTokens; in == 0 || msg.Usage.CacheCreationInputTokens != 0 {
		t.Errorf("usage %+v", msg.Usage)
	}
	if p := ts.lastPrompt(t); !strings.Contains(p, "You are a storyteller.") || !strings.Contains(p, "Tell me a story.") {
		t.Errorf("prompt %q", p)
	}

	smsg, types := ts.streamed(t, params, temperature0)
	if text(&smsg) != text(msg) || smsg.StopReason != msg.StopReason || smsg.Usage.OutputTokens != msg.Usage.OutputTokens ||
		smsg.Usage.InputTokens+smsg.Usage.CacheReadInputTokens != msg.Usage.InputTokens+msg.Usage.CacheReadInputTokens {
		t.Errorf("streamed %q %s %+v, whole %q %s %+v", text(&smsg), smsg.StopReason, smsg.Usage, text(msg), msg.StopReason, msg.Usage)
	}
	if smsg.Usage.CacheReadInputTokens == 0 {
		t.Errorf("the same prompt again read nothing from the cache: %+v", smsg.Usage)
	}
	want := []string{"message_start", "content_block_start"}
	if len(types) < 5 || !slices.Equal(types[:2], want) || !slices.Equal(types[len(types)-3:], []string{"content_block_stop", "message_delta", "message_stop"}) {
		t.Errorf("events %v", types)
	}
	for _, ty := range types[2 : len(types)-3] {
		if ty != "content_block_delta" {
			t.Errorf("events %v", types)
			break
		}
	}

	// A stop sequence taken from the middle of the text ends it there.
	full := text(msg)
	stop := strings.TrimSpace(full[len(full)/2:])[:2]
	params.StopSequences = []string{"zzzz", stop}
	params.MaxTokens = 40
	cut, err := ts.client.Messages.New(ctx, params, temperature0)
	if err != nil {
		t.Fatal(err)
	}
	before, _, _ := strings.Cut(full, stop)
	if cut.StopReason != anthropic.StopReasonStopSequence || cut.StopSequence != stop || text(cut) != strings.TrimRight(before, "") {
		t.Errorf("stop %q: %q %q, text %q (of %q)", stop, cut.StopReason, cut.StopSequence, text(cut), full)
	}
	scut, _ := ts.streamed(t, params, temperature0)
	if scut.StopReason != cut.StopReason || scut.StopSequence != cut.StopSequence || text(&scut) != text(cut) {
		t.Errorf("streamed stop: %q %q %q", scut.StopReason, scut.StopSequence, text(&scut))
	}
}

// TestContextWindow: max_tokens beyond the context left is what the
// context holds, and a message cut off there says so.
func TestContextWindow(t *testing.T) {
	ts := startServer(t, serverOptions{noEOS: true, maxLen: 64})
	params := anthropic.MessageNewParams{Model: anthropic.Model(ts.id), MaxTokens: 20000, Messages: user("Hi")}
	msg, err := ts.client.Messages.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	in := msg.Usage.InputTokens + msg.Usage.CacheReadInputTokens
	if msg.StopReason != anthropic.StopReasonModelContextWindowExceeded || int(in+msg.Usage.OutputTokens) != 64 {
		t.Errorf("stop %q, usage %+v", msg.StopReason, msg.Usage)
	}
	smsg, _ := ts.streamed(t, params)
	if smsg.StopReason != anthropic.StopReasonModelContextWindowExceeded {
		t.Errorf("streamed stop %q", smsg.StopReason)
	}
	// A prompt that does not fit is refused as Anthropic words it.
	_, err = ts.client.Messages.New(context.Background(), anthropic.MessageNewParams{Model: anthropic.Model(ts.id), MaxTokens: 10,
		Messages: user(strings.Repeat("word ", 80))})
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != 400 || ae.Type() != "invalid_request_error" || !strings.Contains(ae.Message, "prompt is too long: ") {
		t.Errorf("a prompt over the context: %v", err)
	}
}

// weatherTool is the tool the tool tests offer.
func weatherTool() anthropic.ToolUnionParam {
	return anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{Name: "get_weather", Description: anthropic.String("The weather in a city"),
		InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{
			"city": map[string]any{"type": "string", "maxLength": 12}, "unit": map[string]any{"enum": []string{"celsius", "fahrenheit"}}},
			Required: []string{"city"}, ExtraFields: map[string]any{"additionalProperties": false}}}}
}

const weatherSchema = `{"type":"object","properties":{"city":{"type":"string","maxLength":12},"unit":{"enum":["celsius","fahrenheit"]}},
"required":["city"],"additionalProperties":false}`

// TestToolUse forces a call with tool_choice "tool": its input is an
// object the tool's schema validates, its id a toolu_ id, the message
// stops for tool_use, whole and streamed alike; the call and its result
// then go back into the conversation.
func TestToolUse(t *testing.T) {
	ts := startServer(t, serverOptions{template: toolsTemplate, maxLen: 2048})
	ctx := context.Background()
	val := schematest.Compile(t, weatherSchema)
	for _, choice := range []anthropic.ToolChoiceUnionParam{
		{OfTool: &anthropic.ToolChoiceToolParam{Name: "get_weather", DisableParallelToolUse: anthropic.Bool(true)}},
		{OfAny: &anthropic.ToolChoiceAnyParam{DisableParallelToolUse: anthropic.Bool(true)}}} {
		params := anthropic.MessageNewParams{Model: anthropic.Model(ts.id), MaxTokens: 200, Messages: user("What is the weather in Paris?"),
			Tools: []anthropic.ToolUnionParam{weatherTool()}, ToolChoice: choice}
		msg, err := ts.client.Messages.New(ctx, params, temperature0)
		if err != nil {
			t.Fatal(err)
		}
		smsg, _ := ts.streamed(t, params, temperature0)
		for how, m := range map[string]*anthropic.Message{"whole": msg, "streamed": &smsg} {
			if m.StopReason != anthropic.StopReasonToolUse || len(m.Content) != 1 || m.Content[0].Type != "tool_use" {
				t.Fatalf("%s: stop %q content %+v", how, m.StopReason, m.Content)
			}
			use := m.Content[0]
			if !toolIDRE.MatchString(use.ID) || use.Name != "get_weather" {
				t.Errorf("%s: id %q name %q", how, use.ID, use.Name)
			}
			schematest.Check(t, val, string(use.Input))
		}
		var a, b any
		json.Unmarshal(msg.Content[0].Input, &a)
		json.Unmarshal(smsg.Content[0].Input, &b)
		if !jsonEqual(a, b) {
			t.Errorf("inputs differ: whole %s, streamed %s", msg.Content[0].Input, smsg.Content[0].Input)
		}

		// The round trip: the call and its result go back.
		use := msg.Content[0]
		next := append(params.Messages, msg.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock(use.ID, "Sunny, 21 C", false)))
		r, err := ts.client.Messages.New(ctx, anthropic.MessageNewParams{Model: anthropic.Model(ts.id), MaxTokens: 5, Messages: next,
			Tools: params.Tools})
		if err != nil {
			t.Fatalf("the turn after a tool result: %v", err)
		}
		if r.StopReason == "" {
			t.Errorf("%+v", r)
		}
		p := ts.lastPrompt(t)
		if !strings.Contains(p, "<|im_start|>tool\nSunny, 21 C<|im_end|>") || !strings.Contains(p, `<tool_call>`+"\n"+`{"name": "get_weather", "arguments": {"city": `) {
			t.Errorf("prompt %q", p)
		}
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// TestCountTokens: count_tokens gives the tokens a message request with
// the same conversation reports as its input.
func TestCountTokens(t *testing.T) {
	ts := startServer(t, serverOptions{template: toolsTemplate, maxLen: 2048})
	ctx := context.Background()
	system := "Count me in."
	messages := user("How many tokens is this, exactly?")
	tools := []anthropic.ToolUnionParam{weatherTool()}
	count, err := ts.client.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: anthropic.Model(ts.id), Messages: messages,
		System: anthropic.MessageCountTokensParamsSystemUnion{OfString: anthropic.String(system)},
		Tools:  []anthropic.MessageCountTokensToolUnionParam{{OfTool: tools[0].OfTool}}})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := ts.client.Messages.New(ctx, anthropic.MessageNewParams{Model: anthropic.Model(ts.id), MaxTokens: 2, Messages: messages,
		System: []anthropic.TextBlockParam{{Text: system}}, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	if count.InputTokens == 0 || count.InputTokens != msg.Usage.InputTokens || msg.Usage.CacheReadInputTokens != 0 {
		t.Errorf("count_tokens %d, the message's usage %+v", count.InputTokens, msg.Usage)
	}
	if n := int64(len(ts.rec.prompts[len(ts.rec.prompts)-1])); n != count.InputTokens {
		t.Errorf("count_tokens %d, the engine's prompt %d", count.InputTokens, n)
	}
}

// TestThinking runs a tiny Qwen3 with Qwen3's template: thinking comes
// back as a signed thinking block before the text, whole and streamed;
// thinking disabled renders the empty think block Qwen3's template writes
// for it; past thinking goes back into the template as reasoning_content.
func TestThinking(t *testing.T) {
	ts := startServer(t, serverOptions{shape: "tiny-qwen3", sharedTemplate: "Qwen-Qwen3-0.6B.jinja", maxLen: 1024,
		inject: "<think>\nThe user says hi.\n</think>\n\n"})
	ctx := context.Background()
	params := anthropic.MessageNewParams{Model: anthropic.Model(ts.id), MaxTokens: 2048, Messages: user("Hi"),
		Thinking: anthropic.ThinkingConfigParamOfEnabled(1024)}
	msg, err := ts.client.Messages.New(ctx, params, temperature0)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(ts.lastPrompt(t), "<think>") {
		t.Errorf("thinking on, the prompt %q", ts.lastPrompt(t))
	}
	smsg, types := ts.streamed(t, params, temperature0)
	for how, m := range map[string]*anthropic.Message{"whole": msg, "streamed": &smsg} {
		if len(m.Content) == 0 || m.Content[0].Type != "thinking" || m.Content[0].Thinking != "The user says hi." || m.Content[0].Signature == "" {
			t.Fatalf("%s: content %+v", how, m.Content)
		}
		// The rest is what the random model wrote after its thinking.
		for _, b := range m.Content[1:] {
			if b.Type != "text" {
				t.Errorf("%s: block %+v", how, b)
			}
		}
	}
	if text(&smsg) != text(msg) || smsg.Content[0].Signature != msg.Content[0].Signature {
		t.Errorf("streamed %+v, whole %+v", smsg.Content, msg.Content)
	}
	if !slices.Contains(types, "content_block_delta") {
		t.Errorf("events %v", types)
	}

	// display "omitted": the block and its signature, not the text.
	om, err := ts.client.Messages.New(ctx, anthropic.MessageNewParams{Model: anthropic.Model(ts.id), MaxTokens: 2048, Messages: user("Hi"),
		Thinking: anthropic.ThinkingConfigParamUnion{OfEnabled: &anthropic.ThinkingConfigEnabledParam{BudgetTokens: 1024, Display: "omitted"}}}, temperature0)
	if err != nil {
		t.Fatal(err)
	}
	if om.Content[0].Type != "thinking" || om.Content[0].Thinking != "" || om.Content[0].Signature != msg.Content[0].Signature {
		t.Errorf("omitted: %+v", om.Content)
	}

	// Thinking off: Qwen3's template closes an empty think block itself.
	if _, err := ts.client.Messages.New(ctx, anthropic.MessageNewParams{Model: anthropic.Model(ts.id), MaxTokens: 5, Messages: user("Hi"),
		Thinking: anthropic.ThinkingConfigParamUnion{OfDisabled: &anthropic.ThinkingConfigDisabledParam{}}}); err != nil {
		t.Fatal(err)
	}
	if p := ts.lastPrompt(t); !strings.HasSuffix(p, "<|im_start|>assistant\n<think>\n\n</think>\n\n") {
		t.Errorf("thinking off, the prompt %q", p)
	}

	// Past thinking reaches the template: a tool loop's turn shows it.
	history := []anthropic.MessageParam{
		anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Oslo?")),
		anthropic.NewAssistantMessage(anthropic.NewThinkingBlock("sig", "I should call the tool."),
			anthropic.NewToolUseBlock("toolu_abc", map[string]any{"city": "Oslo"}, "get_weather")),
		anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_abc", "Snow", false)),
	}
	if _, err := ts.client.Messages.New(ctx, anthropic.MessageNewParams{Model: anthropic.Model(ts.id), MaxTokens: 5, Messages: history,
		Tools: []anthropic.ToolUnionParam{weatherTool()}}); err != nil {
		t.Fatal(err)
	}
	p := ts.lastPrompt(t)
	for _, want := range []string{"<think>\nI should call the tool.\n</think>", `{"name": "get_weather", "arguments": {"city": "Oslo"}}`,
		"<tool_response>\nSnow\n</tool_response>"} {
		if !strings.Contains(p, want) {
			t.Errorf("the prompt lacks %q: %q", want, p)
		}
	}

	// Thinking cannot go with a forced call.
	_, err = ts.client.Messages.New(ctx, anthropic.MessageNewParams{Model: anthropic.Model(ts.id), MaxTokens: 2048, Messages: user("Hi"),
		Thinking: anthropic.ThinkingConfigParamOfEnabled(1024), Tools: []anthropic.ToolUnionParam{weatherTool()},
		ToolChoice: anthropic.ToolChoiceParamOfTool("get_weather")})
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != 400 {
		t.Errorf("thinking with a forced call: %v", err)
	}
}

// TestPrefill: a final assistant message is continued, and the response
// holds only the continuation.
func TestPrefill(t *testing.T) {
	ts := startServer(t, serverOptions{})
	msg, err := ts.client.Messages.New(context.Background(), anthropic.MessageNewParams{Model: anthropic.Model(ts.id), MaxTokens: 4,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hi")),
			anthropic.NewAssistantMessage(anthropic.NewTextBlock("Once upon"))}})
	if err != nil {
		t.Fatal(err)
	}
	if p := ts.lastTokens(t); !strings.HasSuffix(p, "\nOnce upon") {
		t.Errorf("prompt %q", p)
	}
	if strings.Contains(text(msg), "Once upon") {
		t.Errorf("the response repeats the prefill: %q", text(msg))
	}
}

// TestMaxTokensZero: max_tokens 0 generates nothing and counts the prompt.
func TestMaxTokensZero(t *testing.T) {
	ts := startServer(t, serverOptions{})
	msg, err := ts.client.Messages.New(context.Background(), anthropic.MessageNewParams{Model: anthropic.Model(ts.id), MaxTokens: 0, Messages: user("Hi")})
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 0 || msg.StopReason != anthropic.StopReasonMaxTokens || msg.Usage.InputTokens == 0 || msg.Usage.OutputTokens != 0 {
		t.Errorf("%+v", msg)
	}
	smsg, types := ts.streamed(t, anthropic.MessageNewParams{Model: anthropic.Model(ts.id), MaxTokens: 0, Messages: user("Hi")})
	if !slices.Equal(types, []string{"message_start", "message_delta", "message_stop"}) || smsg.Usage.InputTokens != msg.Usage.InputTokens {
		t.Errorf("streamed %v %+v", types, smsg)
	}
}

// post sends body to path with the headers Anthropic's clients send.
func post(t *testing.T, url, body string, header ...string) (*http.Response, []byte) {
	t.Helper()
	header = append([]string{"anthropic-version", "2023-06-01", "anthropic-beta", "context-management-2025-06-27"}, header...)
	return httpcheck.Do(t, "POST", url, body, header...)
}

type wireError struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
	RequestID string `json:"request_id"`
}

// TestErrors checks refusals in Anthropic's shape and statuses, through
// the wire and through the SDK.
func TestErrors(t *testing.T) {
	ts := startServer(t, serverOptions{keys: []string{"sk-good"}})
	key := []string{"x-api-key", "sk-good"}
	msgs := `"messages":[{"role":"user","content":"Hi"}]`
	head := `"model":"tiny","max_tokens":5,` + msgs
	for _, c := range []struct {
		name, path, body string
		header           []string
		status           int
		typ, words       string
	}{
		{"missing max_tokens", "/v1/messages", `{"model":"tiny",` + msgs + `}`, key, 400, "invalid_request_error", "max_tokens: Field required"},
		{"missing model", "/v1/messages", `{"max_tokens":5,` + msgs + `}`, key, 400, "invalid_request_error", "model: Field required"},
		{"bad role", "/v1/messages", `{"model":"tiny","max_tokens":5,"messages":[{"role":"robot","content":"Hi"}]}`, key, 400, "invalid_request_error", "messages[0].role"},
		{"image block", "/v1/messages", `{"model":"tiny","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}}]}]}`,
			key, 400, "invalid_request_error", "read text only"},
		{"unknown model", "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":5,` + msgs + `}`, key, 404, "not_found_error", "claude-sonnet-4-5"},
		{"bad key", "/v1/messages", `{` + head + `}`, []string{"x-api-key", "sk-bad"}, 401, "authentication_error", "incorrect API key"},
		{"bearer", "/v1/messages/count_tokens", `{"model":"tiny",` + msgs + `}`, []string{"Authorization", "Bearer sk-bad"}, 401, "authentication_error", "incorrect API key"},
		{"no key", "/v1/messages", `{` + head + `}`, nil, 401, "authentication_error", "missing API key"},
		{"unknown field", "/v1/messages", `{` + head + `,"frequency_penalty":1}`, key, 400, "invalid_request_error", "frequency_penalty: Extra inputs are not permitted"},
		{"unknown nested field", "/v1/messages", `{` + head + `,"metadata":{"user_id":"u","team":"x"}}`, key, 400, "invalid_request_error", "metadata.team: Extra inputs are not permitted"},
		{"temperature over 1", "/v1/messages", `{` + head + `,"temperature":1.5}`, key, 400, "invalid_request_error", "temperature"},
		{"server tool", "/v1/messages", `{` + head + `,"tools":[{"type":"web_search_20250305","name":"web_search"}]}`, key, 400, "invalid_request_error", "not supported"},
		{"tool without schema", "/v1/messages", `{` + head + `,"tools":[{"name":"f"}]}`, key, 400, "invalid_request_error", "tools[0].input_schema: Field required"},
		{"tool_choice names no tool", "/v1/messages", `{` + head + `,"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"g"}}`,
			key, 400, "invalid_request_error", "not one of the tools"},
		{"budget too small", "/v1/messages", `{"model":"tiny","max_tokens":2000,` + msgs + `,"thinking":{"type":"enabled","budget_tokens":500}}`,
			key, 400, "invalid_request_error", "at least 1024"},
		{"budget over max_tokens", "/v1/messages", `{"model":"tiny","max_tokens":1024,` + msgs + `,"thinking":{"type":"enabled","budget_tokens":1024}}`,
			key, 400, "invalid_request_error", "`max_tokens` must be greater than `thinking.budget_tokens`"},
		{"mcp servers", "/v1/messages", `{` + head + `,"mcp_servers":[{"type":"url","url":"https://example.com","name":"x"}]}`, key, 400, "invalid_request_error", "MCP"},
		{"clearing tool uses", "/v1/messages", `{` + head + `,"context_management":{"edits":[{"type":"clear_tool_uses_20250919"}]}}`, key, 400, "invalid_request_error", "not supported"},
		{"max_tokens in count_tokens", "/v1/messages/count_tokens", `{` + head + `}`, key, 400, "invalid_request_error", "max_tokens: Extra inputs are not permitted"},
		{"not JSON", "/v1/messages", `{`, key, 400, "invalid_request_error", "malformed JSON"},
		{"batches", "/v1/messages/batches", `{}`, key, 404, "not_found_error", "Batches"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, b := post(t, ts.url+c.path, c.body, c.header...)
			e := decode[wireError](t, b)
			if resp.StatusCode != c.status || e.Type != "error" || e.Error.Type != c.typ || !strings.Contains(e.Error.Message, c.words) {
				t.Errorf("%d %s", resp.StatusCode, b)
			}
			if e.RequestID == "" || resp.Header.Get("Request-Id") != e.RequestID {
				t.Errorf("request id %q, header %q", e.RequestID, resp.Header.Get("Request-Id"))
			}
		})
	}
	// What changes nothing is accepted, as Claude Code sends it.
	resp, b := post(t, ts.url+"/v1/messages", `{"model":"tiny","max_tokens":3,"stream":false,"temperature":1,"top_p":0.9,"top_k":40,`+
		`"system":[{"type":"text","text":"x","cache_control":{"type":"ephemeral","ttl":"1h"}}],`+
		`"messages":[{"role":"user","content":[{"type":"text","text":"Hi","cache_control":{"type":"ephemeral"}}]}],`+
		`"metadata":{"user_id":"user_abc_account__session_1"},"service_tier":"auto","cache_control":{"type":"ephemeral"},`+
		`"context_management":{"edits":[{"type":"clear_thinking_20251015","keep":"all"}]},"thinking":{"type":"adaptive"},`+
		`"output_config":{"effort":"high"},"mcp_servers":[],"inference_geo":"us","speed":"standard",`+
		`"tools":[{"name":"f","description":"d","input_schema":{"type":"object","properties":{}},"cache_control":{"type":"ephemeral"},"eager_input_streaming":true,"strict":true}]}`, key...)
	if resp.StatusCode != 200 {
		t.Errorf("Claude Code's fields: %d %s", resp.StatusCode, b)
	}

	// Either header holding a key will do.
	if resp, b := post(t, ts.url+"/v1/messages/count_tokens", `{"model":"tiny",`+msgs+`}`, "Authorization", "Bearer other", "x-api-key", "sk-good"); resp.StatusCode != 200 {
		t.Errorf("both headers: %d %s", resp.StatusCode, b)
	}

	// Through the SDK.
	bad := anthropic.NewClient(option.WithoutEnvironmentDefaults(), option.WithBaseURL(ts.url), option.WithAPIKey("sk-bad"), option.WithMaxRetries(0))
	_, err := bad.Messages.New(context.Background(), anthropic.MessageNewParams{Model: "tiny", MaxTokens: 5, Messages: user("Hi")})
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != 401 || ae.Type() != "authentication_error" || ae.RequestID == "" {
		t.Errorf("bad key: %v", err)
	}
	_, err = ts.client.Messages.New(context.Background(), anthropic.MessageNewParams{Model: "claude-opus-4-8", MaxTokens: 5, Messages: user("Hi")})
	if !errors.As(err, &ae) || ae.StatusCode != 404 || ae.Type() != "not_found_error" {
		t.Errorf("unknown model: %v", err)
	}
	stream := ts.client.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{Model: "tiny", MaxTokens: 5,
		Messages: []anthropic.MessageParam{{OfUser: &anthropic.UserMessageParam{Content: []anthropic.ContentBlockParamUnion{
			{OfImage: &anthropic.ImageBlockParam{Source: anthropic.ImageBlockParamSourceUnion{OfBase64: &anthropic.Base64ImageSourceParam{Data: "AA==", MediaType: "image/png"}}}}}}}}})
	for stream.Next() {
	}
	if err := stream.Err(); !errors.As(err, &ae) || ae.StatusCode != 400 || ae.Type() != "invalid_request_error" {
		t.Errorf("image, streamed: %v", err)
	}
}

// TestStreamWire reads a stream as it comes off the wire: every event
// has an "event:" line naming the type its data carries, message_start
// comes first with a ping after it, and the message ends with
// message_delta and message_stop.
func TestStreamWire(t *testing.T) {
	ts := startServer(t, serverOptions{noEOS: true})
	resp, b := post(t, ts.url+"/v1/messages", `{"model":"tiny","max_tokens":4,"stream":true,"messages":[{"role":"user","content":"Hi"}]}`)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("%d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	var names []string
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	var name string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var v struct {
				Type    string `json:"type"`
				Message struct {
					Content    []any   `json:"content"`
					StopReason *string `json:"stop_reason"`
					Usage      struct {
						InputTokens int `json:"input_tokens"`
					} `json:"usage"`
				} `json:"message"`
			}
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &v); err != nil || v.Type != name {
				t.Fatalf("event %q with data %s", name, line)
			}
			if name == "message_start" && (v.Message.Content == nil || len(v.Message.Content) != 0 || v.Message.StopReason != nil || v.Message.Usage.InputTokens == 0) {
				t.Errorf("message_start %s", line)
			}
			names = append(names, name)
			name = ""
		case line == "":
		default:
			t.Fatalf("line %q", line)
		}
	}
	want := []string{"message_start", "ping", "content_block_start", "content_block_delta", "content_block_delta", "content_block_delta",
		"content_block_delta", "content_block_stop", "message_delta", "message_stop"}
	if !slices.Equal(names, want) {
		t.Errorf("events %v", names)
	}
}

func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
	return v
}

// TestStreamError: a generation that fails after its stream began ends
// with an error event, which the SDK raises as an API error.
func TestStreamError(t *testing.T) {
	ts := startServer(t, serverOptions{noEOS: true, failAfter: 3})
	params := anthropic.MessageNewParams{Model: anthropic.Model(ts.id), MaxTokens: 10, Messages: user("Hi")}
	stream := ts.client.Messages.NewStreaming(context.Background(), params)
	var types []string
	for stream.Next() {
		types = append(types, stream.Current().Type)
	}
	var ae *anthropic.Error
	if err := stream.Err(); !errors.As(err, &ae) || ae.Type() != "api_error" || !strings.Contains(ae.Message, "the backend failed") {
		t.Errorf("stream error %v after %v", err, types)
	}
	if len(types) == 0 || types[0] != "message_start" || slices.Contains(types, "message_stop") {
		t.Errorf("events %v", types)
	}
	_, err := ts.client.Messages.New(context.Background(), params)
	if !errors.As(err, &ae) || ae.StatusCode != 500 || ae.Type() != "api_error" {
		t.Errorf("whole: %v", err)
	}
}

// TestServerRefusals: the server's own refusals on Anthropic's routes
// (a body over the limit, no model loaded yet) come in Anthropic's shape.
func TestServerRefusals(t *testing.T) {
	s := api.New(api.Options{MaxBodyBytes: 100})
	hs := httptest.NewServer(s)
	defer hs.Close()
	resp, b := post(t, hs.URL+"/v1/messages", `{"model":"tiny","max_tokens":5,"messages":[{"role":"user","content":"`+strings.Repeat("x", 200)+`"}]}`)
	if e := decode[wireError](t, b); resp.StatusCode != 413 || e.Error.Type != "request_too_large" {
		t.Errorf("too large: %d %s", resp.StatusCode, b)
	}
	resp, b = post(t, hs.URL+"/v1/messages", `{"model":"tiny","max_tokens":5,"messages":[]}`)
	if e := decode[wireError](t, b); resp.StatusCode != 529 || e.Error.Type != "overloaded_error" || resp.Header.Get("Retry-After") == "" {
		t.Errorf("no model yet: %d %s", resp.StatusCode, b)
	}
}

// TestModels: the server's model list reads as Anthropic's Models API.
func TestModels(t *testing.T) {
	ts := startServer(t, serverOptions{})
	page, err := ts.client.Models.List(context.Background(), anthropic.ModelListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 1 || page.Data[0].ID != ts.id || page.Data[0].Type != "model" || page.Data[0].DisplayName != ts.id ||
		page.Data[0].CreatedAt.IsZero() || page.HasMore || page.FirstID != ts.id || page.LastID != ts.id {
		t.Errorf("%+v", page)
	}
	m, err := ts.client.Models.Get(context.Background(), ts.id, anthropic.ModelGetParams{})
	if err != nil || m.ID != ts.id || m.CreatedAt.IsZero() {
		t.Errorf("%+v %v", m, err)
	}
}
