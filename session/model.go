package session

import (
	"context"
	"errors"
	"time"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/lora"
	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/models/chat"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// Engine is what a session needs of backends.Engine: a queue that runs
// generation requests and embeddings on one loaded model.
type Engine interface {
	// Submit queues r; events arrive on the returned stream until its
	// channel closes. Cancelling ctx stops the request and frees its slot.
	Submit(ctx context.Context, r backends.Request) (*backends.Stream, error)
	// Embed returns the mean-pooled, L2-normalised final hidden states of
	// tokens.
	Embed(ctx context.Context, tokens []tokenizer.ID) ([]float32, error)
	// Stats reports the queue, the running requests and the KV memory.
	Stats() backends.EngineStats
	// MaxLen is the most tokens (prompt plus generated) one request holds.
	MaxLen() int
}

// ChatRenderer turns chat messages into a prompt with the model's chat
// template; *models.Model is one. It fills in the BOS and EOS texts when
// the input leaves them empty.
type ChatRenderer interface {
	RenderChat(in chat.Input) (string, error)
}

// templateSource is implemented by chat renderers that can show their
// template (*models.Model does): the template tells how the model writes
// tool calls and whether it thinks.
type templateSource interface{ ChatTemplateSource() string }

// LoadedEngine is an engine loaded on demand; Close unloads it (the
// engine, its backend, and the memory they hold).
type LoadedEngine interface {
	Engine
	Close() error
}

// Loader loads a model's engine. It runs without the requester's context:
// other requests may be waiting for the same load.
type Loader func() (LoadedEngine, error)

// Model is a loaded model as sessions serve it; a server serves several,
// each with its own engine, tokenizer, chat template and adapters.
type Model struct {
	// ID is the model's name in the API: what clients pass as "model".
	ID string
	// Created is when the model was loaded; zero means when AddModel ran.
	Created   time.Time
	Tokenizer *tokenizer.Tokenizer
	// Chat renders chat prompts; a model without one serves everything but
	// chats.
	Chat ChatRenderer
	// Engine runs the model. A model loaded on demand leaves it nil and
	// sets Load instead; AddModel then puts a stand-in here.
	Engine Engine
	// Load, when not nil, makes the model one loaded on demand: its engine
	// is loaded when a request needs it and unloaded when idle for its
	// keep-alive or to make room (Options.MaxLoaded).
	Load Loader
	// MaxLen is the context a model on demand will have, which listings
	// report before its first load.
	MaxLen int
	// Path is the model's file, for the routes that show it (llama-server's
	// /props) and to tell its saved slots apart; "" when unknown.
	Path string
	// TrainedContext is the context the model was trained with; a choice
	// without a token limit stops there (0: unknown, the context only).
	TrainedContext int
	// Adapters are the LoRA adapters of the model, which requests name as
	// "ID:ADAPTER" or "ADAPTER"; nil turns adapters off. The registry's
	// BaseModel should be ID.
	Adapters *lora.Registry
	// Adapter, when set, is the adapter every request that names none of
	// the model's adapters runs with (llama-server's --lora); a request
	// that names the model itself with lora_scale 0 runs without it.
	Adapter *lora.Adapter
	// MaxAdapterBytes is the registry's MaxUploadBytes, so that an upload
	// declaring a larger body is refused before any of it is read; 0 means
	// lora.DefaultMaxUploadBytes.
	MaxAdapterBytes int64
	// Feedback are the model's feedback sinks (POST /v1/feedback), such as
	// the trainer of its MicroLoRA adapters.
	Feedback []FeedbackSink
	// Info is what the model's file says of it (architecture, size,
	// quantization, metadata), which listings show; nil when there is no
	// file to describe.
	Info *models.Info

	// vocabs caches the vocabularies of constrained outputs; AddModel
	// makes it.
	vocabs *vocabCache
	// tools is how the model's template treats tools, and thinking how it
	// reasons; AddModel reads both from the template.
	tools    toolStyle
	thinking thinkStyle
	// resident is the state of a model on demand; nil for one loaded for
	// good.
	resident *resident
}

// templateSource is the model's chat template source, "" when it has none
// or does not show it.
func (m *Model) templateSource() string {
	if ts, ok := m.Chat.(templateSource); ok {
		return ts.ChatTemplateSource()
	}
	return ""
}

// TemplateSource is the model's chat template (Jinja) as the server
// renders it, "" when it has none or does not show it.
func (m *Model) TemplateSource() string { return m.templateSource() }

// Thinks reports whether the model's template teaches it to reason before
// answering (think tags, Granite's response tags, gpt-oss's channels):
// sessions then separate its reasoning from its answer, and
// ReasoningOptions turn it on or off.
func (m *Model) Thinks() bool { return m.thinking.thinks() }

// KnowsTools reports whether the model's chat template shows tools to the
// model; sessions describe them in a system message to a model whose
// template does not.
func (m *Model) KnowsTools() bool { return m.tools.knows }

// Feedback kinds.
const (
	FeedbackPair       = "pair"       // a prompt, a chosen and a rejected completion
	FeedbackRating     = "rating"     // a completion rated +1 or −1
	FeedbackCorrection = "correction" // a completion and the text it should have been
)

// Feedback is one accepted piece of feedback, tokenized for its model.
type Feedback struct {
	// ID names the feedback in the response ("fb-…").
	ID   string
	Kind string
	// Model is the served model's id; Adapter the adapter to train ("" for
	// none: sinks that train adapters ignore the feedback).
	Model, Adapter string
	// CompletionID is the completion rated or corrected; "" for a pair.
	CompletionID string
	// Prompt is the prompt as the model saw it (a chat rendered by its
	// template), in text and tokens.
	PromptText string
	Prompt     []tokenizer.ID
	// Chosen and Rejected are the completions, text and tokens as they
	// continue the prompt: a pair's; for a correction the correction and
	// the completion; for a rating of +1 the completion is Chosen, of −1
	// Rejected.
	ChosenText, RejectedText string
	Chosen, Rejected         []tokenizer.ID
	// Rating is +1 or −1 for a rating, 0 otherwise.
	Rating int
}

// Tokenize encodes the completions as they continue the prompt.
func (fb *Feedback) Tokenize(t *tokenizer.Tokenizer) {
	o := tokenizer.EncodeOptions{AddSpecial: true, ParseSpecial: true}
	if fb.ChosenText != "" {
		fb.Chosen = t.EncodeContinuation(fb.Prompt, fb.PromptText, fb.ChosenText, o)
	}
	if fb.RejectedText != "" {
		fb.Rejected = t.EncodeContinuation(fb.Prompt, fb.PromptText, fb.RejectedText, o)
	}
}

// FeedbackSink receives feedback the server has accepted. It should return
// quickly (queue the work); an error wrapping ErrFeedbackInvalid is the
// client's (400), ErrFeedbackConflict and ErrFeedbackLimit a 409,
// ErrFeedbackBusy a 429, any other the server's (500).
type FeedbackSink interface {
	Feedback(ctx context.Context, fb *Feedback) error
}

// AdapterTrainer is a FeedbackSink that trains adapters: the adapter
// routes show the state of those it trains.
type AdapterTrainer interface {
	FeedbackSink
	// Training is the live state of the adapter of the model; ok is false
	// when the sink does not train it.
	Training(model, adapter string) (lora.Training, bool)
}

// Errors feedback sinks wrap.
var (
	ErrFeedbackInvalid  = errors.New("invalid feedback")
	ErrFeedbackConflict = errors.New("feedback conflicts with the adapter")
	ErrFeedbackBusy     = errors.New("too much feedback waiting")
	// ErrFeedbackLimit refuses feedback that would create an adapter
	// beyond the number the server lets feedback create.
	ErrFeedbackLimit = errors.New("feedback may create no more adapters")
)
