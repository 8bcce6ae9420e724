package responses

import (
	"strings"
	"unicode"

	"github.com/google/uuid"

	"github.com/ruvllm/ruvllm/api/jsonhttp"
	"github.com/ruvllm/ruvllm/session"
)

// newID is a fresh id: the prefix and 32 hex digits.
func newID(prefix string) string { return prefix + strings.ReplaceAll(uuid.NewString(), "-", "") }

// Kinds of output items.
const (
	kindReasoning = iota
	kindMessage
	kindCall
)

// outItem is an output item being generated.
type outItem struct {
	kind  int
	id    string
	index int
	// text is the reasoning, the message's text or the call's arguments.
	text         strings.Builder
	callID, name string
	status       string
}

// item is the item as the API shows it.
func (it *outItem) item() any {
	switch it.kind {
	case kindReasoning:
		content := []reasoningText{}
		if it.status != statusInProgress {
			content = append(content, reasoningText{Type: "reasoning_text", Text: it.text.String()})
		}
		return reasoningItem{ID: it.id, Type: typeReasoning, Summary: []summaryText{}, Content: content, Status: it.status}
	case kindMessage:
		content := []outputText{}
		if it.status != statusInProgress {
			content = append(content, it.part())
		}
		return messageItem{ID: it.id, Type: typeMessage, Status: it.status, Content: content, Role: "assistant"}
	}
	return functionCallItem{ID: it.id, Type: typeFunctionCall, Status: it.status, Arguments: it.text.String(), CallID: it.callID, Name: it.name}
}

// part is a message item's content part.
func (it *outItem) part() outputText {
	return outputText{Type: "output_text", Annotations: []any{}, Logprobs: []any{}, Text: it.text.String()}
}

// builder turns a generation's events into output items: a reasoning item
// for each run of reasoning, a message item for each run of text, a
// function_call item for each call. It is the generation's sink, and
// writes the stream's events as it goes when the response streams; the
// response sent whole is built the same way, so that both give the same
// output.
type builder struct {
	st   *jsonhttp.Stream // nil: the response is sent whole
	resp *response
	seq  int
	err  error // the stream's write error: the client is gone

	items []*outItem
	cur   *outItem
	calls map[int]*outItem
	// trim leaves out the whitespace around a message's text when tools
	// are on (what the model writes around its calls), as chat
	// completions do: held is the whitespace at the end of the text so
	// far, written out only when more text follows.
	trim bool
	held string
	// reasoningSteps counts the generation steps that gave reasoning,
	// which are its reasoning tokens.
	reasoningSteps int
	finish         session.FinishReason
}

func (b *builder) head(typ string) head {
	h := head{Type: typ, SequenceNumber: b.seq}
	b.seq++
	return h
}

// send writes an event when the response streams.
func (b *builder) send(ev event) {
	if b.st == nil || b.err != nil {
		return
	}
	b.err = b.st.Event(ev.name(), ev)
}

// sendResponse writes an event that carries the response.
func (b *builder) sendResponse(typ string) {
	b.send(responseEvent{head: b.head(typ), Response: b.resp})
}

// Send takes the events of one step of the (one) choice.
func (b *builder) Send(evs []session.Event) error {
	reasoned := false
	for i := range evs {
		e := &evs[i]
		switch e.Kind {
		case session.EventReasoning:
			reasoned = true
			b.reasoning(e.Text)
		case session.EventText:
			b.text(e.Text)
		case session.EventCallStart:
			b.close(statusCompleted)
			it := b.open(kindCall, e.ID, e.Name)
			if b.calls == nil {
				b.calls = map[int]*outItem{}
			}
			b.calls[e.Call] = it
		case session.EventCallArguments:
			if it := b.calls[e.Call]; it != nil && e.Text != "" {
				it.text.WriteString(e.Text)
				b.send(argumentsDeltaEvent{head: b.head("response.function_call_arguments.delta"), ItemID: it.id, OutputIndex: it.index, Delta: e.Text})
			}
		case session.EventFinish:
			b.finish = e.Finish
		}
	}
	if reasoned {
		b.reasoningSteps++
	}
	return b.err
}

func (b *builder) reasoning(s string) {
	if s == "" {
		return
	}
	if b.cur == nil || b.cur.kind != kindReasoning {
		b.close(statusCompleted)
		b.open(kindReasoning, "", "")
	}
	it := b.cur
	it.text.WriteString(s)
	b.send(reasoningDeltaEvent{head: b.head("response.reasoning_text.delta"), ItemID: it.id, OutputIndex: it.index, Delta: s})
}

func (b *builder) text(s string) {
	open := b.cur != nil && b.cur.kind == kindMessage
	if b.trim {
		if !open {
			s = strings.TrimLeftFunc(s, unicode.IsSpace)
		}
		s = b.held + s
		t := strings.TrimRightFunc(s, unicode.IsSpace)
		b.held, s = s[len(t):], t
	}
	if s == "" {
		return
	}
	if !open {
		b.close(statusCompleted)
		b.open(kindMessage, "", "")
	}
	it := b.cur
	it.text.WriteString(s)
	b.send(textDeltaEvent{head: b.head("response.output_text.delta"), ItemID: it.id, OutputIndex: it.index, Delta: s, Logprobs: []any{}})
}

// open starts an item of the kind (a call has its id and name).
func (b *builder) open(kind int, callID, name string) *outItem {
	prefix := map[int]string{kindReasoning: "rs_", kindMessage: "msg_", kindCall: "fc_"}[kind]
	it := &outItem{kind: kind, id: newID(prefix), index: len(b.items), callID: callID, name: name, status: statusInProgress}
	b.items = append(b.items, it)
	b.cur = it
	b.send(itemEvent{head: b.head("response.output_item.added"), OutputIndex: it.index, Item: it.item()})
	switch kind {
	case kindReasoning:
		b.send(partEvent{head: b.head("response.content_part.added"), ItemID: it.id, OutputIndex: it.index,
			Part: reasoningText{Type: "reasoning_text"}})
	case kindMessage:
		b.send(partEvent{head: b.head("response.content_part.added"), ItemID: it.id, OutputIndex: it.index, Part: it.part()})
	}
	return it
}

// close ends the open item with the status.
func (b *builder) close(status string) {
	it := b.cur
	if it == nil {
		return
	}
	b.cur, b.held = nil, ""
	it.status = status
	text := it.text.String()
	switch it.kind {
	case kindReasoning:
		b.send(reasoningDoneEvent{head: b.head("response.reasoning_text.done"), ItemID: it.id, OutputIndex: it.index, Text: text})
		b.send(partEvent{head: b.head("response.content_part.done"), ItemID: it.id, OutputIndex: it.index,
			Part: reasoningText{Type: "reasoning_text", Text: text}})
	case kindMessage:
		b.send(textDoneEvent{head: b.head("response.output_text.done"), ItemID: it.id, OutputIndex: it.index, Text: text, Logprobs: []any{}})
		b.send(partEvent{head: b.head("response.content_part.done"), ItemID: it.id, OutputIndex: it.index, Part: it.part()})
	case kindCall:
		b.send(argumentsDoneEvent{head: b.head("response.function_call_arguments.done"), ItemID: it.id, OutputIndex: it.index, Arguments: text})
	}
	b.send(itemEvent{head: b.head("response.output_item.done"), OutputIndex: it.index, Item: it.item()})
}

// end closes the output once the generation has finished: the last item
// is incomplete when the token limit cut it, and a response that wrote
// nothing has an empty message, so that the conversation has the
// assistant's turn.
func (b *builder) end() {
	status := statusCompleted
	if b.finish == session.FinishLength {
		status = statusIncomplete
	}
	if len(b.items) == 0 {
		b.open(kindMessage, "", "")
	}
	b.close(status)
	b.resp.Status = status
	if status == statusIncomplete {
		b.resp.IncompleteDetails = &incompleteDetails{Reason: "max_output_tokens"}
	}
	b.resp.Output = b.output()
}

// fail ends the output of a generation that failed.
func (b *builder) fail(e *session.Error) {
	b.close(statusIncomplete)
	code := e.Code
	if code == "" {
		code = "server_error"
	}
	b.resp.Status = statusFailed
	b.resp.Error = &responseError{Code: code, Message: e.Message}
	b.resp.Output = b.output()
}

// output is the items as the response lists them.
func (b *builder) output() []any {
	out := make([]any, len(b.items))
	for i, it := range b.items {
		out[i] = it.item()
	}
	return out
}

// usageOf is the response's usage: the reasoning tokens are the steps
// that gave reasoning.
func (b *builder) usageOf(u session.Usage) *usage {
	return &usage{InputTokens: u.PromptTokens, InputTokensDetails: inputTokensDetails{CachedTokens: u.CachedTokens},
		OutputTokens: u.CompletionTokens, OutputTokensDetails: outputTokensDetails{ReasoningTokens: min(b.reasoningSteps, u.CompletionTokens)},
		TotalTokens: u.TotalTokens()}
}
