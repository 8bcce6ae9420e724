package anthropic

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"unicode"

	"github.com/ruvllm/ruvllm/session"
)

// The Messages API's response shapes. Fields Anthropic sends as null are
// pointers so that they encode as null rather than vanish.

type message struct {
	ID           string         `json:"id"`
	Type         string         `json:"type"`
	Role         string         `json:"role"`
	Model        string         `json:"model"`
	Content      []contentBlock `json:"content"`
	StopReason   *string        `json:"stop_reason"`
	StopSequence *string        `json:"stop_sequence"`
	Usage        usage          `json:"usage"`
}

// contentBlock is a block of a response: text {"text"}, thinking
// {"thinking", "signature"} or tool_use {"id", "name", "input"}.
type contentBlock struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text,omitempty"`
	Thinking  *string         `json:"thinking,omitempty"`
	Signature *string         `json:"signature,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
}

// usage counts a message's tokens as Anthropic does: input_tokens are the
// prompt's tokens that prefix reuse did not find in the cache, which
// cache_read_input_tokens counts; their sum is the whole prompt.
type usage struct {
	InputTokens              int    `json:"input_tokens"`
	CacheCreationInputTokens int    `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int    `json:"cache_read_input_tokens"`
	OutputTokens             int    `json:"output_tokens"`
	ServiceTier              string `json:"service_tier,omitempty"`
}

func usageOf(u session.Usage) usage {
	return usage{InputTokens: u.PromptTokens - u.CachedTokens, CacheReadInputTokens: u.CachedTokens, OutputTokens: u.CompletionTokens,
		ServiceTier: "standard"}
}

// Stop reasons.
const (
	stopEndTurn       = "end_turn"
	stopMaxTokens     = "max_tokens"
	stopSequence      = "stop_sequence"
	stopToolUse       = "tool_use"
	stopContextWindow = "model_context_window_exceeded"
)

// stopReason is Anthropic's name of why a choice ended. A choice cut off
// before max_tokens was reached by the context filling up
// (session.Request.FitMaxTokens) ended by the context window.
func stopReason(r session.Result, maxTokens int) string {
	switch r.Finish {
	case session.FinishLength:
		if r.Generated < maxTokens {
			return stopContextWindow
		}
		return stopMaxTokens
	case session.FinishStopSequence:
		return stopSequence
	case session.FinishToolCalls:
		return stopToolUse
	}
	return stopEndTurn
}

// The events of a streamed message.

type messageStart struct {
	Type    string  `json:"type"`
	Message message `json:"message"`
}

type blockStart struct {
	Type         string       `json:"type"`
	Index        int          `json:"index"`
	ContentBlock contentBlock `json:"content_block"`
}

type blockDelta struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
	Delta any    `json:"delta"`
}

type textDelta struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type thinkingDelta struct {
	Type     string `json:"type"`
	Thinking string `json:"thinking"`
}

type signatureDelta struct {
	Type      string `json:"type"`
	Signature string `json:"signature"`
}

type inputJSONDelta struct {
	Type        string `json:"type"`
	PartialJSON string `json:"partial_json"`
}

type blockStop struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
}

type messageDelta struct {
	Type  string            `json:"type"`
	Delta messageDeltaStop  `json:"delta"`
	Usage messageDeltaUsage `json:"usage"`
}

type messageDeltaStop struct {
	StopReason   *string `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
}

// messageDeltaUsage are the final counts: the SDKs take every count the
// event carries over message_start's, where input_tokens did not yet know
// the prompt's cached tokens.
type messageDeltaUsage struct {
	InputTokens              int `json:"input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	OutputTokens             int `json:"output_tokens"`
}

type typeOnly struct {
	Type string `json:"type"`
}

// Kinds of blocks.
const (
	kindThinking = "thinking"
	kindText     = "text"
	kindToolUse  = "tool_use"
)

// blocks turns a choice's events into content blocks, in the order the
// model wrote them: a block starts when the kind of output changes
// (thinking, text, a tool call) and ends when the next starts or the
// output ends. A streamed message sends each step through emit as it
// happens; a message sent whole leaves emit nil and reads the blocks at
// the end. Both build the same blocks.
//
// A block never starts with whitespace, and none holds whitespace only,
// which Anthropic refuses when the message comes back in a conversation.
type blocks struct {
	emit func(event string, v any) error
	// omitThinking leaves the thinking text out (thinking.display
	// "omitted"): its blocks come with their signatures and no text.
	omitThinking bool

	list []contentBlock
	// open is the kind of the block being written, "" for none; cur its
	// text (a tool call's arguments); call the index of its call.
	open string
	cur  strings.Builder
	call int
}

// Send takes the events of one step; it is the generation's sink.
func (b *blocks) Send(evs []session.Event) error {
	for i := range evs {
		if err := b.add(&evs[i]); err != nil {
			return err
		}
	}
	return nil
}

func (b *blocks) add(ev *session.Event) error {
	switch ev.Kind {
	case session.EventReasoning:
		return b.write(kindThinking, ev.Text)
	case session.EventText:
		return b.write(kindText, ev.Text)
	case session.EventCallStart:
		if err := b.close(); err != nil {
			return err
		}
		return b.start(contentBlock{Type: kindToolUse, ID: ev.ID, Name: ev.Name, Input: json.RawMessage("{}")}, ev.Call)
	case session.EventCallArguments:
		if b.open != kindToolUse || b.call != ev.Call || ev.Text == "" {
			return nil
		}
		b.cur.WriteString(ev.Text)
		return b.send("content_block_delta", blockDelta{Type: "content_block_delta", Index: len(b.list) - 1,
			Delta: inputJSONDelta{Type: "input_json_delta", PartialJSON: ev.Text}})
	case session.EventFinish:
		return b.close()
	}
	return nil
}

// write adds text of a kind: to the open block of that kind, or to a new
// one, which starts at the first character that is not whitespace.
func (b *blocks) write(kind, text string) error {
	if b.open != kind {
		if err := b.close(); err != nil {
			return err
		}
		text = strings.TrimLeftFunc(text, unicode.IsSpace)
		if text == "" {
			return nil
		}
		empty := ""
		nb := contentBlock{Type: kind, Text: &empty}
		if kind == kindThinking {
			nb = contentBlock{Type: kind, Thinking: &empty, Signature: &empty}
		}
		if err := b.start(nb, 0); err != nil {
			return err
		}
	}
	b.cur.WriteString(text)
	if kind == kindText {
		return b.send("content_block_delta", blockDelta{Type: "content_block_delta", Index: len(b.list) - 1, Delta: textDelta{Type: "text_delta", Text: text}})
	}
	if b.omitThinking {
		return nil
	}
	return b.send("content_block_delta", blockDelta{Type: "content_block_delta", Index: len(b.list) - 1, Delta: thinkingDelta{Type: "thinking_delta", Thinking: text}})
}

// start opens a block.
func (b *blocks) start(nb contentBlock, call int) error {
	b.list = append(b.list, nb)
	b.open, b.call = nb.Type, call
	b.cur.Reset()
	return b.send("content_block_start", blockStart{Type: "content_block_start", Index: len(b.list) - 1, ContentBlock: nb})
}

// close ends the open block: a thinking block gets its signature (a
// signature_delta before it stops), a tool_use block its input.
func (b *blocks) close() error {
	if b.open == "" {
		return nil
	}
	i := len(b.list) - 1
	last := &b.list[i]
	text := b.cur.String()
	switch b.open {
	case kindText:
		last.Text = &text
	case kindThinking:
		sig := signature(text)
		shown := text
		if b.omitThinking {
			shown = ""
		}
		last.Thinking, last.Signature = &shown, &sig
		if err := b.send("content_block_delta", blockDelta{Type: "content_block_delta", Index: i, Delta: signatureDelta{Type: "signature_delta", Signature: sig}}); err != nil {
			return err
		}
	case kindToolUse:
		last.Input = toolInput(text)
	}
	b.open = ""
	b.cur.Reset()
	return b.send("content_block_stop", blockStop{Type: "content_block_stop", Index: i})
}

func (b *blocks) send(event string, v any) error {
	if b.emit == nil {
		return nil
	}
	return b.emit(event, v)
}

// content is the blocks, once the choice has finished.
func (b *blocks) content() []contentBlock {
	if b.list == nil {
		return []contentBlock{}
	}
	return b.list
}

// toolInput is a call's input as Anthropic gives it, a JSON object: the
// arguments the model wrote when they are one, else (a call cut short by
// max_tokens, or arguments that are not an object) the empty object, as
// the Go SDK's stream accumulator makes of arguments that do not parse.
func toolInput(args string) json.RawMessage {
	raw := json.RawMessage(strings.TrimSpace(args))
	var obj map[string]json.RawMessage
	if len(raw) > 0 && raw[0] == '{' && json.Unmarshal(raw, &obj) == nil {
		return raw
	}
	return json.RawMessage("{}")
}

// signature is a thinking block's signature: opaque and stable, a hash of
// the thinking. Anthropic's SDKs require the field; this server does not
// check the signatures it gets back.
func signature(thinking string) string {
	h := sha256.Sum256([]byte("ruvllm thinking\x00" + thinking))
	return base64.StdEncoding.EncodeToString(h[:])
}
