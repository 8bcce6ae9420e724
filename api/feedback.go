package api

import (
	"errors"
	"net/http"
	"strings"

	"github.com/google/uuid"

	"github.com/ruvllm/ruvllm/api/jsonhttp"
	"github.com/ruvllm/ruvllm/api/openai"
	"github.com/ruvllm/ruvllm/lora"
	"github.com/ruvllm/ruvllm/models/chat"
	"github.com/ruvllm/ruvllm/session"
)

// POST /v1/feedback takes what users say about completions: a preference
// pair for a prompt, a rating of a completion this server made, or a
// correction of one. The API checks and tokenizes it and hands it to every
// feedback sink: the model's (Model.Feedback; MicroLoRA training is the
// first) and the server's (Options.Feedback; a router that learns from
// ratings, later).

// Error codes of the feedback route.
const (
	codeFeedbackOff = "feedback_disabled"
	// codeAdapterLimit: feedback named a new adapter when the server has
	// as many as feedback may create.
	codeAdapterLimit = "adapter_limit_reached"
)

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
	f, err := jsonhttp.Read(r)
	if err != nil {
		return err
	}
	fb, m, aerr := s.parseFeedback(f)
	if aerr != nil {
		return aerr
	}
	sinks := append(append([]session.FeedbackSink(nil), m.Feedback...), s.opt.Feedback...)
	if s.opt.Router != nil && fb.CompletionID != "" {
		sinks = append(sinks, session.RouterFeedback{Router: s.opt.Router})
	}
	if len(sinks) == 0 {
		return &session.Error{Status: http.StatusNotFound, Type: session.TypeInvalidRequest, Code: codeFeedbackOff,
			Message: "feedback is not taken for the model " + session.Quote(m.ID) + " (start the server with --adapter-dir to train MicroLoRA adapters from it)"}
	}
	for _, sink := range sinks {
		if err := sink.Feedback(r.Context(), fb); err != nil {
			return feedbackError(err)
		}
	}
	jsonhttp.WriteJSON(w, http.StatusAccepted, feedbackResponse{ID: fb.ID, Object: "feedback", Kind: fb.Kind, Model: fb.Model, Adapter: fb.Adapter})
	return nil
}

// feedbackError maps a sink's error to its HTTP error.
func feedbackError(err error) error {
	e := func(status int, typ, code string) error {
		return &session.Error{Status: status, Type: typ, Param: "adapter", Code: code, Message: err.Error()}
	}
	switch {
	case errors.Is(err, lora.ErrBadName):
		return e(http.StatusBadRequest, session.TypeInvalidRequest, codeAdapterName)
	case errors.Is(err, session.ErrFeedbackInvalid), errors.Is(err, lora.ErrInvalid):
		return &session.Error{Status: http.StatusBadRequest, Type: session.TypeInvalidRequest, Code: session.CodeInvalidValue, Message: err.Error()}
	case errors.Is(err, session.ErrFeedbackConflict), errors.Is(err, lora.ErrExists):
		return e(http.StatusConflict, session.TypeInvalidRequest, codeAdapterExists)
	case errors.Is(err, session.ErrFeedbackLimit):
		return e(http.StatusConflict, session.TypeInvalidRequest, codeAdapterLimit)
	case errors.Is(err, session.ErrFeedbackBusy):
		return &session.Error{Status: http.StatusTooManyRequests, Type: session.TypeRateLimit, Code: session.CodeQueueFull, RetryAfter: 1, Message: err.Error()}
	}
	return session.Internal("feedback: %v", err)
}

// parseFeedback reads {"adapter", "model", "prompt" or "messages",
// "chosen", "rejected"}, or {"completion_id", "rating" | "correction",
// "index"}, each optionally with "adapter".
func (s *Server) parseFeedback(f *jsonhttp.Fields) (*session.Feedback, *session.Model, error) {
	fb := &session.Feedback{ID: "fb-" + uuid.NewString()}
	adapter, hasAdapter, err := f.Str("adapter")
	if err != nil {
		return nil, nil, err
	}
	if hasAdapter && adapter == "" {
		return nil, nil, session.Invalid("adapter", codeAdapterName, "adapter must not be empty")
	}
	modelName, _, err := f.Str("model")
	if err != nil {
		return nil, nil, err
	}
	completionID, hasCompletion, err := f.Str("completion_id")
	if err != nil {
		return nil, nil, err
	}
	var m *session.Model
	if hasCompletion {
		m, err = s.feedbackOnCompletion(f, fb, completionID)
	} else {
		m, err = s.feedbackPair(f, fb, modelName)
	}
	if err != nil {
		return nil, nil, err
	}
	if err := f.Unknown("user"); err != nil {
		return nil, nil, err
	}
	if hasAdapter {
		// "MODEL:ADAPTER" names the model too.
		if i := strings.LastIndexByte(adapter, ':'); i >= 0 {
			if adapter[:i] != m.ID {
				return nil, nil, session.Invalid("adapter", session.CodeInvalidValue, "adapter %s names another model than %s", session.Quote(adapter), session.Quote(m.ID))
			}
			adapter = adapter[i+1:]
		}
		if err := lora.CheckName(adapter); err != nil {
			return nil, nil, session.Invalid("adapter", codeAdapterName, "%v", err)
		}
		fb.Adapter = adapter
	}
	if fb.Kind != session.FeedbackRating && fb.Adapter == "" {
		return nil, nil, session.Invalid("adapter", session.CodeMissing, "adapter is required: name the MicroLoRA adapter this feedback trains")
	}
	fb.Model = m.ID
	return fb, m, nil
}

// feedbackOnCompletion reads a rating or a correction of a stored
// completion.
func (s *Server) feedbackOnCompletion(f *jsonhttp.Fields, fb *session.Feedback, id string) (*session.Model, error) {
	if id == "" {
		return nil, session.Invalid("completion_id", session.CodeInvalidValue, "completion_id must not be empty")
	}
	c, ok := s.models.Completion(id)
	if !ok {
		return nil, &session.Error{Status: http.StatusNotFound, Type: session.TypeInvalidRequest, Param: "completion_id", Code: session.CodeCompletionMissing,
			Message: "no completion " + session.Quote(id) + " is known: completions are kept for feedback for " + s.models.FeedbackWindow().String() + " after they end"}
	}
	m, ok := s.models.Get(c.Model)
	if !ok {
		return nil, &session.Error{Status: http.StatusNotFound, Type: session.TypeInvalidRequest, Param: "completion_id", Code: session.CodeCompletionMissing,
			Message: "the model of completion " + session.Quote(id) + " is no longer served"}
	}
	index, _, err := f.Integer("index")
	if err != nil {
		return nil, err
	}
	if index < 0 || index >= int64(len(c.Choices)) {
		return nil, session.Invalid("index", session.CodeInvalidValue, "index must be between 0 and %d, the completion's choices", len(c.Choices)-1)
	}
	ch := c.Choices[index]
	p := c.Prompts[ch.Prompt]
	fb.CompletionID, fb.PromptText, fb.Prompt, fb.Adapter = id, p.Text, p.Tokens, c.Adapter
	rating, hasRating, err := f.Integer("rating")
	if err != nil {
		return nil, err
	}
	correction, hasCorrection, err := f.Str("correction")
	if err != nil {
		return nil, err
	}
	switch {
	case hasRating && hasCorrection:
		return nil, session.Invalid("correction", session.CodeInvalidValue, "give rating or correction, not both")
	case hasRating:
		if rating != 1 && rating != -1 {
			return nil, session.Invalid("rating", session.CodeInvalidValue, "rating must be 1 or -1, got %d", rating)
		}
		fb.Kind, fb.Rating = session.FeedbackRating, int(rating)
		if ch.Text == "" {
			return nil, session.Invalid("completion_id", session.CodeInvalidValue, "the completion %s has no text to rate", session.Quote(id))
		}
		if rating > 0 {
			fb.ChosenText = ch.Text
		} else {
			fb.RejectedText = ch.Text
		}
	case hasCorrection:
		if strings.TrimSpace(correction) == "" {
			return nil, session.Invalid("correction", session.CodeInvalidValue, "correction must not be empty")
		}
		if correction == ch.Text {
			return nil, session.Invalid("correction", session.CodeInvalidValue, "the correction is the completion itself")
		}
		fb.Kind, fb.ChosenText, fb.RejectedText = session.FeedbackCorrection, correction, ch.Text
		if ch.Text == "" {
			fb.RejectedText = ""
		}
	default:
		return nil, session.Invalid("rating", session.CodeMissing, "feedback on a completion needs rating (1 or -1) or correction")
	}
	fb.Tokenize(m.Tokenizer)
	return m, nil
}

// feedbackPair reads a preference pair for a prompt or chat.
func (s *Server) feedbackPair(f *jsonhttp.Fields, fb *session.Feedback, modelName string) (*session.Model, error) {
	for _, name := range []string{"rating", "correction", "index"} {
		if f.Has(name) {
			f.Raw(name)
			return nil, session.Invalid(name, session.CodeInvalidValue, "%s applies to a completion: give completion_id", name)
		}
	}
	t, err := s.models.Resolve(modelName, "model")
	if err != nil {
		return nil, err
	}
	m := t.Model
	if t.Adapter != "" {
		fb.Adapter = t.Adapter
	}
	fb.Kind = session.FeedbackPair
	promptText, hasPrompt, err := f.Str("prompt")
	if err != nil {
		return nil, err
	}
	switch {
	case hasPrompt && f.Has("messages"):
		f.Raw("messages")
		return nil, session.Invalid("messages", session.CodeInvalidValue, "give prompt or messages, not both")
	case hasPrompt:
		if promptText == "" {
			return nil, session.Invalid("prompt", session.CodeInvalidValue, "prompt must not be empty")
		}
		fb.PromptText = promptText
	case f.Has("messages"):
		if m.Chat == nil {
			return nil, session.Unsupported("messages", "the model %s has no chat template; give prompt", session.Quote(m.ID))
		}
		messages, err := openai.ParseMessages(f, "messages")
		if err != nil {
			return nil, err
		}
		text, rerr := m.Chat.RenderChat(chat.Input{Messages: messages, AddGenerationPrompt: true})
		if rerr != nil {
			if errors.Is(rerr, chat.ErrTemplate) {
				return nil, session.Invalid("messages", session.CodeTemplate, "the chat template refused the messages: %v", rerr)
			}
			return nil, session.Internal("rendering the chat template: %v", rerr)
		}
		fb.PromptText = text
	default:
		return nil, session.Invalid("prompt", session.CodeMissing, "a preference pair needs prompt or messages (or give completion_id)")
	}
	for _, c := range []struct {
		name string
		dst  *string
	}{{"chosen", &fb.ChosenText}, {"rejected", &fb.RejectedText}} {
		v, ok, err := f.Str(c.name)
		if err != nil {
			return nil, err
		}
		if !ok || v == "" {
			return nil, session.Invalid(c.name, session.CodeMissing, "%s must be a non-empty string", c.name)
		}
		*c.dst = v
	}
	if fb.ChosenText == fb.RejectedText {
		return nil, session.Invalid("rejected", session.CodeInvalidValue, "chosen and rejected are the same text")
	}
	maxLen := m.Engine.MaxLen()
	ids, _, ok := session.EncodePromptWithin(m.Tokenizer, fb.PromptText, maxLen)
	param := "prompt"
	if f.Has("messages") {
		param = "messages"
	}
	if !ok {
		return nil, session.Invalid(param, session.CodeContextLength, "this model's maximum context length is %d tokens, and the prompt has more", maxLen)
	}
	fb.Prompt = ids
	// The completions must fit beside the prompt; one far too long is
	// found out before it is tokenized whole.
	for _, c := range []struct{ name, text string }{{"chosen", fb.ChosenText}, {"rejected", fb.RejectedText}} {
		if _, _, ok := session.EncodePromptWithin(m.Tokenizer, c.text, maxLen-len(ids)+2); !ok {
			return nil, session.Invalid(c.name, session.CodeContextLength, "this model's maximum context length is %d tokens; the prompt has %d and %s is longer than the rest", maxLen, len(ids), c.name)
		}
	}
	fb.Tokenize(m.Tokenizer)
	return m, nil
}
