package api

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/ruvllm/ruvllm/lora"
	"github.com/ruvllm/ruvllm/models/chat"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// POST /v1/feedback takes what users say about completions: a preference
// pair for a prompt, a rating of a completion this server made, or a
// correction of one. The API checks and tokenizes it and hands it to every
// feedback sink: the model's (Model.Feedback; MicroLoRA training is the
// first) and the server's (Options.Feedback; a router that learns from
// ratings, later).

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

// FeedbackSink receives feedback the API has accepted. It should return
// quickly (queue the work); an error wrapping ErrFeedbackInvalid is the
// client's (400), ErrFeedbackConflict a 409, ErrFeedbackBusy a 429, any
// other the server's (500).
type FeedbackSink interface {
	Feedback(ctx context.Context, fb *Feedback) error
}

// AdapterTrainer is a FeedbackSink that trains adapters: GET
// /v1/adapters/NAME shows the state of those it trains.
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
)

// Error codes of the feedback route.
const (
	codeCompletionMissing = "completion_not_found"
	codeFeedbackOff       = "feedback_disabled"
)

// DefaultFeedbackWindow is how long completions are kept for feedback.
const DefaultFeedbackWindow = time.Hour

// maxStoredCompletions bounds the completions kept for feedback.
const maxStoredCompletions = 10000

// storedCompletion is what feedback on a completion needs of it.
type storedCompletion struct {
	at      time.Time
	model   string
	adapter string
	prompts []prompt
	choices []storedChoice
}

type storedChoice struct {
	prompt int
	text   string
}

// completionStore keeps recent completions by id for feedback, for a
// window of time and up to maxStoredCompletions, oldest dropped first.
type completionStore struct {
	mu     sync.Mutex
	window time.Duration
	byID   map[string]*storedCompletion
	order  []string
}

func (cs *completionStore) add(id string, c *storedCompletion) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.byID == nil {
		cs.byID = map[string]*storedCompletion{}
	}
	cs.byID[id] = c
	cs.order = append(cs.order, id)
	for len(cs.order) > 0 {
		old := cs.byID[cs.order[0]]
		if len(cs.order) <= maxStoredCompletions && (old == nil || time.Since(old.at) <= cs.window) {
			break
		}
		delete(cs.byID, cs.order[0])
		cs.order = cs.order[1:]
	}
}

func (cs *completionStore) get(id string) (*storedCompletion, bool) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	c, ok := cs.byID[id]
	if !ok || time.Since(c.at) > cs.window {
		return nil, false
	}
	return c, true
}

// remember keeps a finished generation for feedback.
func (s *Server) remember(id string, m *Model, g *genRequest, gen *generation) {
	c := &storedCompletion{at: time.Now(), model: m.ID, adapter: g.adapterName, prompts: gen.prompts}
	c.choices = make([]storedChoice, len(gen.choices))
	for _, ch := range gen.choices {
		c.choices[ch.index] = storedChoice{prompt: ch.prompt, text: ch.text.String()}
	}
	s.recent.add(id, c)
}

// feedbackResponse answers an accepted feedback.
type feedbackResponse struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Kind    string `json:"kind"`
	Model   string `json:"model"`
	Adapter string `json:"adapter,omitempty"`
}

// feedback serves POST /v1/feedback.
func (s *Server) feedback(w http.ResponseWriter, r *http.Request) error {
	f, err := readObject(r)
	if err != nil {
		return err
	}
	fb, m, aerr := s.parseFeedback(f)
	if aerr != nil {
		return aerr
	}
	sinks := append(append([]FeedbackSink(nil), m.Feedback...), s.opt.Feedback...)
	if s.opt.Router != nil && fb.CompletionID != "" {
		sinks = append(sinks, routerFeedback{s.opt.Router})
	}
	if len(sinks) == 0 {
		return &apiError{Status: http.StatusNotFound, Type: typeInvalidRequest, Code: codeFeedbackOff,
			Message: "feedback is not taken for the model " + quote(m.ID) + " (start the server with --adapter-dir to train MicroLoRA adapters from it)"}
	}
	for _, sink := range sinks {
		if err := sink.Feedback(r.Context(), fb); err != nil {
			return feedbackError(err)
		}
	}
	writeJSON(w, http.StatusAccepted, feedbackResponse{ID: fb.ID, Object: "feedback", Kind: fb.Kind, Model: fb.Model, Adapter: fb.Adapter})
	return nil
}

// feedbackError maps a sink's error to its HTTP error.
func feedbackError(err error) *apiError {
	e := func(status int, typ, code string) *apiError {
		return &apiError{Status: status, Type: typ, Param: "adapter", Code: code, Message: err.Error()}
	}
	switch {
	case errors.Is(err, lora.ErrBadName):
		return e(http.StatusBadRequest, typeInvalidRequest, codeAdapterName)
	case errors.Is(err, ErrFeedbackInvalid), errors.Is(err, lora.ErrInvalid):
		return &apiError{Status: http.StatusBadRequest, Type: typeInvalidRequest, Code: codeInvalidValue, Message: err.Error()}
	case errors.Is(err, ErrFeedbackConflict), errors.Is(err, lora.ErrExists):
		return e(http.StatusConflict, typeInvalidRequest, codeAdapterExists)
	case errors.Is(err, ErrFeedbackBusy):
		return &apiError{Status: http.StatusTooManyRequests, Type: typeRateLimit, Code: codeQueueFull, RetryAfter: 1, Message: err.Error()}
	}
	return internalError("feedback: %v", err)
}

// parseFeedback reads {"adapter", "model", "prompt" or "messages",
// "chosen", "rejected"}, or {"completion_id", "rating" | "correction",
// "index"}, each optionally with "adapter".
func (s *Server) parseFeedback(f *fields) (*Feedback, *Model, *apiError) {
	fb := &Feedback{ID: "fb-" + uuid.NewString()}
	adapter, hasAdapter, err := f.str("adapter")
	if err != nil {
		return nil, nil, err
	}
	if hasAdapter && adapter == "" {
		return nil, nil, invalid("adapter", codeAdapterName, "adapter must not be empty")
	}
	modelName, _, err := f.str("model")
	if err != nil {
		return nil, nil, err
	}
	completionID, hasCompletion, err := f.str("completion_id")
	if err != nil {
		return nil, nil, err
	}
	var m *Model
	if hasCompletion {
		m, err = s.feedbackOnCompletion(f, fb, completionID)
	} else {
		m, err = s.feedbackPair(f, fb, modelName)
	}
	if err != nil {
		return nil, nil, err
	}
	if err := f.unknown("user"); err != nil {
		return nil, nil, err
	}
	if hasAdapter {
		// "MODEL:ADAPTER" names the model too.
		if i := strings.LastIndexByte(adapter, ':'); i >= 0 {
			if adapter[:i] != m.ID {
				return nil, nil, invalid("adapter", codeInvalidValue, "adapter %s names another model than %s", quote(adapter), quote(m.ID))
			}
			adapter = adapter[i+1:]
		}
		if err := lora.CheckName(adapter); err != nil {
			return nil, nil, invalid("adapter", codeAdapterName, "%v", err)
		}
		fb.Adapter = adapter
	}
	if fb.Kind != FeedbackRating && fb.Adapter == "" {
		return nil, nil, invalid("adapter", codeMissing, "adapter is required: name the MicroLoRA adapter this feedback trains")
	}
	fb.Model = m.ID
	return fb, m, nil
}

// feedbackOnCompletion reads a rating or a correction of a stored
// completion.
func (s *Server) feedbackOnCompletion(f *fields, fb *Feedback, id string) (*Model, *apiError) {
	if id == "" {
		return nil, invalid("completion_id", codeInvalidValue, "completion_id must not be empty")
	}
	c, ok := s.recent.get(id)
	if !ok {
		return nil, &apiError{Status: http.StatusNotFound, Type: typeInvalidRequest, Param: "completion_id", Code: codeCompletionMissing,
			Message: "no completion " + quote(id) + " is known: completions are kept for feedback for " + s.recent.window.String() + " after they end"}
	}
	m, ok := s.models.Load().byID[c.model]
	if !ok {
		return nil, &apiError{Status: http.StatusNotFound, Type: typeInvalidRequest, Param: "completion_id", Code: codeCompletionMissing,
			Message: "the model of completion " + quote(id) + " is no longer served"}
	}
	index, _, err := f.integer("index")
	if err != nil {
		return nil, err
	}
	if index < 0 || index >= int64(len(c.choices)) {
		return nil, invalid("index", codeInvalidValue, "index must be between 0 and %d, the completion's choices", len(c.choices)-1)
	}
	ch := c.choices[index]
	p := c.prompts[ch.prompt]
	fb.CompletionID, fb.PromptText, fb.Prompt, fb.Adapter = id, p.text, p.ids, c.adapter
	rating, hasRating, err := f.integer("rating")
	if err != nil {
		return nil, err
	}
	correction, hasCorrection, err := f.str("correction")
	if err != nil {
		return nil, err
	}
	switch {
	case hasRating && hasCorrection:
		return nil, invalid("correction", codeInvalidValue, "give rating or correction, not both")
	case hasRating:
		if rating != 1 && rating != -1 {
			return nil, invalid("rating", codeInvalidValue, "rating must be 1 or -1, got %d", rating)
		}
		fb.Kind, fb.Rating = FeedbackRating, int(rating)
		if ch.text == "" {
			return nil, invalid("completion_id", codeInvalidValue, "the completion %s has no text to rate", quote(id))
		}
		if rating > 0 {
			fb.ChosenText = ch.text
		} else {
			fb.RejectedText = ch.text
		}
	case hasCorrection:
		if strings.TrimSpace(correction) == "" {
			return nil, invalid("correction", codeInvalidValue, "correction must not be empty")
		}
		if correction == ch.text {
			return nil, invalid("correction", codeInvalidValue, "the correction is the completion itself")
		}
		fb.Kind, fb.ChosenText, fb.RejectedText = FeedbackCorrection, correction, ch.text
		if ch.text == "" {
			fb.RejectedText = ""
		}
	default:
		return nil, invalid("rating", codeMissing, "feedback on a completion needs rating (1 or -1) or correction")
	}
	fb.tokenize(m.Tokenizer)
	return m, nil
}

// feedbackPair reads a preference pair for a prompt or chat.
func (s *Server) feedbackPair(f *fields, fb *Feedback, modelName string) (*Model, *apiError) {
	for _, name := range []string{"rating", "correction", "index"} {
		if f.has(name) {
			f.raw(name)
			return nil, invalid(name, codeInvalidValue, "%s applies to a completion: give completion_id", name)
		}
	}
	t, err := s.resolveModel(modelName)
	if err != nil {
		return nil, err
	}
	m := t.model
	if t.adapter != "" {
		fb.Adapter = t.adapter
	}
	fb.Kind = FeedbackPair
	promptText, hasPrompt, err := f.str("prompt")
	if err != nil {
		return nil, err
	}
	switch {
	case hasPrompt && f.has("messages"):
		f.raw("messages")
		return nil, invalid("messages", codeInvalidValue, "give prompt or messages, not both")
	case hasPrompt:
		if promptText == "" {
			return nil, invalid("prompt", codeInvalidValue, "prompt must not be empty")
		}
		fb.PromptText = promptText
	case f.has("messages"):
		if m.Chat == nil {
			return nil, unsupported("messages", "the model %s has no chat template; give prompt", quote(m.ID))
		}
		messages, err := parseMessages(f)
		if err != nil {
			return nil, err
		}
		text, rerr := m.Chat.RenderChat(messages, nil, true)
		if rerr != nil {
			if errors.Is(rerr, chat.ErrTemplate) {
				return nil, invalid("messages", codeTemplate, "the chat template refused the messages: %v", rerr)
			}
			return nil, internalError("rendering the chat template: %v", rerr)
		}
		fb.PromptText = text
	default:
		return nil, invalid("prompt", codeMissing, "a preference pair needs prompt or messages (or give completion_id)")
	}
	for _, c := range []struct {
		name string
		dst  *string
	}{{"chosen", &fb.ChosenText}, {"rejected", &fb.RejectedText}} {
		v, ok, err := f.str(c.name)
		if err != nil {
			return nil, err
		}
		if !ok || v == "" {
			return nil, invalid(c.name, codeMissing, "%s must be a non-empty string", c.name)
		}
		*c.dst = v
	}
	if fb.ChosenText == fb.RejectedText {
		return nil, invalid("rejected", codeInvalidValue, "chosen and rejected are the same text")
	}
	fb.Prompt = encodePrompt(m.Tokenizer, fb.PromptText)
	fb.tokenize(m.Tokenizer)
	return m, nil
}

// tokenize encodes the completions as they continue the prompt.
func (fb *Feedback) tokenize(t *tokenizer.Tokenizer) {
	o := tokenizer.EncodeOptions{AddSpecial: true, ParseSpecial: true}
	if fb.ChosenText != "" {
		fb.Chosen = t.EncodeContinuation(fb.Prompt, fb.PromptText, fb.ChosenText, o)
	}
	if fb.RejectedText != "" {
		fb.Rejected = t.EncodeContinuation(fb.Prompt, fb.PromptText, fb.RejectedText, o)
	}
}
