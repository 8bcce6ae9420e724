package anthropic

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/ruvllm/ruvllm/api/jsonhttp"
	"github.com/ruvllm/ruvllm/session"
)

// textSeparator joins the text blocks of one turn, and of system, into the
// one string a chat template takes.
const textSeparator = "\n\n"

// errorPrefix marks the content of a tool result whose is_error is true:
// chat templates have no place for the flag.
const errorPrefix = "Error: "

// serverBlocks are the content blocks of Anthropic's server tools (and
// other features that run on Anthropic's side), which this server does not
// run, so no conversation with it holds them.
var serverBlocks = []string{"server_tool_use", "web_search_tool_result", "web_fetch_tool_result", "code_execution_tool_result",
	"bash_code_execution_tool_result", "text_editor_code_execution_tool_result", "tool_search_tool_result", "mcp_tool_use",
	"mcp_tool_result", "container_upload", "compaction", "search_result", "tool_reference"}

// mediaBlocks are content blocks that need a model that reads more than
// text.
var mediaBlocks = []string{"image", "document"}

// block is one content block of a message, as far as the conversion needs
// it.
type block struct {
	typ   string
	param string // where it is in the request, for errors
	// text is a text block's text, a thinking block's thinking, or a
	// tool_result's content as text.
	text string
	// id, name and input are a tool_use's.
	id, name string
	input    json.RawMessage
	// useID and isError are a tool_result's.
	useID   string
	isError bool
}

// turn is a message of the request: consecutive messages of one role are
// merged into one turn, as Anthropic combines them.
type turn struct {
	role   string
	param  string
	blocks []block
}

// conversion is the request's conversation as the chat template takes it.
type conversion struct {
	messages []session.Message
	// continueFinal: the last message is the assistant's, which the model
	// continues (prefill).
	continueFinal bool
}

// parseSystem reads system: a string or an array of text blocks, joined.
func parseSystem(f *jsonhttp.Fields) (string, error) {
	v, ok := f.Raw("system")
	if !ok {
		return "", nil
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		return stripBillingHeader(s), nil
	}
	raw, ok := jsonhttp.ParseArray(v)
	if !ok {
		return "", session.Invalid("system", session.CodeInvalidType, "system must be a string or an array of text blocks")
	}
	texts := make([]string, 0, len(raw))
	for i, rb := range raw {
		p := "system[" + strconv.Itoa(i) + "]"
		bf, err := jsonhttp.ObjectOf(rb, p)
		if err != nil {
			return "", err
		}
		typ, err := blockType(bf, p)
		if err != nil {
			return "", err
		}
		if typ != "text" {
			return "", session.Invalid(p+".type", session.CodeInvalidValue, "%s.type must be \"text\", got %s", p, session.Quote(typ))
		}
		text, err := readText(bf, p)
		if err != nil {
			return "", err
		}
		if err := nonEmptyText(text, p); err != nil {
			return "", err
		}
		if text = stripBillingHeader(text); text != "" {
			texts = append(texts, text)
		}
	}
	return strings.Join(texts, textSeparator), nil
}

// billingHeader starts the line Claude Code puts first in its system
// prompt for Anthropic's billing, which Anthropic's API does not show the
// model. Its cch= value changes with every request: left in, it would
// change the prompt's first tokens every turn, and no turn could reuse the
// cached prefix of the one before.
const billingHeader = "x-anthropic-billing-header:"

// stripBillingHeader drops the billing line from the start of a system
// text.
func stripBillingHeader(s string) string {
	if !strings.HasPrefix(s, billingHeader) {
		return s
	}
	_, rest, _ := strings.Cut(s, "\n")
	return strings.TrimLeft(rest, "\n")
}

// blockType reads a content block's type, which is required.
func blockType(bf *jsonhttp.Fields, p string) (string, error) {
	typ, ok, err := bf.Str("type")
	if err != nil {
		return "", err
	}
	if !ok {
		return "", missing(p + ".type")
	}
	return typ, nil
}

// readText reads a text block's text; cache_control and citations change
// nothing here.
func readText(bf *jsonhttp.Fields, p string) (string, error) {
	text, ok, err := bf.Str("text")
	if err != nil {
		return "", err
	}
	if !ok {
		return "", missing(p + ".text")
	}
	if _, _, err := bf.Array("citations"); err != nil {
		return "", err
	}
	if err := cacheControl(bf); err != nil {
		return "", err
	}
	return text, bf.Unknown()
}

// cacheControl reads a block's cache_control: prefix reuse caches every
// prompt here, so a breakpoint changes nothing.
func cacheControl(bf *jsonhttp.Fields) error {
	_, _, err := bf.Object("cache_control")
	return err
}

// nonEmptyText refuses a text block without text, as Anthropic does.
func nonEmptyText(text, p string) error {
	if text == "" {
		return session.Invalid(p+".text", session.CodeInvalidValue, "%s: text content blocks must be non-empty", p)
	}
	if strings.TrimSpace(text) == "" {
		return session.Invalid(p+".text", session.CodeInvalidValue, "%s: text content blocks must contain non-whitespace text", p)
	}
	return nil
}

// parseMessages reads messages and turns them, with the system prompt,
// into the session's chat messages: tool_use blocks become the
// assistant's tool_calls (arguments as objects), tool_result blocks tool
// messages before the user's text of the same turn, thinking blocks the
// assistant's reasoning_content. A last assistant message with text is
// continued (prefill).
func parseMessages(f *jsonhttp.Fields, system string) (conversion, error) {
	var conv conversion
	raw, ok, err := f.Array("messages")
	if err != nil {
		return conv, err
	}
	if !ok {
		return conv, missing("messages")
	}
	if len(raw) == 0 {
		return conv, session.Invalid("messages", session.CodeInvalidValue, "messages: at least one message is required")
	}
	if len(raw) > session.MaxMessages {
		return conv, session.Invalid("messages", session.CodeInvalidValue, "messages holds %d messages; at most %d are allowed", len(raw), session.MaxMessages)
	}
	var turns []turn
	for i, rm := range raw {
		p := "messages[" + strconv.Itoa(i) + "]"
		mf, err := jsonhttp.ObjectOf(rm, p)
		if err != nil {
			return conv, err
		}
		role, ok, err := mf.Str("role")
		if err != nil {
			return conv, err
		}
		if !ok {
			return conv, missing(p + ".role")
		}
		if role != "user" && role != "assistant" && role != "system" {
			return conv, session.Invalid(p+".role", session.CodeInvalidValue, "%s.role must be \"user\", \"assistant\" or \"system\", got %s", p, session.Quote(role))
		}
		content, ok := mf.Raw("content")
		if !ok {
			return conv, missing(p + ".content")
		}
		blocks, err := parseBlocks(content, p+".content", role)
		if err != nil {
			return conv, err
		}
		if err := mf.Unknown(); err != nil {
			return conv, err
		}
		if n := len(turns); n > 0 && turns[n-1].role == role {
			turns[n-1].blocks = append(turns[n-1].blocks, blocks...)
			continue
		}
		turns = append(turns, turn{role: role, param: p, blocks: blocks})
	}
	if err := checkTurns(turns); err != nil {
		return conv, err
	}
	// System messages that open the conversation join the system prompt;
	// later ones stay where they are, and apply from there on.
	for len(turns) > 0 && turns[0].role == "system" {
		if system != "" {
			system += textSeparator
		}
		system += joinText(turns[0].blocks)
		turns = turns[1:]
	}
	if system != "" {
		conv.messages = append(conv.messages, session.Message{"role": "system", "content": system})
	}
	names := map[string]string{} // tool_use id → tool name
	for i, t := range turns {
		final := i == len(turns)-1 && t.role == "assistant"
		switch t.role {
		case "user":
			conv.messages = append(conv.messages, userMessages(t, names)...)
			continue
		case "system":
			conv.messages = append(conv.messages, session.Message{"role": "system", "content": joinText(t.blocks)})
			continue
		}
		msg, text := assistantMessage(t, names)
		if final {
			if text == "" {
				// Nothing to continue: the model starts the turn.
				continue
			}
			if strings.TrimRightFunc(text, unicode.IsSpace) != text {
				return conv, session.Invalid(t.param+".content", session.CodeInvalidValue, "%s: final assistant content cannot end with trailing whitespace", t.param)
			}
			conv.continueFinal = true
		}
		conv.messages = append(conv.messages, msg)
	}
	return conv, nil
}

// parseBlocks reads a message's content (the field p): a string, or an
// array of content blocks.
func parseBlocks(v json.RawMessage, p, role string) ([]block, error) {
	var s string
	if json.Unmarshal(v, &s) == nil {
		if s == "" {
			return nil, nil
		}
		return []block{{typ: "text", param: p, text: s}}, nil
	}
	raw, ok := jsonhttp.ParseArray(v)
	if !ok {
		return nil, session.Invalid(p, session.CodeInvalidType, "%s must be a string or an array of content blocks", p)
	}
	blocks := make([]block, 0, len(raw))
	for i, rb := range raw {
		bp := p + "[" + strconv.Itoa(i) + "]"
		bf, err := jsonhttp.ObjectOf(rb, bp)
		if err != nil {
			return nil, err
		}
		typ, err := blockType(bf, bp)
		if err != nil {
			return nil, err
		}
		b := block{typ: typ, param: bp}
		switch {
		case slices.Contains(mediaBlocks, typ):
			return nil, session.Unsupported(bp+".type", "%s: content blocks of type %s are not supported: this server's models read text only", bp, session.Quote(typ))
		case slices.Contains(serverBlocks, typ):
			return nil, session.Unsupported(bp+".type", "%s: content blocks of type %s belong to features that run on Anthropic's side (server tools, search results, tool search, compaction), which this server does not have", bp, session.Quote(typ))
		case typ == "text":
			if b.text, err = readText(bf, bp); err != nil {
				return nil, err
			}
		case role == "system":
			return nil, session.Invalid(bp+".type", session.CodeInvalidValue, "%s: system messages hold text blocks only", bp)
		case typ == "tool_use" && role == "assistant":
			if err := readToolUse(bf, &b); err != nil {
				return nil, err
			}
		case typ == "tool_result" && role == "user":
			if err := readToolResult(bf, &b); err != nil {
				return nil, err
			}
		case typ == "thinking" && role == "assistant":
			var ok bool
			if b.text, ok, err = bf.Str("thinking"); err != nil {
				return nil, err
			} else if !ok {
				return nil, missing(bp + ".thinking")
			}
			// The signature is opaque; this server's own are not checked.
			if _, _, err := bf.Str("signature"); err != nil {
				return nil, err
			}
			if err := bf.Unknown(); err != nil {
				return nil, err
			}
		case typ == "redacted_thinking" && role == "assistant":
			// Encrypted by Anthropic: nothing a template can show.
			if _, _, err := bf.Str("data"); err != nil {
				return nil, err
			}
			if err := bf.Unknown(); err != nil {
				return nil, err
			}
		case typ == "tool_use" || typ == "thinking" || typ == "redacted_thinking":
			return nil, session.Invalid(bp+".type", session.CodeInvalidValue, "%s: %s blocks belong in assistant messages", bp, typ)
		case typ == "tool_result":
			return nil, session.Invalid(bp+".type", session.CodeInvalidValue, "%s: tool_result blocks belong in user messages", bp)
		default:
			return nil, session.Invalid(bp+".type", session.CodeInvalidValue, "%s.type %s is not a content block type", bp, session.Quote(typ))
		}
		blocks = append(blocks, b)
	}
	return blocks, nil
}

// readToolUse reads a tool_use block: id, name and input (an object).
func readToolUse(bf *jsonhttp.Fields, b *block) error {
	var ok bool
	var err error
	if b.id, ok, err = bf.Str("id"); err != nil {
		return err
	} else if !ok {
		return missing(b.param + ".id")
	}
	if b.name, ok, err = bf.Str("name"); err != nil {
		return err
	} else if !ok {
		return missing(b.param + ".name")
	}
	if _, ok, err := bf.Object("input"); err != nil {
		return err
	} else if !ok {
		return missing(b.param + ".input")
	}
	b.input, _ = bf.Raw("input")
	if err := cacheControl(bf); err != nil {
		return err
	}
	if c, ok, err := bf.Object("caller"); err != nil {
		return err
	} else if ok {
		typ, _, err := c.Str("type")
		if err != nil {
			return err
		}
		if typ != "direct" {
			return session.Unsupported(b.param+".caller", "%s.caller: only direct calls are supported (programmatic tool calling runs on Anthropic's side)", b.param)
		}
		if err := c.Unknown(); err != nil {
			return err
		}
	}
	return bf.Unknown()
}

// readToolResult reads a tool_result block: tool_use_id, content (a
// string or text blocks, joined by newlines) and is_error.
func readToolResult(bf *jsonhttp.Fields, b *block) error {
	var ok bool
	var err error
	if b.useID, ok, err = bf.Str("tool_use_id"); err != nil {
		return err
	} else if !ok {
		return missing(b.param + ".tool_use_id")
	}
	if b.isError, _, err = bf.Bool("is_error"); err != nil {
		return err
	}
	if err := cacheControl(bf); err != nil {
		return err
	}
	if v, ok := bf.Raw("content"); ok {
		cp := b.param + ".content"
		var s string
		if json.Unmarshal(v, &s) == nil {
			b.text = s
		} else {
			raw, ok := jsonhttp.ParseArray(v)
			if !ok {
				return session.Invalid(cp, session.CodeInvalidType, "%s must be a string or an array of content blocks", cp)
			}
			texts := make([]string, 0, len(raw))
			for i, rb := range raw {
				p := cp + "[" + strconv.Itoa(i) + "]"
				tf, err := jsonhttp.ObjectOf(rb, p)
				if err != nil {
					return err
				}
				typ, err := blockType(tf, p)
				if err != nil {
					return err
				}
				switch {
				case typ == "text":
				case slices.Contains(mediaBlocks, typ):
					return session.Unsupported(p+".type", "%s: content blocks of type %s are not supported: this server's models read text only", p, session.Quote(typ))
				default:
					return session.Unsupported(p+".type", "%s: tool results of type %s are not supported; give text", p, session.Quote(typ))
				}
				text, err := readText(tf, p)
				if err != nil {
					return err
				}
				texts = append(texts, text)
			}
			b.text = strings.Join(texts, "\n")
		}
	}
	return bf.Unknown()
}

// checkTurns applies Anthropic's rules to the conversation: every message
// but a final assistant one has content, text blocks have text, and every
// tool_use is answered by a tool_result in the next message, which answers
// nothing else.
func checkTurns(turns []turn) error {
	seen := map[string]bool{}
	for i, t := range turns {
		final := i == len(turns)-1 && t.role == "assistant"
		if len(t.blocks) == 0 && !final {
			return session.Invalid(t.param+".content", session.CodeInvalidValue,
				"%s: all messages must have non-empty content except for the optional final assistant message", t.param)
		}
		var uses []string
		for _, b := range t.blocks {
			switch b.typ {
			case "text":
				if !final {
					if err := nonEmptyText(b.text, b.param); err != nil {
						return err
					}
				}
			case "tool_use":
				if seen[b.id] {
					return session.Invalid(b.param+".id", session.CodeInvalidValue, "%s: `tool_use` ids must be unique; %s is used twice", b.param, session.Quote(b.id))
				}
				seen[b.id] = true
				uses = append(uses, b.id)
			case "tool_result":
				var prev []string
				if i > 0 && turns[i-1].role == "assistant" {
					prev = toolUseIDs(turns[i-1])
				}
				if !slices.Contains(prev, b.useID) {
					return session.Invalid(b.param+".tool_use_id", session.CodeInvalidValue,
						"%s: unexpected `tool_use_id` found in `tool_result` blocks: %s. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.",
						b.param, b.useID)
				}
			}
		}
		if len(uses) == 0 {
			continue
		}
		var answered []string
		if i+1 < len(turns) {
			for _, b := range turns[i+1].blocks {
				if b.typ == "tool_result" {
					answered = append(answered, b.useID)
				}
			}
		}
		var unanswered []string
		for _, id := range uses {
			if !slices.Contains(answered, id) {
				unanswered = append(unanswered, id)
			}
		}
		if len(unanswered) > 0 {
			return session.Invalid(t.param, session.CodeInvalidValue,
				"%s: `tool_use` ids were found without `tool_result` blocks immediately after: %s. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
				t.param, strings.Join(unanswered, ", "))
		}
	}
	return nil
}

// joinText is the text of a turn's text blocks.
func joinText(blocks []block) string {
	var texts []string
	for _, b := range blocks {
		if b.typ == "text" {
			texts = append(texts, b.text)
		}
	}
	return strings.Join(texts, textSeparator)
}

func toolUseIDs(t turn) []string {
	var ids []string
	for _, b := range t.blocks {
		if b.typ == "tool_use" {
			ids = append(ids, b.id)
		}
	}
	return ids
}

// userMessages are a user turn as the template takes it: a tool message
// for each tool_result, in order, then the text as a user message.
func userMessages(t turn, names map[string]string) []session.Message {
	var out []session.Message
	var texts []string
	for _, b := range t.blocks {
		switch b.typ {
		case "text":
			texts = append(texts, b.text)
		case "tool_result":
			content := b.text
			if b.isError {
				content = errorPrefix + content
			}
			m := session.Message{"role": "tool", "tool_call_id": b.useID, "content": content}
			if name := names[b.useID]; name != "" {
				// Templates that name the tool a result comes from
				// (Hermes') read it here.
				m["name"] = name
			}
			out = append(out, m)
		}
	}
	if len(texts) > 0 {
		out = append(out, session.Message{"role": "user", "content": strings.Join(texts, textSeparator)})
	}
	return out
}

// assistantMessage is an assistant turn as the template takes it: its
// text, its thinking as reasoning_content, and its tool_use blocks as
// OpenAI's tool_calls with the arguments as objects (as Hugging Face
// templates expect them). It returns the text too.
func assistantMessage(t turn, names map[string]string) (session.Message, string) {
	var texts, thinking []string
	var calls []any
	for _, b := range t.blocks {
		switch b.typ {
		case "text":
			texts = append(texts, b.text)
		case "thinking":
			if b.text != "" {
				thinking = append(thinking, b.text)
			}
		case "tool_use":
			var args map[string]any
			_ = json.Unmarshal(b.input, &args) // an object: checked when read
			if args == nil {
				args = map[string]any{}
			}
			names[b.id] = b.name
			calls = append(calls, map[string]any{"id": b.id, "type": "function", "function": map[string]any{"name": b.name, "arguments": args}})
		}
	}
	text := strings.Join(texts, textSeparator)
	// A turn that only calls tools has empty content: templates such as
	// Qwen3's take the content as a string.
	msg := session.Message{"role": "assistant", "content": text}
	if len(thinking) > 0 {
		msg["reasoning_content"] = strings.Join(thinking, textSeparator)
	}
	if len(calls) > 0 {
		msg["tool_calls"] = calls
	}
	return msg, text
}
