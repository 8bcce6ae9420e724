package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/models/tokenizer"
	"github.com/ruvllm/ruvllm/toolcall"
)

// prompt is one tokenized prompt of a request.
type prompt struct {
	ids []tokenizer.ID
	// text is what echo repeats: the prompt as the client wrote it.
	text string
}

// tokenEntry is a generated token with its log-probabilities, and where its
// text sits in the choice's decoded text (byte offsets; end is -1 until the
// token's bytes have been decoded).
type tokenEntry struct {
	id         tokenizer.ID
	logprob    float32
	top        []backends.TokenLogprob
	start, end int
}

// choice is one generated sequence: one engine request, and the text its
// tokens have made so far. Stop strings are matched here, not in the
// engine: text that could be the start of a stop string is held back until
// the next tokens show whether it is.
type choice struct {
	index  int // in the response
	prompt int // index of its prompt
	cancel context.CancelFunc
	stream *backends.Stream

	dec      *tokenizer.Decoder
	stops    []string
	held     string // decoded but not emitted
	decoded  int    // bytes the decoder has produced
	text     strings.Builder
	logprobs bool
	pending  []tokenEntry // entries whose text is not fully emitted
	entries  []tokenEntry // entries released so far
	tokens   int          // generated tokens received
	finish   string       // "" while running
	// tools finds the tool calls in a streamed choice; nil without tools.
	tools *toolStream
}

// toolStream is a streamed choice's tool calls: the parser and the ids
// given to the calls it has found.
type toolStream struct {
	format toolcall.Format
	parser *toolcall.Parser
	ids    []string
}

// addToken decodes t and returns the text that can be emitted now, the
// entries whose text is now out, and whether a stop string ended the choice.
func (c *choice) addToken(t *backends.Token) (string, []tokenEntry, bool) {
	c.tokens++
	piece := c.dec.Add(t.ID)
	if c.logprobs {
		end := c.decoded + len(piece)
		if piece == "" {
			// A token that ends inside a UTF-8 character (or decodes to
			// nothing) has no text of its own yet: it ends where the next
			// text does.
			end = -1
		} else {
			for i := len(c.pending) - 1; i >= 0 && c.pending[i].end < 0; i-- {
				c.pending[i].end = end
			}
		}
		c.pending = append(c.pending, tokenEntry{id: t.ID, logprob: t.Logprob, top: t.Top, start: c.decoded, end: end})
	}
	c.decoded += len(piece)
	c.held += piece
	return c.scan(false)
}

// flush ends the choice's text: it decodes what the decoder held back and
// emits everything up to a stop string, if one completes now.
func (c *choice) flush() (string, []tokenEntry, bool) {
	piece := c.dec.Flush()
	c.decoded += len(piece)
	c.held += piece
	return c.scan(true)
}

func (c *choice) scan(final bool) (string, []tokenEntry, bool) {
	if i := firstStop(c.held, c.stops); i >= 0 {
		emit := c.held[:i]
		c.held = ""
		c.text.WriteString(emit)
		stopAt := c.text.Len()
		n := 0
		for n < len(c.pending) && c.pending[n].start < stopAt {
			n++
		}
		return emit, c.release(n), true
	}
	keep := 0
	if !final {
		keep = holdBack(c.held, c.stops)
	}
	emit := c.held[:len(c.held)-keep]
	c.held = c.held[len(c.held)-keep:]
	c.text.WriteString(emit)
	n := len(c.pending)
	if !final {
		out := c.text.Len()
		n = 0
		for n < len(c.pending) && c.pending[n].end >= 0 && c.pending[n].end <= out {
			n++
		}
	}
	return emit, c.release(n), false
}

// release moves the first n pending entries to the released ones; on a
// stop the rest are dropped with the stop string, by the caller finishing.
func (c *choice) release(n int) []tokenEntry {
	if n == 0 {
		return nil
	}
	out := c.pending[:n:n]
	c.entries = append(c.entries, out...)
	c.pending = c.pending[n:]
	return out
}

// firstStop is the index of the earliest stop string in s, or -1.
func firstStop(s string, stops []string) int {
	best := -1
	for _, stop := range stops {
		if i := strings.Index(s, stop); i >= 0 && (best < 0 || i < best) {
			best = i
		}
	}
	return best
}

// holdBack is the length of the longest suffix of s that is a proper
// prefix of a stop string: text that must wait for the next token.
func holdBack(s string, stops []string) int {
	best := 0
	for _, stop := range stops {
		for k := min(len(s), len(stop)-1); k > best; k-- {
			if s[len(s)-k] == stop[0] && s[len(s)-k:] == stop[:k] {
				best = k
				break
			}
		}
	}
	return best
}

// sink receives a generation's output as it happens: a streaming response
// writes chunks, a plain one waits for the end.
type sink interface {
	// text carries newly emitted text of c and the entries released with it.
	text(c *choice, text string, entries []tokenEntry) error
	// finish ends choice c.
	finish(c *choice, reason string) error
}

type choiceEvent struct {
	c      *choice
	ev     backends.Event
	closed bool // c's channel was closed
}

// generation is one HTTP request's engine requests, one per choice, their
// events merged into one channel.
type generation struct {
	route   string
	choices []*choice
	events  chan choiceEvent
	done    chan struct{}
	wg      sync.WaitGroup
	closed  sync.Once
	start   time.Time
	ttft    time.Duration
	prompts []prompt
	n       int
}

// errClientGone ends a generation whose client has disconnected; there is
// no one to tell.
var errClientGone = &apiError{Status: 499, Type: typeInvalidRequest, Message: "client closed the request"}

// startGeneration checks the prompts against the context and submits one
// engine request per choice (rather than one with N choices), so that a
// stop string found in one choice cancels that choice alone. Every failure
// here comes before any byte of the response, so it can still be a plain
// HTTP error.
func (s *Server) startGeneration(ctx context.Context, m *Model, route string, prompts []prompt, g *genRequest) (*generation, *apiError) {
	maxLen := m.Engine.MaxLen()
	if len(prompts)*g.n > s.opt.MaxN {
		return nil, invalid("n", codeInvalidValue, "%d prompts times n=%d make %d choices; at most %d are allowed", len(prompts), g.n, len(prompts)*g.n, s.opt.MaxN)
	}
	for _, p := range prompts {
		if len(p.ids) == 0 {
			return nil, invalid(promptParam(route), codeInvalidValue, "the prompt is empty")
		}
		if g.scoreOnly {
			if len(p.ids) > maxLen {
				return nil, invalid(promptParam(route), codeContextLength, "this model's maximum context length is %d tokens, and the prompt has %d tokens", maxLen, len(p.ids))
			}
			continue
		}
		if err := contextCheck(len(p.ids), g.maxTokens, maxLen, promptParam(route)); err != nil {
			return nil, err
		}
	}
	gen := &generation{
		route:   route,
		events:  make(chan choiceEvent, 16),
		done:    make(chan struct{}),
		start:   info(ctx).start,
		prompts: prompts,
		n:       g.n,
	}
	top := -1
	if g.logprobs {
		top = g.topLogprobs
	}
	constraint := g.output.constraint(m)
	for pi, p := range prompts {
		maxTokens := g.maxTokens
		if maxTokens == 0 && !g.scoreOnly {
			maxTokens = maxLen - len(p.ids)
		}
		for j := range g.n {
			sp := g.sampling
			if sp.Seed != nil && j > 0 {
				// Choices of one request must differ; each is still
				// reproducible from the request's seed.
				seed := *sp.Seed + int64(j)
				sp.Seed = &seed
			}
			cctx, cancel := context.WithCancel(ctx)
			st, err := m.Engine.Submit(cctx, backends.Request{Prompt: p.ids, MaxTokens: maxTokens, Sampling: sp, N: 1, TopLogprobs: top,
				Adapter: g.adapter(), AdapterScale: g.loraScale, PromptLogprobs: g.promptLogprobs, Constraint: constraint})
			if err != nil {
				cancel()
				gen.close()
				return nil, engineError(err, len(p.ids), maxTokens, maxLen)
			}
			c := &choice{
				index:    pi*g.n + j,
				prompt:   pi,
				cancel:   cancel,
				stream:   st,
				dec:      m.Tokenizer.NewDecoderWith(decodeOptions(g.output != nil, g.render)),
				stops:    g.stop,
				logprobs: g.logprobs,
			}
			if g.tools.active() {
				c.tools = &toolStream{format: g.tools.style.format, parser: g.tools.style.format.NewParser()}
			}
			gen.choices = append(gen.choices, c)
			gen.forward(c)
		}
	}
	return gen, nil
}

func shuttingDown() *apiError {
	return &apiError{Status: http.StatusServiceUnavailable, Type: typeUnavailable, Code: "shutting_down", RetryAfter: 1,
		Message: "the server is shutting down"}
}

// promptParam is the request field that holds the prompt of a route.
func promptParam(route string) string {
	if strings.Contains(route, "chat") {
		return "messages"
	}
	return "prompt"
}

// contextCheck refuses a prompt (the field promptParam) that leaves no
// room, or not the room asked for, in the context.
func contextCheck(promptLen, maxTokens, maxLen int, promptParam string) *apiError {
	if promptLen >= maxLen {
		return invalid(promptParam, codeContextLength,
			"this model's maximum context length is %d tokens, and the prompt has %d tokens, leaving no room for a completion", maxLen, promptLen)
	}
	if maxTokens > 0 && promptLen+maxTokens > maxLen {
		return invalid("max_tokens", codeContextLength,
			"this model's maximum context length is %d tokens; you requested %d tokens (%d in the prompt, %d for the completion)",
			maxLen, promptLen+maxTokens, promptLen, maxTokens)
	}
	return nil
}

// engineError maps a Submit failure to its HTTP error.
func engineError(err error, promptLen, maxTokens, maxLen int) *apiError {
	switch {
	case errors.Is(err, backends.ErrQueueFull):
		return &apiError{Status: http.StatusTooManyRequests, Type: typeRateLimit, Code: codeQueueFull, RetryAfter: 1,
			Message: "the server is busy: every slot is taken and the queue is full; retry shortly"}
	case errors.Is(err, backends.ErrContextLength):
		if e := contextCheck(promptLen, maxTokens, maxLen, ""); e != nil {
			return e
		}
		return invalid("max_tokens", codeContextLength, "%v", err)
	case errors.Is(err, backends.ErrInvalidRequest):
		var pe *backends.ParamError
		if errors.As(err, &pe) {
			return invalid(pe.Param, codeInvalidValue, "%v", pe)
		}
		return invalid("", codeInvalidValue, "%v", err)
	case errors.Is(err, backends.ErrClosed):
		return shuttingDown()
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return errClientGone
	}
	return &apiError{Status: http.StatusInternalServerError, Type: typeServer, Code: codeGenerationFail, Message: err.Error()}
}

// forward copies c's events into the merged channel until c's channel is
// closed; once the generation is done it only drains, so that the engine
// never waits on a reader that has left.
func (gen *generation) forward(c *choice) {
	gen.wg.Add(1)
	go func() {
		defer gen.wg.Done()
		for ev := range c.stream.Events {
			select {
			case gen.events <- choiceEvent{c: c, ev: ev}:
			case <-gen.done:
			}
		}
		select {
		case gen.events <- choiceEvent{c: c, closed: true}:
		case <-gen.done:
		}
	}()
}

// close cancels every engine request still running and waits until their
// channels are closed, so that nothing of the request outlives it.
func (gen *generation) close() {
	gen.closed.Do(func() {
		for _, c := range gen.choices {
			c.cancel()
		}
		close(gen.done)
		gen.wg.Wait()
	})
}

// run feeds the engine's events to out until every choice has finished.
func (gen *generation) run(ctx context.Context, out sink) *apiError {
	left := len(gen.choices)
	for left > 0 {
		var ce choiceEvent
		select {
		case <-ctx.Done():
			return errClientGone
		case ce = <-gen.events:
		}
		c := ce.c
		if c.finish != "" {
			continue
		}
		if ce.closed {
			return &apiError{Status: http.StatusInternalServerError, Type: typeServer, Code: codeGenerationFail,
				Message: fmt.Sprintf("generation of choice %d ended without a finish reason", c.index)}
		}
		ev := ce.ev
		if ev.Token != nil {
			if gen.ttft == 0 {
				gen.ttft = time.Since(gen.start)
			}
			text, entries, stopped := c.addToken(ev.Token)
			if err := gen.emit(out, c, text, entries, stopped, ""); err != nil {
				return err
			}
			if stopped {
				left--
				continue
			}
		}
		if ev.Err != nil {
			if ctx.Err() != nil {
				return errClientGone
			}
			if errors.Is(ev.Err, backends.ErrClosed) {
				return shuttingDown()
			}
			if errors.Is(ev.Err, backends.ErrContextLength) {
				return invalid("max_tokens", codeContextLength, "%v", ev.Err)
			}
			return &apiError{Status: http.StatusInternalServerError, Type: typeServer, Code: codeGenerationFail,
				Message: "generation failed: " + ev.Err.Error()}
		}
		if ev.Finish != "" {
			text, entries, stopped := c.flush()
			if err := gen.emit(out, c, text, entries, stopped, ev.Finish); err != nil {
				return err
			}
			left--
		}
	}
	return nil
}

// emit hands new text to out and, when the choice ends (a stop string, or
// the engine's finish), finishes it.
func (gen *generation) emit(out sink, c *choice, text string, entries []tokenEntry, stopped bool, finish string) *apiError {
	if text != "" || len(entries) > 0 {
		if err := out.text(c, text, entries); err != nil {
			return errClientGone
		}
	}
	if stopped {
		// The stop string was found by us: the engine may still be
		// generating, so cancel it now, and drop the tokens held back.
		c.cancel()
		c.pending = nil
		finish = "stop"
	}
	if finish == "" {
		return nil
	}
	c.finish = finish
	if err := out.finish(c, finish); err != nil {
		return errClientGone
	}
	return nil
}

// usage counts the request's tokens: each prompt once, however many choices
// it has (as OpenAI counts), and every generated token.
func (gen *generation) usage() usage {
	var u usage
	cached := 0
	for _, p := range gen.prompts {
		u.PromptTokens += len(p.ids)
	}
	for _, c := range gen.choices {
		u.CompletionTokens += c.tokens
		if c.index%gen.n == 0 {
			// The engine sets CachedTokens before the first event, which
			// run has received for a finished choice.
			cached += c.stream.CachedTokens
		}
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	u.PromptTokensDetails = &promptTokensDetails{CachedTokens: cached}
	return u
}
