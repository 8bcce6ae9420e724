package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/ruvllm/ruvllm/models/chat"
	"github.com/ruvllm/ruvllm/models/tokenizer"
	"github.com/ruvllm/ruvllm/toolcall"
)

// maxMessages bounds a conversation's length in messages.
const maxMessages = 4096

// chatIgnorable are chat fields that do not change the result (or only
// with features that are refused where they are set).
var chatIgnorable = []string{"user", "metadata", "store", "service_tier", "prompt_cache_key", "safety_identifier"}

// chatCompletions serves POST /v1/chat/completions.
func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) error {
	f, err := readObject(r)
	if err != nil {
		return err
	}
	t, err := s.requestModel(f, chatFormat{}.idPrefix())
	if err != nil {
		return err
	}
	defer s.abandonRoute(t)
	m := t.model
	if m.Chat == nil {
		return unsupported("model", "the model %s has no chat template; use /v1/completions", quote(m.ID))
	}
	g, err := s.parseGen(f, len(m.Tokenizer.Vocab().Tokens), "max_completion_tokens", "max_tokens")
	if err != nil {
		return err
	}
	if g.logprobs, _, err = f.boolean("logprobs"); err != nil {
		return err
	}
	if v, ok, err := f.integer("top_logprobs"); err != nil {
		return err
	} else if ok {
		if v < 0 || v > 20 {
			return invalid("top_logprobs", codeInvalidValue, "top_logprobs must be between 0 and 20, got %d", v)
		}
		if !g.logprobs {
			return invalid("top_logprobs", codeInvalidValue, "top_logprobs requires logprobs to be true")
		}
		g.topLogprobs = int(v)
	}
	messages, err := parseMessages(f)
	if err != nil {
		return err
	}
	if g.output, err = parseResponseFormat(f); err != nil {
		return err
	}
	tools, err := parseToolList(f)
	if err != nil {
		return err
	}
	tr, err := parseToolChoice(f, tools)
	if err != nil {
		return err
	}
	tr.style = m.tools
	if out, err := tr.output(m); err != nil {
		return err
	} else if out != nil {
		if g.output != nil {
			return unsupported("response_format", "response_format together with tool_choice %s is not supported: the output is a tool call", tr.choice)
		}
		g.output = out
	}
	if tr.active() {
		g.tools, g.render = tr, tr.markers(m)
	}
	if err := refuseChatFeatures(f); err != nil {
		return err
	}
	if err := f.unknown(chatIgnorable...); err != nil {
		return err
	}
	if err := s.acquire(r.Context(), g, t); err != nil {
		return err
	}
	defer g.release()
	text, err := renderChat(m, tr.prepareMessages(messages, false), tr.templateTools(), true)
	if err != nil && tr.active() && !tr.style.knows {
		// A template without a system role gets the tools in the first
		// user message.
		text, err = renderChat(m, tr.prepareMessages(messages, true), tr.templateTools(), true)
	}
	if err != nil {
		return err
	}
	ids := encodePrompt(m.Tokenizer, text)
	return s.generate(w, r, m, "/v1/chat/completions", []prompt{{ids: ids, text: text}}, g, chatFormat{})
}

// renderChat renders messages (and tools) with m's chat template; a
// template that raises for them is the client's 400.
func renderChat(m *Model, messages []map[string]any, tools []any, addGenerationPrompt bool) (string, *apiError) {
	text, err := m.Chat.RenderChat(messages, tools, addGenerationPrompt)
	if err != nil {
		if errors.Is(err, chat.ErrTemplate) {
			return "", invalid("messages", codeTemplate, "the chat template refused the messages: %v", err)
		}
		return "", internalError("rendering the chat template: %v", err)
	}
	return text, nil
}

// refuseChatFeatures answers 400 for the parameters that would change the
// result but are not implemented, rather than ignoring them.
func refuseChatFeatures(f *fields) *apiError {
	for _, name := range []string{"functions", "function_call"} {
		if f.has(name) {
			f.raw(name)
			return unsupported(name, "%s (function calling) is not supported by this server", name)
		}
	}
	if a, ok, err := f.array("modalities"); err != nil {
		return err
	} else if ok {
		for _, m := range a {
			if strings.TrimSpace(string(m)) != `"text"` {
				return unsupported("modalities", "only the text modality is supported")
			}
		}
	}
	for _, name := range []string{"audio", "prediction", "web_search_options", "reasoning_effort", "verbosity", "best_of", "suffix", "echo"} {
		if f.has(name) {
			f.raw(name)
			return unsupported(name, "%s is not supported by this endpoint", name)
		}
	}
	return nil
}

// roles are the message roles a chat accepts, with what the template sees:
// OpenAI's developer role is the system role of older models.
var roles = map[string]string{"system": "system", "developer": "system", "user": "user", "assistant": "assistant", "tool": "tool"}

// parseMessages validates messages and shapes them for the chat template:
// content as a string (text parts joined by newlines), and the optional
// name, tool_calls and tool_call_id kept.
func parseMessages(f *fields) ([]map[string]any, *apiError) {
	raw, ok, err := f.array("messages")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, invalid("messages", codeMissing, "messages is required")
	}
	if len(raw) == 0 {
		return nil, invalid("messages", codeInvalidValue, "messages must not be empty")
	}
	if len(raw) > maxMessages {
		return nil, invalid("messages", codeInvalidValue, "messages holds %d messages; at most %d are allowed", len(raw), maxMessages)
	}
	out := make([]map[string]any, len(raw))
	for i, rm := range raw {
		p := "messages[" + strconv.Itoa(i) + "]"
		mf, err := objectFields(rm, p)
		if err != nil {
			return nil, err
		}
		role, ok, err := mf.str("role")
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, invalid(p+".role", codeMissing, "%s.role is required", p)
		}
		tmplRole, known := roles[role]
		if !known {
			return nil, invalid(p+".role", codeInvalidValue, "%s.role %s is not one of system, developer, user, assistant, tool", p, quote(role))
		}
		msg := map[string]any{"role": tmplRole}
		content, hasContent, err := parseContent(mf, role)
		if err != nil {
			return nil, err
		}
		if name, ok, err := mf.str("name"); err != nil {
			return nil, err
		} else if ok {
			msg["name"] = name
		}
		switch role {
		case "assistant":
			if v, ok := mf.raw("tool_calls"); ok {
				var calls []any
				if err := json.Unmarshal(v, &calls); err != nil {
					return nil, invalid(p+".tool_calls", codeInvalidType, "%s.tool_calls must be an array", p)
				}
				if len(calls) > 0 {
					argumentObjects(calls)
					msg["tool_calls"] = calls
				}
			}
			if rc, ok, err := mf.str("reasoning_content"); err != nil {
				return nil, err
			} else if ok {
				msg["reasoning_content"] = rc
			}
			mf.raw("refusal")
			mf.raw("audio")
			if !hasContent && msg["tool_calls"] == nil {
				return nil, invalid(p+".content", codeMissing, "%s.content is required unless tool_calls is set", p)
			}
		case "tool":
			id, ok, err := mf.str("tool_call_id")
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, invalid(p+".tool_call_id", codeMissing, "%s.tool_call_id is required for a tool message", p)
			}
			msg["tool_call_id"] = id
			fallthrough
		default:
			if !hasContent {
				return nil, invalid(p+".content", codeMissing, "%s.content is required", p)
			}
		}
		if hasContent {
			msg["content"] = content
		} else {
			msg["content"] = nil
		}
		if err := mf.unknown(); err != nil {
			return nil, err
		}
		out[i] = msg
	}
	return out, nil
}

// parseContent reads a message's content: a string, or a list of text
// parts (assistants may also send refusal parts). Other parts (images,
// audio, files) need a multimodal model and are refused.
func parseContent(mf *fields, role string) (string, bool, *apiError) {
	v, ok := mf.raw("content")
	if !ok {
		return "", false, nil
	}
	p := mf.param("content")
	var s string
	if err := json.Unmarshal(v, &s); err == nil {
		return s, true, nil
	}
	parts, ok := parseArray(v)
	if !ok {
		return "", false, invalid(p, codeInvalidType, "%s must be a string or an array of content parts", p)
	}
	texts := make([]string, 0, len(parts))
	for i, part := range parts {
		pp := p + "[" + strconv.Itoa(i) + "]"
		pf, err := objectFields(part, pp)
		if err != nil {
			return "", false, err
		}
		typ, _, err := pf.str("type")
		if err != nil {
			return "", false, err
		}
		key := "text"
		switch {
		case typ == "text":
		case typ == "refusal" && role == "assistant":
			key = "refusal"
		case typ == "":
			return "", false, invalid(pp+".type", codeMissing, "%s.type is required", pp)
		default:
			return "", false, unsupported(pp+".type", "content parts of type %s are not supported: this server handles text only", quote(typ))
		}
		t, ok, err := pf.str(key)
		if err != nil {
			return "", false, err
		}
		if !ok {
			return "", false, invalid(pp+"."+key, codeMissing, "%s.%s is required", pp, key)
		}
		if err := pf.unknown("cache_control"); err != nil {
			return "", false, err
		}
		texts = append(texts, t)
	}
	return strings.Join(texts, "\n"), true, nil
}

// encodePrompt tokenizes a rendered prompt as llama-server does: special
// tokens added and special-token text parsed. A template that writes the
// BOS text itself would otherwise give two BOS tokens; one is dropped.
func encodePrompt(t *tokenizer.Tokenizer, text string) []tokenizer.ID {
	ids := t.Encode(text, tokenizer.EncodeOptions{AddSpecial: true, ParseSpecial: true})
	v := t.Vocab()
	if len(ids) >= 2 && v.AddBOS && ids[0] == v.BOS && ids[1] == v.BOS {
		ids = ids[1:]
	}
	return ids
}

// chatFormat shapes chat completions.
type chatFormat struct{}

func (chatFormat) idPrefix() string { return "chatcmpl-" }

// chatLogprobsOf renders released entries as chat logprobs.
func chatLogprobsOf(t *tokenizer.Tokenizer, entries []tokenEntry) *chatLogprobs {
	lp := &chatLogprobs{Content: make([]chatTokenLogprob, len(entries))}
	for i, e := range entries {
		piece := t.Piece(e.id)
		top := make([]chatTopLogprob, len(e.top))
		for j, a := range e.top {
			p := t.Piece(a.ID)
			top[j] = chatTopLogprob{Token: p, Logprob: jsonLogprob(a.Logprob), Bytes: byteList(p)}
		}
		lp.Content[i] = chatTokenLogprob{Token: piece, Logprob: jsonLogprob(e.logprob), Bytes: byteList(piece), TopLogprobs: top}
	}
	return lp
}

func (chatFormat) response(h responseHead, gen *generation, t *tokenizer.Tokenizer, u usage) any {
	resp := chatCompletion{ID: h.id, Object: "chat.completion", Created: h.created, Model: h.model, SystemFingerprint: h.fingerprint, Usage: u}
	resp.Choices = make([]chatChoice, len(gen.choices))
	for _, c := range gen.choices {
		text := c.text.String()
		cc := chatChoice{Index: c.index, Message: chatMessage{Role: "assistant", Content: &text}, FinishReason: c.finish}
		if c.tools != nil {
			content, calls := toolcall.Parse(c.tools.format, text)
			cc.Message.Content = &content
			if len(calls) > 0 {
				if content == "" {
					cc.Message.Content = nil
				}
				for _, call := range calls {
					cc.Message.ToolCalls = append(cc.Message.ToolCalls, toolCall{ID: newCallID(c.tools.format), Type: "function",
						Function: toolCallFunction{Name: call.Name, Arguments: call.Arguments}})
				}
				if cc.FinishReason == "stop" {
					cc.FinishReason = "tool_calls"
				}
			}
		}
		if c.logprobs {
			cc.Logprobs = chatLogprobsOf(t, c.entries)
		}
		resp.Choices[c.index] = cc
	}
	return resp
}

func (chatFormat) stream(sse *sseWriter, h responseHead, t *tokenizer.Tokenizer, includeUsage bool) streamSink {
	return newSSESink(sse, h, chatChunks{tok: t}, includeUsage)
}

// chatChunks shapes the choices of a chat completion stream.
type chatChunks struct {
	tok *tokenizer.Tokenizer
}

func (chatChunks) object() string { return "chat.completion.chunk" }

// opening gives every choice the assistant role and empty content first,
// as OpenAI does.
func (chatChunks) opening(gen *generation) []chatChunkChoice {
	empty := ""
	out := make([]chatChunkChoice, len(gen.choices))
	for i, c := range gen.choices {
		out[i] = chatChunkChoice{Index: c.index, Delta: chatDelta{Role: "assistant", Content: &empty}}
	}
	return out
}

func (cc chatChunks) text(c *choice, text string, entries []tokenEntry) (chatChunkChoice, bool) {
	ch := chatChunkChoice{Index: c.index, Delta: chatDelta{Content: &text}}
	if c.tools != nil {
		ch.Delta = c.tools.delta(c.tools.parser.Add(text))
	}
	if c.logprobs && len(entries) > 0 {
		ch.Logprobs = chatLogprobsOf(cc.tok, entries)
	}
	return ch, ch.Delta.Content != nil || len(ch.Delta.ToolCalls) > 0 || ch.Logprobs != nil
}

// finish ends a choice: with tools, what the parser held back goes out
// with it, and a choice that called tools finishes with tool_calls.
func (chatChunks) finish(c *choice, reason string) chatChunkChoice {
	ch := chatChunkChoice{Index: c.index}
	if c.tools != nil {
		ch.Delta = c.tools.delta(c.tools.parser.Finish())
		if reason == "stop" && len(c.tools.ids) > 0 {
			reason = "tool_calls"
		}
	}
	ch.FinishReason = &reason
	return ch
}

// delta turns parser events into one chunk's delta: the content, and each
// call's start (id, type, name) and argument fragments, in order.
func (ts *toolStream) delta(evs []toolcall.Event) chatDelta {
	var d chatDelta
	var content strings.Builder
	for _, e := range evs {
		if e.Call < 0 {
			content.WriteString(e.Content)
			continue
		}
		if e.Call == len(ts.ids) {
			ts.ids = append(ts.ids, newCallID(ts.format))
			d.ToolCalls = append(d.ToolCalls, toolCallDelta{Index: e.Call, ID: ts.ids[e.Call], Type: "function",
				Function: toolFunctionDelta{Name: e.Name, Arguments: e.Arguments}})
			continue
		}
		if n := len(d.ToolCalls); n > 0 && d.ToolCalls[n-1].Index == e.Call {
			d.ToolCalls[n-1].Function.Arguments += e.Arguments
			continue
		}
		d.ToolCalls = append(d.ToolCalls, toolCallDelta{Index: e.Call, Function: toolFunctionDelta{Arguments: e.Arguments}})
	}
	if content.Len() > 0 {
		s := content.String()
		d.Content = &s
	}
	return d
}

// responseHead is what every response and chunk of a request repeats.
type responseHead struct {
	id          string
	created     int64
	model       string
	fingerprint string
}

func (s *Server) head(prefix, model string) responseHead {
	return responseHead{id: prefix + uuid.NewString(), created: time.Now().Unix(), model: model, fingerprint: s.opt.Version}
}
