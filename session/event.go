package session

import (
	"time"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// EventKind says what an Event carries.
type EventKind uint8

// Event kinds.
const (
	// EventText is a piece of the answer.
	EventText EventKind = iota
	// EventReasoning is a piece of a thinking model's reasoning.
	EventReasoning
	// EventCallStart starts tool call Call: its ID and Name.
	EventCallStart
	// EventCallArguments is a fragment of call Call's arguments (JSON
	// text); the fragments concatenate to the whole.
	EventCallArguments
	// EventLogprobs carries the tokens released without text of their
	// own yet to send (the text was held back by a parser).
	EventLogprobs
	// EventFinish ends the choice: Finish says why.
	EventFinish
	// EventProgress tells how far the choice's prompt is processed
	// (Request.Progress): Progress.
	EventProgress
)

// Progress is how far a prompt is processed: of its Total tokens, Cache
// were reused and Processed are in the cache now (those included).
type Progress struct {
	Total, Cache, Processed int
	// Elapsed is the time since the prompt was submitted.
	Elapsed time.Duration
}

// FinishReason is why a choice ended.
type FinishReason string

// Finish reasons. OpenAI folds StopSequence into "stop"; Anthropic tells
// them apart.
const (
	// FinishStop: the model ended its turn (an end-of-generation token), or
	// the constrained output was complete.
	FinishStop FinishReason = "stop"
	// FinishStopSequence: one of the request's stop strings appeared.
	FinishStopSequence FinishReason = "stop_sequence"
	// FinishLength: the choice reached its token limit (or the context's).
	FinishLength FinishReason = "length"
	// FinishToolCalls: the model ended its turn after calling tools.
	FinishToolCalls FinishReason = "tool_calls"
)

// Event is one step of one choice's output.
type Event struct {
	Choice int
	Kind   EventKind
	// Text is the text of EventText and EventReasoning, and the arguments
	// fragment of EventCallArguments.
	Text string
	// Call is the index of the call (within the choice) of the call
	// events; ID and Name are set on EventCallStart.
	Call     int
	ID, Name string
	// Tokens are the generated tokens released with this event, with
	// their log-probabilities, when the request asked for logprobs.
	Tokens []TokenLogprob
	// Finish and, for FinishStopSequence, StopSequence, on EventFinish.
	Finish       FinishReason
	StopSequence string
	// Progress is set on EventProgress.
	Progress Progress
}

// TokenLogprob is a generated token with its log-probability and, when
// asked, the most likely alternatives.
type TokenLogprob struct {
	ID tokenizer.ID
	// Piece is the token's text, special tokens written out; it may be
	// part of a UTF-8 character.
	Piece   string
	Logprob float32
	Top     []TopLogprob
	// Offset is where the token's text starts in the choice's raw text
	// (bytes).
	Offset int
}

// TopLogprob is one of the most likely tokens at a step.
type TopLogprob struct {
	ID      tokenizer.ID
	Piece   string
	Logprob float32
}

// Sink receives a generation's events as they happen, from the goroutine
// that runs it: each call gets the events of one step of one choice (what
// one token released), in order, which a protocol may send as one chunk.
// An error (the client is gone) ends the generation.
type Sink interface {
	Send(evs []Event) error
}

// Discard is the sink of a response sent whole: the generation keeps each
// choice's result, which is read at the end.
type Discard struct{}

// Send drops the events.
func (Discard) Send([]Event) error { return nil }

// Usage counts a generation's tokens: each prompt once, however many
// choices it has (as OpenAI counts), and every generated token.
type Usage struct {
	PromptTokens, CompletionTokens int
	// CachedTokens are the prompt tokens whose prefill prefix reuse
	// skipped.
	CachedTokens int
	// DraftedTokens are the tokens speculative decoding drafted for the
	// completion tokens, AcceptedTokens those of them generated (part of
	// CompletionTokens): their ratio is the acceptance rate.
	DraftedTokens, AcceptedTokens int
}

// TotalTokens is prompt and completion tokens.
func (u Usage) TotalTokens() int { return u.PromptTokens + u.CompletionTokens }

// Result is one choice's output as a whole.
type Result struct {
	// Index is the choice's index in the response; Prompt the index of its
	// prompt.
	Index, Prompt int
	// Text is the raw text after stop strings: what the model wrote,
	// before reasoning and tool calls were taken out of it.
	Text string
	// Content is the answer; Reasoning the reasoning; Calls the tool calls.
	Content   string
	Reasoning string
	Calls     []Call
	// Tokens are the generated tokens with their logprobs, when asked.
	Tokens []TokenLogprob
	// Generated counts the tokens generated.
	Generated    int
	Finish       FinishReason
	StopSequence string
	// PromptLogprobs are the prompt's tokens' logprobs, when asked (entry
	// i is prompt token i+1's).
	PromptLogprobs []backends.Token
	// CachedTokens are the tokens of the choice's prompt whose prefill
	// prefix reuse skipped; Slot is the engine slot it ran in.
	CachedTokens int
	Slot         int
	// FirstToken is when the choice's first token came (zero when none
	// did), Ended when it finished.
	FirstToken, Ended time.Time
}

// Call is a tool call.
type Call struct {
	ID, Name string
	// Arguments is the JSON text the model wrote.
	Arguments string
}
