package reasoning

import "strings"

// Kind is what a piece of an output is.
type Kind uint8

// The kinds of events.
const (
	// Content is the answer.
	Content Kind = iota
	// Reasoning is the model's thinking.
	Reasoning
	// CallStart starts a tool call (harmony): its Name.
	CallStart
	// CallArguments is a fragment of the call's JSON arguments, in Text.
	CallArguments
	// CallEnd ends the call.
	CallEnd
)

func (k Kind) String() string {
	return [...]string{"content", "reasoning", "call-start", "call-arguments", "call-end"}[k]
}

// Event is a piece of a streamed output. The texts of the events of a kind
// concatenate to what the whole output holds of it, however it was chunked.
type Event struct {
	Kind Kind
	// Text is the content, the reasoning, or a fragment of the arguments.
	Text string
	// Name is the function a CallStart calls.
	Name string
	// Call is the index of the call in the output, for the Call kinds.
	Call int
}

// Call is a tool call found in a whole output.
type Call struct {
	Name string
	// Arguments is the JSON text the model wrote ("{}" when it wrote none).
	Arguments string
}

// Whitespace, as the parser trims it.
const spaces = " \t\r\n"

// state is where in the format's structure the parser is.
type state uint8

const (
	// Think, Granite and CommandR.
	atStart    state = iota // before the output's first non-whitespace: a block may open
	afterBlock              // after </think> or </response>: another block may open
	inThink                 // in the reasoning
	inResponse              // in Granite's <response> (Command R7B's response block)
	inContent               // the rest is content
	// Harmony.
	inHeader // after <|start|>, up to <|message|>
	inBody   // a message's text, up to its end
	between  // after a message's end, up to the next <|start|>
)

// trim is what a segment does with whitespace at its ends.
type trim uint8

const (
	verbatim trim = iota
	// trimLead drops the leading whitespace.
	trimLead
	// trimBoth also holds the trailing whitespace back until more text of
	// the segment follows, and drops it at the segment's end.
	trimBoth
)

// segment is the run of text being emitted, of one kind.
type segment struct {
	kind  Kind
	trim  trim
	begun bool   // some text was emitted
	ws    string // trailing whitespace held back
}

// maxLead is how much whitespace may come before a block's opening tag:
// after that much, no block opens there. It bounds what the parser holds
// back, as maxHeader does for harmony.
const maxLead = 64

// Parser separates reasoning from the answer in an output as it streams:
// Add it text as it is generated and it returns the events that are
// certain by then, holding back what might still turn out to be the start
// of a marker. Parse gives the same for a whole output.
type Parser struct {
	f    Format
	st   state
	rest string // text not yet turned into events
	seg  segment
	// had: content and reasoning were emitted; a later segment of the kind
	// starts with a newline, to keep it apart.
	had [2]bool

	forced bool // the prompt opened a think block: the output starts inside it

	// Harmony.
	scan      int  // rest was searched up to here for the end of a header
	calls     int  // calls started
	promptLen int  // rest starts with this much of the prompt's open message
	marked    bool // a marker of the output was consumed
}

// OpensThinking reports whether prompt, rendered by a template of the
// format, leaves a think block open (it ends, but for whitespace, with
// the block's opening tag), so that the output starts inside the
// reasoning.
func (f Format) OpensThinking(prompt string) bool {
	return f.blocks() && strings.HasSuffix(strings.TrimRight(prompt, spaces), f.tags().thinkOpen)
}

// ThinkingOff is what a server that turns thinking off appends to a
// prompt ending with the generation prompt, as llama-server does with
// --reasoning-budget 0, so that the model answers at once: the closing tag
// of a think block the prompt left open, or (Command R7B, whose template
// opens none) an empty thinking block. "" when the prompt needs nothing.
func (f Format) ThinkingOff(prompt string) string {
	switch {
	case f.OpensThinking(prompt):
		return f.tags().thinkClose
	case f == CommandR && strings.HasSuffix(prompt, crGenerationPrompt):
		return crThinkOpen + crThinkClose
	}
	return ""
}

// NewParser starts parsing an output of the format generated after prompt,
// the rendered prompt text. A think block the prompt opens and leaves open
// (it ends, but for whitespace, with <think>) puts the output inside the
// reasoning. A harmony output continues the prompt's last message if that
// is open (normally the generation prompt's <|start|>assistant), and
// starts as if after <|start|>assistant otherwise.
func (f Format) NewParser(prompt string) *Parser {
	p := &Parser{f: f}
	switch f {
	case Think, Granite, CommandR:
		p.forced = f.OpensThinking(prompt)
	case Harmony:
		tail := hStart + "assistant"
		if i := strings.LastIndex(prompt, hStart); i >= 0 && indexAny(prompt[i:], hEnd, hCall, hReturn) < 0 {
			tail = prompt[i:]
		}
		p.st = between
		p.rest = tail
		p.advance(false)
		p.promptLen, p.marked, p.had = len(p.rest), false, [2]bool{}
	}
	return p
}

// Parse splits a whole output of the format, generated after prompt, into
// its content, its reasoning and its tool calls.
func Parse(f Format, prompt, output string) (content, reasoning string, calls []Call) {
	p := f.NewParser(prompt)
	return assemble(append(p.Add(output), p.Finish()...))
}

// assemble puts a parser's events back together.
func assemble(evs []Event) (content, reasoning string, calls []Call) {
	var c, r strings.Builder
	for _, e := range evs {
		switch e.Kind {
		case Content:
			c.WriteString(e.Text)
		case Reasoning:
			r.WriteString(e.Text)
		case CallStart:
			calls = append(calls, Call{Name: e.Name})
		case CallArguments:
			if e.Call < len(calls) {
				calls[e.Call].Arguments += e.Text
			}
		}
	}
	return c.String(), r.String(), calls
}

// Add takes more of the output and returns the events it makes certain.
func (p *Parser) Add(text string) []Event {
	p.rest += text
	return p.advance(false)
}

// Finish ends the output and returns what was held back: an unclosed think
// block is reasoning (the model ran out of tokens while thinking), an
// unclosed tool call ends there. The parser takes no more text after it.
func (p *Parser) Finish() []Event {
	evs := p.advance(true)
	switch p.st {
	case inHeader:
		// An output with no harmony marker at all did not follow the
		// format: it is content. A header cut short is dropped. (Unmarked,
		// the parser has read headers only since the prompt, so rest
		// still starts with the prompt's part.)
		if !p.marked {
			if out := p.rest[p.promptLen:]; indexAny(out, harmonyMarkers...) < 0 {
				p.open(Content, verbatim)
				evs = p.emit(evs, out)
			}
		}
	case inBody:
		evs = p.endMessage(evs)
	}
	p.rest, p.seg.ws = "", ""
	return evs
}

// advance turns as much of rest into events as is certain; final: the
// output ends there.
func (p *Parser) advance(final bool) []Event {
	switch p.f {
	case Think, Granite, CommandR:
		return p.tags(final)
	case Harmony:
		return p.harmony(final)
	}
	evs := p.emit(nil, p.rest)
	p.rest = ""
	return evs
}

// open starts a segment of the kind.
func (p *Parser) open(k Kind, t trim) { p.seg = segment{kind: k, trim: t} }

// emit adds text to the current segment.
func (p *Parser) emit(evs []Event, text string) []Event {
	s := &p.seg
	if s.trim != verbatim && !s.begun {
		text = strings.TrimLeft(text, spaces)
	}
	if s.trim == trimBoth {
		body := strings.TrimRight(text, spaces)
		if body == "" {
			s.ws += text
			return evs
		}
		text, s.ws = s.ws+body, text[len(body):]
	}
	if text == "" {
		return evs
	}
	if !s.begun && s.kind <= Reasoning {
		if p.had[s.kind] {
			text = "\n" + text
		}
		p.had[s.kind] = true
	}
	s.begun = true
	ev := Event{Kind: s.kind, Text: text}
	if s.kind == CallArguments {
		ev.Call = p.calls
	}
	return append(evs, ev)
}

// upTo emits the text of rest before marker and reports whether the
// marker came (rest then goes on after it). Without it, an end of rest
// that could be the marker's start is held back, unless final.
func (p *Parser) upTo(evs []Event, marker string, final bool) ([]Event, bool) {
	if i := strings.Index(p.rest, marker); i >= 0 {
		evs = p.emit(evs, p.rest[:i])
		p.rest = p.rest[i+len(marker):]
		return evs, true
	}
	keep := 0
	if !final {
		keep = holdBack(p.rest, marker)
	}
	evs = p.emit(evs, p.rest[:len(p.rest)-keep])
	p.rest = p.rest[len(p.rest)-keep:]
	return evs, false
}

// tags parses think tags, Granite's response tags and Command R7B's
// blocks.
func (p *Parser) tags(final bool) []Event {
	var evs []Event
	ts := p.f.tags()
	for {
		switch p.st {
		case atStart, afterBlock:
			i := len(p.rest) - len(strings.TrimLeft(p.rest, spaces))
			open, wait := "", false
			if i < maxLead {
				open, wait = p.opener(p.rest[i:], final)
			}
			if wait {
				return evs
			}
			switch {
			case open != "":
				p.rest = p.rest[i+len(open):]
				if open == ts.thinkOpen {
					p.st = inThink
					p.open(Reasoning, trimBoth)
				} else {
					p.st = inResponse
					p.open(Content, trimBoth)
				}
			case p.forced:
				// The prompt opened the block: the whitespace goes with it.
				p.st = inThink
				p.open(Reasoning, trimBoth)
			default:
				// Whitespace before the answer is the answer's at the start
				// of the output, and dropped after a block.
				p.open(Content, verbatim)
				if p.st == afterBlock {
					p.open(Content, trimLead)
				}
				p.st = inContent
			}
			p.forced = false
		case inThink, inResponse:
			end := ts.thinkClose
			if p.st == inResponse {
				end = ts.responseClose
			}
			var closed bool
			if evs, closed = p.upTo(evs, end, final); !closed {
				return evs
			}
			p.st = afterBlock
		default: // inContent
			evs = p.emit(evs, p.rest)
			p.rest = ""
			return evs
		}
	}
}

// opener tells which block opens at the start of s, if any, or that s is
// too short to tell yet.
func (p *Parser) opener(s string, final bool) (open string, wait bool) {
	ts := p.f.tags()
	opens := []string{ts.thinkOpen}
	if (p.f == Granite || p.f == CommandR) && !p.forced {
		opens = append(opens, ts.responseOpen)
	}
	for _, o := range opens {
		if strings.HasPrefix(s, o) {
			return o, false
		}
		if !final && strings.HasPrefix(o, s) {
			return "", true
		}
	}
	return "", false
}

// holdBack is how long a suffix of s could be the start of marker.
func holdBack(s, marker string) int {
	for k := min(len(s), len(marker)-1); k > 0; k-- {
		if strings.HasSuffix(s, marker[:k]) {
			return k
		}
	}
	return 0
}

// indexAny is where the first of the markers occurs in s, or -1.
func indexAny(s string, markers ...string) int {
	i, _ := earliest(s, markers)
	return i
}

// earliest finds the first of the markers in s: where, and which.
func earliest(s string, markers []string) (int, string) {
	at, which := -1, ""
	for _, m := range markers {
		if i := strings.Index(s, m); i >= 0 && (at < 0 || i < at) {
			at, which = i, m
		}
	}
	return at, which
}
