package session

import (
	"context"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// maxStoredCompletions bounds the completions kept for feedback.
const maxStoredCompletions = 10000

// Completion is a finished generation as feedback on it needs it.
type Completion struct {
	At      time.Time
	Model   string
	Adapter string
	Prompts []CompletionPrompt
	Choices []CompletionChoice
}

// CompletionPrompt is a prompt of a stored completion: its text as the
// model saw it, and its tokens.
type CompletionPrompt struct {
	Text   string
	Tokens []tokenizer.ID
}

// CompletionChoice is a choice of a stored completion: its prompt's index
// and the text generated.
type CompletionChoice struct {
	Prompt int
	Text   string
}

// completionStore keeps recent completions by id for feedback, for a
// window of time and up to maxStoredCompletions, oldest dropped first.
type completionStore struct {
	mu     sync.Mutex
	window time.Duration
	byID   map[string]*Completion
	order  []string
}

func (cs *completionStore) add(id string, c *Completion) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.byID == nil {
		cs.byID = map[string]*Completion{}
	}
	cs.byID[id] = c
	cs.order = append(cs.order, id)
	for len(cs.order) > 0 {
		old := cs.byID[cs.order[0]]
		if len(cs.order) <= maxStoredCompletions && (old == nil || time.Since(old.At) <= cs.window) {
			break
		}
		delete(cs.byID, cs.order[0])
		cs.order = cs.order[1:]
	}
}

// remember keeps a finished generation for feedback.
func (ms *Models) remember(g *Generation) {
	c := &Completion{At: time.Now(), Model: g.model.ID, Adapter: g.adapter}
	for _, p := range g.prompts {
		c.Prompts = append(c.Prompts, CompletionPrompt{Text: p.text, Tokens: p.ids})
	}
	c.Choices = make([]CompletionChoice, len(g.choices))
	for _, ch := range g.choices {
		c.Choices[ch.index] = CompletionChoice{Prompt: ch.prompt, Text: ch.text.String()}
	}
	ms.recent.add(g.id, c)
}

// Completion is the finished generation of the id, while it is kept for
// feedback.
func (ms *Models) Completion(id string) (*Completion, bool) {
	cs := &ms.recent
	cs.mu.Lock()
	defer cs.mu.Unlock()
	c, ok := cs.byID[id]
	if !ok || time.Since(c.At) > cs.window {
		return nil, false
	}
	return c, true
}

// FeedbackWindow is how long completions are kept for feedback.
func (ms *Models) FeedbackWindow() time.Duration { return ms.recent.window }

// Embed returns the embeddings of inputs on m's base model, holding its
// engine (loading it when on demand) for the time it takes; param names
// the input field for errors.
func (ms *Models) Embed(ctx context.Context, m *Model, inputs [][]tokenizer.ID, keepAlive *time.Duration, param string) ([][]float32, error) {
	release, err := ms.Hold(ctx, m)
	if err != nil {
		return nil, err
	}
	defer release(keepAlive)
	maxLen := m.Engine.MaxLen()
	for i, ids := range inputs {
		if len(ids) > maxLen {
			return nil, Invalid(param, CodeContextLength, "input %d has %d tokens; this model's maximum context length is %d tokens", i, len(ids), maxLen)
		}
	}
	out := make([][]float32, len(inputs))
	for i, ids := range inputs {
		vec, err := m.Engine.Embed(ctx, ids)
		if err != nil {
			return nil, engineError(err, param)
		}
		out[i] = vec
	}
	return out, nil
}

// encodeChunk is the size of the pieces a long prompt is tokenized in
// while it may not fit.
const encodeChunk = 64 << 10

// EncodePromptWithin is EncodePrompt for a prompt that must hold at most
// limit tokens: a prompt far too long is found out after tokenizing a few
// pieces of it, not all of it, so that a client cannot make the server
// spend seconds and gigabytes on a prompt it will refuse. ok is false when
// the prompt holds more than limit tokens; ids are then nil.
func EncodePromptWithin(t *tokenizer.Tokenizer, text string, limit int) (ids []tokenizer.ID, ok bool) {
	if len(text) > 4*encodeChunk {
		// Pieces cut at line ends tokenize as the whole does except at the
		// cuts, where a word split in two may take a token or two more:
		// the count is a bound once those are taken off.
		count, cuts := 0, 0
		for rest := text; rest != ""; cuts++ {
			n := min(len(rest), encodeChunk)
			if n < len(rest) {
				if i := strings.LastIndexByte(rest[:n], '\n'); i > 0 {
					n = i + 1
				} else {
					for n > 1 && !utf8.RuneStart(rest[n]) {
						n--
					}
				}
			}
			count += len(t.Encode(rest[:n], tokenizer.EncodeOptions{ParseSpecial: true}))
			rest = rest[n:]
			if count-2*cuts > limit {
				return nil, false
			}
		}
	}
	ids = EncodePrompt(t, text)
	return ids, len(ids) <= limit
}

// EncodePrompt tokenizes a prompt as llama-server does: special tokens
// added and special-token text parsed. A template that writes the BOS text
// itself would otherwise give two BOS tokens; one is dropped.
func EncodePrompt(t *tokenizer.Tokenizer, text string) []tokenizer.ID {
	ids := t.Encode(text, tokenizer.EncodeOptions{AddSpecial: true, ParseSpecial: true})
	v := t.Vocab()
	if len(ids) >= 2 && v.AddBOS && ids[0] == v.BOS && ids[1] == v.BOS {
		ids = ids[1:]
	}
	return ids
}
