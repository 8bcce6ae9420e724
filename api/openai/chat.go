package openai

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ruvllm/ruvllm/api/jsonhttp"
	"github.com/ruvllm/ruvllm/models/tokenizer"
	"github.com/ruvllm/ruvllm/session"
)

// chatIgnorable are chat fields that do not change the result (or only
// with features that are refused where they are set).
var chatIgnorable = []string{"metadata", "store", "service_tier", "prompt_cache_key", "safety_identifier"}

// chatRequest reads a chat completion request into a session request.
func (a *API) chatRequest(f *jsonhttp.Fields) (*genRequest, error) {
	g, err := parseGen(f, a.Models, "max_completion_tokens", "max_tokens")
	if err != nil {
		return nil, err
	}
	req := &g.req
	req.IDPrefix, req.Route = "chatcmpl-", "/v1/chat/completions"
	if err := ParseSampling(f, &req.Sampling); err != nil {
		return nil, err
	}
	if req.Logprobs, _, err = f.Bool("logprobs"); err != nil {
		return nil, err
	}
	if v, ok, err := f.Integer("top_logprobs"); err != nil {
		return nil, err
	} else if ok {
		if v < 0 || v > 20 {
			return nil, session.Invalid("top_logprobs", session.CodeInvalidValue, "top_logprobs must be between 0 and 20, got %d", v)
		}
		if !req.Logprobs {
			return nil, session.Invalid("top_logprobs", session.CodeInvalidValue, "top_logprobs requires logprobs to be true")
		}
		req.TopLogprobs = int(v)
	}
	if req.Messages, err = ParseMessages(f, "messages"); err != nil {
		return nil, err
	}
	if req.Output, err = parseOutput(f); err != nil {
		return nil, err
	}
	if req.Tools, err = ParseTools(f); err != nil {
		return nil, err
	}
	if req.ToolChoice, err = parseToolChoice(f); err != nil {
		return nil, err
	}
	if tc := req.ToolChoice; tc.Mode == session.ToolFunction && !slices.ContainsFunc(req.Tools, func(t session.Tool) bool { return t.Name == tc.Name }) {
		return nil, session.Invalid("tool_choice.function.name", session.CodeInvalidValue, "tool_choice names %s, which is not one of the tools", session.Quote(tc.Name))
	}
	if err := parseTemplateOptions(f, req); err != nil {
		return nil, err
	}
	if err := assistantPrefill(f, req); err != nil {
		return nil, err
	}
	if err := refuseChatFeatures(f); err != nil {
		return nil, err
	}
	if err := f.Unknown(chatIgnorable...); err != nil {
		return nil, err
	}
	return g, nil
}

// parseTemplateOptions reads the chat template's options: vLLM's and
// llama-server's chat_template_kwargs, add_generation_prompt and
// continue_final_message, and OpenAI's reasoning_effort.
func parseTemplateOptions(f *jsonhttp.Fields, req *session.Request) error {
	kw, ok, err := f.Object("chat_template_kwargs")
	if err != nil {
		return err
	}
	if ok {
		req.Template.Kwargs = map[string]any{}
		for _, k := range kw.Names() {
			v, _ := kw.Raw(k)
			req.Template.Kwargs[k] = v
		}
	}
	if agp, ok, err := f.Bool("add_generation_prompt"); err != nil {
		return err
	} else if ok {
		req.Template.NoGenerationPrompt = !agp
	}
	if req.Template.ContinueFinal, _, err = f.Bool("continue_final_message"); err != nil {
		return err
	}
	if req.Template.ContinueFinal && !req.Template.NoGenerationPrompt && f.Has("add_generation_prompt") {
		return session.Invalid("continue_final_message", session.CodeInvalidValue, "continue_final_message and add_generation_prompt cannot both be true")
	}
	if e, ok, err := f.Str("reasoning_effort"); err != nil {
		return err
	} else if ok {
		switch e {
		case "none", "minimal", "low", "medium", "high":
		default:
			return session.Invalid("reasoning_effort", session.CodeInvalidValue, "reasoning_effort %s is not one of none, minimal, low, medium, high", session.Quote(e))
		}
		if e == "minimal" {
			e = "low" // the lowest level thinking templates know
		}
		req.Reasoning.Effort = e
	}
	return nil
}

// assistantPrefill continues a conversation that ends with an assistant
// message of text, as llama-server does (the model writes on from the
// prefill rather than starting a new turn), unless the client said
// otherwise with add_generation_prompt or continue_final_message; two
// assistant messages at the end are refused, as llama-server refuses them.
func assistantPrefill(f *jsonhttp.Fields, req *session.Request) error {
	msgs := req.Messages
	n := len(msgs)
	if n == 0 || msgs[n-1]["role"] != "assistant" {
		return nil
	}
	if n >= 2 && msgs[n-2]["role"] == "assistant" {
		return session.Invalid("messages", session.CodeInvalidValue, "the messages end with two assistant messages; at most one may be continued")
	}
	content, _ := msgs[n-1]["content"].(string)
	if f.Has("add_generation_prompt") || f.Has("continue_final_message") || msgs[n-1]["tool_calls"] != nil || content == "" {
		return nil
	}
	req.Template.ContinueFinal = true
	if joined, ok := prefillParts(f); ok {
		msgs[n-1]["content"] = joined
	}
	return nil
}

// prefillParts is the continued assistant message's text parts joined as
// they are, without the newline between parts of other messages: the
// model writes on from the prefill, so "Wh" and "ill" are "Whill", as
// llama-server continues them. ok is false when the content is a string.
func prefillParts(f *jsonhttp.Fields) (string, bool) {
	raw, _ := f.Peek("messages")
	msgs, _ := jsonhttp.ParseArray(raw)
	if len(msgs) == 0 {
		return "", false
	}
	var last struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if json.Unmarshal(msgs[len(msgs)-1], &last) != nil || last.Content == nil {
		return "", false
	}
	var b strings.Builder
	for _, p := range last.Content {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String(), true
}

// refuseChatFeatures answers 400 for the parameters that would change the
// result but are not implemented, rather than ignoring them.
func refuseChatFeatures(f *jsonhttp.Fields) error {
	for _, name := range []string{"functions", "function_call"} {
		if f.Has(name) {
			f.Raw(name)
			return session.Unsupported(name, "%s (function calling) is not supported by this server; use tools", name)
		}
	}
	if a, ok, err := f.Array("modalities"); err != nil {
		return err
	} else if ok {
		for _, m := range a {
			if strings.TrimSpace(string(m)) != `"text"` {
				return session.Unsupported("modalities", "only the text modality is supported")
			}
		}
	}
	for _, name := range []string{"audio", "prediction", "web_search_options", "verbosity", "best_of", "suffix", "echo"} {
		if f.Has(name) {
			f.Raw(name)
			return session.Unsupported(name, "%s is not supported by this endpoint", name)
		}
	}
	return nil
}

// roles are the message roles a chat accepts, with what the template sees:
// OpenAI's developer role is the system role of older models.
var roles = map[string]string{"system": "system", "developer": "system", "user": "user", "assistant": "assistant", "tool": "tool"}

// ParseMessages validates OpenAI's chat messages (the field param) and
// shapes them for the chat template: content as a string (text parts joined
// by newlines), and the optional name, tool_calls (arguments as objects)
// and tool_call_id kept, and reasoning_content (or reasoning) for
// templates that show past reasoning.
func ParseMessages(f *jsonhttp.Fields, param string) ([]session.Message, error) {
	raw, ok, err := f.Array(param)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, session.Invalid(param, session.CodeMissing, "%s is required", param)
	}
	if len(raw) == 0 {
		return nil, session.Invalid(param, session.CodeInvalidValue, "%s must not be empty", param)
	}
	if len(raw) > session.MaxMessages {
		return nil, session.Invalid(param, session.CodeInvalidValue, "%s holds %d messages; at most %d are allowed", param, len(raw), session.MaxMessages)
	}
	out := make([]session.Message, len(raw))
	for i, rm := range raw {
		p := param + "[" + strconv.Itoa(i) + "]"
		mf, err := jsonhttp.ObjectOf(rm, p)
		if err != nil {
			return nil, err
		}
		role, ok, err := mf.Str("role")
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, session.Invalid(p+".role", session.CodeMissing, "%s.role is required", p)
		}
		tmplRole, known := roles[role]
		if !known {
			return nil, session.Invalid(p+".role", session.CodeInvalidValue, "%s.role %s is not one of system, developer, user, assistant, tool", p, session.Quote(role))
		}
		msg := session.Message{"role": tmplRole}
		content, hasContent, err := parseContent(mf, role)
		if err != nil {
			return nil, err
		}
		if name, ok, err := mf.Str("name"); err != nil {
			return nil, err
		} else if ok {
			msg["name"] = name
		}
		switch role {
		case "assistant":
			if v, ok := mf.Raw("tool_calls"); ok {
				var calls []any
				if err := json.Unmarshal(v, &calls); err != nil {
					return nil, session.Invalid(p+".tool_calls", session.CodeInvalidType, "%s.tool_calls must be an array", p)
				}
				if len(calls) > 0 {
					session.ArgumentObjects(calls)
					msg["tool_calls"] = calls
				}
			}
			for _, name := range []string{"reasoning_content", "reasoning"} {
				if rc, ok, err := mf.Str(name); err != nil {
					return nil, err
				} else if ok {
					msg["reasoning_content"] = rc
				}
			}
			mf.Raw("refusal")
			mf.Raw("audio")
			if !hasContent && msg["tool_calls"] == nil {
				return nil, session.Invalid(p+".content", session.CodeMissing, "%s.content is required unless tool_calls is set", p)
			}
		case "tool":
			id, ok, err := mf.Str("tool_call_id")
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, session.Invalid(p+".tool_call_id", session.CodeMissing, "%s.tool_call_id is required for a tool message", p)
			}
			msg["tool_call_id"] = id
			fallthrough
		default:
			if !hasContent {
				return nil, session.Invalid(p+".content", session.CodeMissing, "%s.content is required", p)
			}
		}
		if hasContent {
			msg["content"] = content
		} else {
			msg["content"] = nil
		}
		if err := mf.Unknown(); err != nil {
			return nil, err
		}
		out[i] = msg
	}
	return out, nil
}

// parseContent reads a message's content: a string, or a list of text
// parts (assistants may also send refusal parts). Other parts (images,
// audio, files) need a multimodal model and are refused.
func parseContent(mf *jsonhttp.Fields, role string) (string, bool, error) {
	v, ok := mf.Raw("content")
	if !ok {
		return "", false, nil
	}
	p := mf.Param("content")
	var s string
	if err := json.Unmarshal(v, &s); err == nil {
		return s, true, nil
	}
	parts, ok := jsonhttp.ParseArray(v)
	if !ok {
		return "", false, session.Invalid(p, session.CodeInvalidType, "%s must be a string or an array of content parts", p)
	}
	texts := make([]string, 0, len(parts))
	for i, part := range parts {
		pp := p + "[" + strconv.Itoa(i) + "]"
		pf, err := jsonhttp.ObjectOf(part, pp)
		if err != nil {
			return "", false, err
		}
		typ, _, err := pf.Str("type")
		if err != nil {
			return "", false, err
		}
		key := "text"
		switch {
		case typ == "text":
		case typ == "refusal" && role == "assistant":
			key = "refusal"
		case typ == "":
			return "", false, session.Invalid(pp+".type", session.CodeMissing, "%s.type is required", pp)
		default:
			return "", false, session.Unsupported(pp+".type", "content parts of type %s are not supported: this server handles text only", session.Quote(typ))
		}
		t, ok, err := pf.Str(key)
		if err != nil {
			return "", false, err
		}
		if !ok {
			return "", false, session.Invalid(pp+"."+key, session.CodeMissing, "%s.%s is required", pp, key)
		}
		if err := pf.Unknown("cache_control"); err != nil {
			return "", false, err
		}
		texts = append(texts, t)
	}
	return strings.Join(texts, "\n"), true, nil
}

// chatCompletions serves POST /v1/chat/completions.
func (a *API) chatCompletions(w http.ResponseWriter, r *http.Request) error {
	f, err := jsonhttp.Read(r)
	if err != nil {
		return err
	}
	g, err := a.chatRequest(f)
	if err != nil {
		return err
	}
	return a.generate(w, r, g, chatFormat{})
}

// chatFormat shapes chat completions.
type chatFormat struct{}

// chatLogprobsOf renders tokens as chat logprobs.
func chatLogprobsOf(tokens []session.TokenLogprob) *ChatLogprobs {
	lp := &ChatLogprobs{Content: make([]ChatTokenLogprob, len(tokens))}
	for i, e := range tokens {
		top := make([]ChatTopLogprob, len(e.Top))
		for j, alt := range e.Top {
			top[j] = ChatTopLogprob{Token: alt.Piece, Logprob: JSONLogprob(alt.Logprob), Bytes: byteList(alt.Piece)}
		}
		lp.Content[i] = ChatTokenLogprob{Token: e.Piece, Logprob: JSONLogprob(e.Logprob), Bytes: byteList(e.Piece), TopLogprobs: top}
	}
	return lp
}

// FinishReason is OpenAI's name of a finish reason.
func FinishReason(r session.FinishReason) string {
	if r == session.FinishStopSequence {
		return "stop"
	}
	return string(r)
}

func (chatFormat) response(h responseHead, gen *session.Generation, logprobs bool) any {
	u := gen.Usage()
	resp := ChatCompletion{ID: h.id, Object: "chat.completion", Created: h.created, Model: h.model, SystemFingerprint: h.fingerprint, Usage: usageOf(u)}
	t := gen.Throughput(time.Now()).TimingsJSON()
	resp.Timings = &t
	resp.Verbose = verboseOf(h, gen)
	results := gen.Results()
	resp.Choices = make([]ChatChoice, len(results))
	for _, res := range results {
		content := res.Content
		cc := ChatChoice{Index: res.Index, Message: ChatMessage{Role: "assistant", Content: &content}, FinishReason: FinishReason(res.Finish)}
		if res.Reasoning != "" {
			reasoning := res.Reasoning
			cc.Message.ReasoningContent = &reasoning
		}
		if len(res.Calls) > 0 {
			if content == "" {
				cc.Message.Content = nil
			}
			for _, call := range res.Calls {
				cc.Message.ToolCalls = append(cc.Message.ToolCalls, ToolCall{ID: call.ID, Type: "function",
					Function: ToolCallFunction{Name: call.Name, Arguments: call.Arguments}})
			}
		}
		if logprobs {
			cc.Logprobs = chatLogprobsOf(res.Tokens)
		}
		resp.Choices[res.Index] = cc
	}
	return resp
}

func (chatFormat) stream(st *jsonhttp.Stream, h responseHead, gen *session.Generation, opt streamOptions, _ *tokenizer.Tokenizer) streamWriter {
	return &chatStream{chunks: newChunks[ChatChunkChoice](st, h, "chat.completion.chunk", gen, opt), gen: gen}
}

// chatStream writes a chat completion's events as chunks: one chunk per
// step of a choice, with its content, reasoning, tool-call pieces and
// logprobs together, and the finish in a chunk of its own.
type chatStream struct {
	chunks *chunks[chatChoiceChunk]
	gen    *session.Generation
}

type chatChoiceChunk = ChatChunkChoice

// begin gives every choice the assistant role first, with null content
// (as llama-server; OpenAI sends ""): a content delta is never empty.
func (cs *chatStream) begin() error {
	for i := range cs.gen.Choices() {
		if err := cs.chunks.send(ChatChunkChoice{Index: i, Delta: ChatDelta{Role: "assistant", NullContent: true}}); err != nil {
			return err
		}
	}
	return cs.chunks.st.Begin()
}

func (cs *chatStream) Send(evs []session.Event) error {
	if evs[0].Kind == session.EventProgress {
		return cs.chunks.sendProgress(ChatChunkChoice{Index: evs[0].Choice}, evs[0].Progress)
	}
	ch := ChatChunkChoice{Index: evs[0].Choice}
	var content, reasoning strings.Builder
	var hasContent, hasReasoning, any bool
	var finish *session.Event
	for i := range evs {
		e := &evs[i]
		switch e.Kind {
		case session.EventText:
			content.WriteString(e.Text)
			hasContent = true
		case session.EventReasoning:
			reasoning.WriteString(e.Text)
			hasReasoning = true
		case session.EventCallStart:
			ch.Delta.ToolCalls = append(ch.Delta.ToolCalls, ToolCallDelta{Index: e.Call, ID: e.ID, Type: "function",
				Function: ToolFunctionDelta{Name: e.Name}})
		case session.EventCallArguments:
			if n := len(ch.Delta.ToolCalls); n > 0 && ch.Delta.ToolCalls[n-1].Index == e.Call {
				ch.Delta.ToolCalls[n-1].Function.Arguments += e.Text
			} else {
				ch.Delta.ToolCalls = append(ch.Delta.ToolCalls, ToolCallDelta{Index: e.Call, Function: ToolFunctionDelta{Arguments: e.Text}})
			}
		case session.EventFinish:
			finish = e
			continue
		}
		if len(e.Tokens) > 0 {
			if ch.Logprobs == nil {
				ch.Logprobs = &ChatLogprobs{Content: []ChatTokenLogprob{}}
			}
			ch.Logprobs.Content = append(ch.Logprobs.Content, chatLogprobsOf(e.Tokens).Content...)
		}
		any = true
	}
	if hasContent {
		s := content.String()
		ch.Delta.Content = &s
	}
	if hasReasoning {
		s := reasoning.String()
		ch.Delta.ReasoningContent = &s
	}
	if any && (hasContent || hasReasoning || len(ch.Delta.ToolCalls) > 0 || ch.Logprobs != nil) {
		if err := cs.chunks.sendContent(ch); err != nil {
			return err
		}
	}
	if finish != nil {
		reason := FinishReason(finish.Finish)
		return cs.chunks.sendFinish(ChatChunkChoice{Index: finish.Choice, FinishReason: &reason})
	}
	return nil
}

func (cs *chatStream) end(u *Usage) error { return cs.chunks.end(u) }
