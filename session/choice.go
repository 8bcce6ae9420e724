package session

import (
	"context"
	"strings"
	"time"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/models/tokenizer"
	"github.com/ruvllm/ruvllm/reasoning"
	"github.com/ruvllm/ruvllm/toolcall"
)

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
// the next tokens show whether it is. The raw text then goes through the
// reasoning parser (thinking models) and the tool-call parser (requests
// with tools), which split it into events.
type choice struct {
	index  int // in the response
	prompt int // index of its prompt
	cancel context.CancelFunc
	stream *backends.Stream
	tok    *tokenizer.Tokenizer

	dec         *tokenizer.Decoder
	stops       []string
	includeStop bool
	minTokens   int
	held        string // decoded but not emitted
	decoded     int    // bytes the decoder has produced
	text        strings.Builder
	logprobs    bool
	pending     []tokenEntry // entries whose text is not fully emitted
	tokens      int          // generated tokens received
	// drafted and accepted are the speculative decoding counts of the
	// last token received.
	drafted, accepted int
	finish            FinishReason // "" while running
	stopSeq           string
	// firstToken and ended are when the choice's first token came and
	// when it finished.
	firstToken, ended time.Time

	// think splits reasoning from the answer; nil when the model does not
	// think or the request keeps the text raw.
	think *reasoning.Parser
	// tools finds the tool calls in the answer; nil without tools.
	tools      *toolcall.Parser
	toolFormat toolcall.Format
	callPrefix string
	// parserCalls counts the calls the tool-call parser has started.
	parserCalls int

	// The choice's result, built from the events it sends.
	content, reasoning strings.Builder
	calls              []Call
	entries            []TokenLogprob
	trimContent        bool
}

// addToken decodes t and returns the raw text that can be emitted now, the
// entries whose text is now out, and whether a stop string ended the
// choice.
func (c *choice) addToken(t *backends.Token) (string, []tokenEntry, bool) {
	c.tokens++
	c.drafted, c.accepted = t.Drafted, t.Accepted
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
	stops := c.stops
	if c.tokens < c.minTokens {
		stops = nil
	}
	if i, stop := firstStop(c.held, stops); i >= 0 {
		end := i
		if c.includeStop {
			end += len(stop)
		}
		emit := c.held[:end]
		c.held = ""
		c.stopSeq = stop
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
		keep = holdBack(c.held, stops)
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

// release takes the first n pending entries out; on a stop the rest are
// dropped with the stop string, by the caller finishing.
func (c *choice) release(n int) []tokenEntry {
	if n == 0 {
		return nil
	}
	out := c.pending[:n:n]
	c.pending = c.pending[n:]
	return out
}

// firstStop is the index of the earliest stop string in s and the string,
// or -1.
func firstStop(s string, stops []string) (int, string) {
	best, which := -1, ""
	for _, stop := range stops {
		if i := strings.Index(s, stop); i >= 0 && (best < 0 || i < best) {
			best, which = i, stop
		}
	}
	return best, which
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

// events turns raw text of the choice and the entries released with it
// into events: reasoning, answer text and tool calls, in order, the
// entries on the last of them (or on an EventLogprobs of their own). final
// flushes the parsers.
func (c *choice) events(text string, entries []tokenEntry, final bool) []Event {
	var evs []Event
	answer := func(s string) {
		if c.tools == nil {
			if s != "" {
				evs = append(evs, Event{Kind: EventText, Text: s})
			}
			return
		}
		c.toolEvents(&evs, c.tools.Add(s))
	}
	if c.think != nil {
		tes := c.think.Add(text)
		if final {
			tes = append(tes, c.think.Finish()...)
		}
		for _, te := range tes {
			switch te.Kind {
			case reasoning.Reasoning:
				if te.Text != "" {
					evs = append(evs, Event{Kind: EventReasoning, Text: te.Text})
				}
			case reasoning.Content:
				answer(te.Text)
			case reasoning.CallStart:
				c.startCall(&evs, te.Name)
			case reasoning.CallArguments:
				evs = append(evs, Event{Kind: EventCallArguments, Call: len(c.calls) - 1, Text: te.Text})
			}
		}
	} else {
		answer(text)
	}
	if final && c.tools != nil {
		c.toolEvents(&evs, c.tools.Finish())
	}
	if len(entries) > 0 {
		lps := c.logprobsOf(entries)
		if len(evs) == 0 {
			evs = append(evs, Event{Kind: EventLogprobs})
		}
		evs[len(evs)-1].Tokens = lps
	}
	for i := range evs {
		evs[i].Choice = c.index
		c.record(&evs[i])
	}
	return evs
}

// toolEvents turns the tool-call parser's events into the choice's.
func (c *choice) toolEvents(evs *[]Event, tes []toolcall.Event) {
	for _, e := range tes {
		switch {
		case e.Call < 0:
			if e.Content != "" {
				*evs = append(*evs, Event{Kind: EventText, Text: e.Content})
			}
		case e.Call == c.parserCalls:
			c.parserCalls++
			c.startCall(evs, e.Name)
			if e.Arguments != "" {
				*evs = append(*evs, Event{Kind: EventCallArguments, Call: len(c.calls) - 1, Text: e.Arguments})
			}
		default:
			if e.Arguments != "" {
				*evs = append(*evs, Event{Kind: EventCallArguments, Call: len(c.calls) - 1, Text: e.Arguments})
			}
		}
	}
}

// startCall starts a call with a fresh id.
func (c *choice) startCall(evs *[]Event, name string) {
	id := newCallID(c.toolFormat, c.callPrefix)
	c.calls = append(c.calls, Call{ID: id, Name: name})
	*evs = append(*evs, Event{Kind: EventCallStart, Call: len(c.calls) - 1, ID: id, Name: name})
}

// record adds an event to the choice's result.
func (c *choice) record(ev *Event) {
	switch ev.Kind {
	case EventText:
		c.content.WriteString(ev.Text)
	case EventReasoning:
		c.reasoning.WriteString(ev.Text)
	case EventCallArguments:
		c.calls[ev.Call].Arguments += ev.Text
	}
	c.entries = append(c.entries, ev.Tokens...)
}

// logprobsOf renders released entries with their pieces.
func (c *choice) logprobsOf(entries []tokenEntry) []TokenLogprob {
	out := make([]TokenLogprob, len(entries))
	for i, e := range entries {
		lp := TokenLogprob{ID: e.id, Piece: c.tok.Piece(e.id), Logprob: e.logprob, Offset: e.start}
		if len(e.top) > 0 {
			lp.Top = make([]TopLogprob, len(e.top))
			for j, a := range e.top {
				lp.Top[j] = TopLogprob{ID: a.ID, Piece: c.tok.Piece(a.ID), Logprob: a.Logprob}
			}
		}
		out[i] = lp
	}
	return out
}

// result is the choice's output as a whole.
func (c *choice) result() Result {
	r := Result{Index: c.index, Prompt: c.prompt, Text: c.text.String(), Content: c.content.String(), Reasoning: c.reasoning.String(),
		Calls: c.calls, Tokens: c.entries, Generated: c.tokens, Finish: c.finish, StopSequence: c.stopSeq,
		FirstToken: c.firstToken, Ended: c.ended}
	if c.trimContent {
		r.Content = strings.TrimSpace(r.Content)
	}
	if c.stream != nil {
		r.PromptLogprobs = c.stream.PromptLogprobs
		r.CachedTokens = c.stream.CachedTokens
		r.Slot = c.stream.Slot
	}
	return r
}
