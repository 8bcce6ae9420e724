package toolcall

import (
	"encoding/json"
	"strings"
)

// Event is a piece of a streamed output: text of the content, or a piece
// of a call. The first event of call i carries its name; the arguments
// follow in fragments that concatenate to the JSON text the model wrote.
type Event struct {
	// Call is the index of the call the event belongs to, or -1 for
	// content.
	Call      int
	Content   string
	Name      string // the call's name, on its first event only
	Arguments string // a fragment of the call's arguments
}

// Parser finds tool calls in an output as it streams: Add it text as it
// is generated and it returns the events that are certain by then,
// holding back what might still turn out to be the start of a call.
// Parse gives the same result for a whole output.
type Parser struct {
	f   Format
	buf string // all text so far
	pos int    // where the part of buf not yet turned into events starts

	content bool   // content has been emitted
	ws      string // whitespace held back from the content's end
	calls   int    // calls started
	err     bool   // the output stopped following the format: the rest is content

	// The call being read: where its object starts, whether its start
	// event is out, and how much of its arguments.
	inCall    bool
	callStart int
	// markAt is where the text that announced the call starts: if the call
	// turns out malformed, the content goes on from there.
	markAt   int
	named    bool
	argsSent int
	// A list of calls (Mistral's [...], generic "tool_calls": [...]) is
	// open.
	inList bool
	// current is the call being read, as far as it was scanned.
	current scannedCall
	// llamaDone: Llama 3.x calls only open the output.
	llamaDone bool
}

// NewParser starts parsing an output of the format.
func (f Format) NewParser() *Parser { return &Parser{f: f} }

// Parse splits a whole output into its content (trimmed) and its calls.
func Parse(f Format, output string) (string, []Call) {
	p := f.NewParser()
	return Assemble(append(p.Add(output), p.Finish()...))
}

// Assemble puts a parser's events back together: the content (trimmed)
// and the calls.
func Assemble(evs []Event) (string, []Call) {
	var content strings.Builder
	var calls []Call
	for _, e := range evs {
		switch {
		case e.Call < 0:
			content.WriteString(e.Content)
		case e.Call == len(calls):
			calls = append(calls, Call{Name: e.Name, Arguments: e.Arguments})
		default:
			calls[e.Call].Arguments += e.Arguments
		}
	}
	return strings.TrimSpace(content.String()), calls
}

// Calls reports how many calls the output has started so far.
func (p *Parser) Calls() int { return p.calls }

// Add takes more of the output.
func (p *Parser) Add(text string) []Event {
	p.buf += text
	return p.advance(false)
}

// Finish ends the output: what was held back comes out, as content unless
// it is a call (even an unfinished one, cut short by max_tokens).
func (p *Parser) Finish() []Event {
	evs := p.advance(true)
	if p.inCall {
		p.inCall = false
		if p.named || p.current.nameDone {
			evs = p.callEvents(evs, true)
			p.calls++
			p.pos = len(p.buf)
		} else {
			p.pos = p.markAt
		}
	}
	if p.pos < len(p.buf) {
		evs = p.emitContent(evs, p.buf[p.pos:])
		p.pos = len(p.buf)
	}
	if p.calls == 0 && p.ws != "" && p.content {
		evs = append(evs, Event{Call: -1, Content: p.ws})
	}
	p.ws = ""
	return evs
}

// emitContent adds text as content, keeping leading whitespace of the
// output and trailing whitespace back (it is dropped before a call).
func (p *Parser) emitContent(evs []Event, text string) []Event {
	if text == "" {
		return evs
	}
	if !p.content {
		text = strings.TrimLeft(text, " \t\r\n")
		if text == "" {
			return evs
		}
	}
	body := strings.TrimRight(text, " \t\r\n")
	if body == "" {
		p.ws += text
		return evs
	}
	evs = append(evs, Event{Call: -1, Content: p.ws + body})
	p.ws = text[len(body):]
	p.content = true
	return evs
}

// The outcomes of checking the text at a position against what the format
// expects there.
const (
	more  = 0  // the text ends before it can tell
	match = 1  // it is there
	miss  = -1 // it is not
)

// expect checks whether buf continues at pos with s.
func expect(buf string, pos int, s string) int {
	rest := buf[pos:]
	if strings.HasPrefix(rest, s) {
		return match
	}
	if strings.HasPrefix(s, rest) {
		return more
	}
	return miss
}

func skipWS(buf string, pos int) int {
	for pos < len(buf) && (buf[pos] == ' ' || buf[pos] == '\n' || buf[pos] == '\r' || buf[pos] == '\t') {
		pos++
	}
	return pos
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

// advance turns as much of the text as is certain into events.
func (p *Parser) advance(final bool) []Event {
	var evs []Event
	for {
		if p.inCall {
			var done bool
			evs, done = p.readCall(evs, final)
			if !done {
				return evs
			}
			continue
		}
		if p.err {
			evs = p.emitContent(evs, p.buf[p.pos:])
			p.pos = len(p.buf)
			return evs
		}
		var stop bool
		evs, stop = p.between(evs, final)
		if stop {
			return evs
		}
	}
}

// between reads from pos outside a call: content, and the format's
// markers up to the start of the next call. It reports whether it must
// wait for more text.
func (p *Parser) between(evs []Event, final bool) ([]Event, bool) {
	buf := p.buf
	if p.inList {
		return p.listNext(evs, final)
	}
	switch p.f {
	case Hermes:
		return p.marked(evs, final, "<tool_call>", false)
	case Mistral:
		// [TOOL_CALLS][{...}, ...], or [TOOL_CALLS]name[ARGS]{...}.
		return p.marked(evs, final, "[TOOL_CALLS]", true)
	case CommandR:
		// <|START_ACTION|>[{...}, ...]<|END_ACTION|>.
		return p.marked(evs, final, crActionOpen, true)
	case Llama3, Generic:
		if p.llamaDone || p.content {
			evs = p.emitContent(evs, buf[p.pos:])
			p.pos = len(buf)
			return evs, true
		}
		i := skipWS(buf, p.pos)
		if p.f == Llama3 {
			switch expect(buf, i, "<|python_tag|>") {
			case match:
				i = skipWS(buf, i+len("<|python_tag|>"))
			case more:
				if !final {
					return evs, true
				}
			}
		}
		if i == len(buf) {
			if final {
				p.llamaDone = true
				return evs, false
			}
			return evs, true
		}
		if buf[i] != '{' {
			p.llamaDone = true
			return evs, false
		}
		if p.f == Llama3 {
			mark := p.pos
			p.pos = i
			return p.startCall(evs, mark), false
		}
		return p.genericOpen(evs, i, final)
	}
	return evs, true
}

// marked reads content up to the marker open, then the start of a call:
// after the marker, or (list) in the list that may follow it.
func (p *Parser) marked(evs []Event, final bool, open string, list bool) ([]Event, bool) {
	buf := p.buf
	i := strings.Index(buf[p.pos:], open)
	if i < 0 {
		return p.contentUpTo(evs, final, open), true
	}
	evs = p.emitContent(evs, buf[p.pos:p.pos+i])
	p.pos += i
	mark := p.pos
	j := skipWS(buf, p.pos+len(open))
	if list && j < len(buf) && buf[j] == '[' {
		j = skipWS(buf, j+1)
		p.inList = true
	}
	if j == len(buf) {
		p.inList = false
		if final {
			p.err = true
			return evs, false
		}
		return evs, true
	}
	p.pos = j
	return p.startCall(evs, mark), false
}

// contentUpTo emits the content from pos, holding back an end that could
// be the start of marker.
func (p *Parser) contentUpTo(evs []Event, final bool, marker string) []Event {
	rest := p.buf[p.pos:]
	keep := 0
	if !final {
		keep = holdBack(rest, marker)
	}
	evs = p.emitContent(evs, rest[:len(rest)-keep])
	p.pos = len(p.buf) - keep
	return evs
}

// genericOpen reads {"tool_calls": [ or {"tool_call": at i.
func (p *Parser) genericOpen(evs []Event, i int, final bool) ([]Event, bool) {
	buf := p.buf
	j := skipWS(buf, i+1)
	for _, key := range []string{`"tool_calls"`, `"tool_call"`} {
		switch expect(buf, j, key) {
		case more:
			if !final {
				return evs, true
			}
		case match:
			k := skipWS(buf, j+len(key))
			switch expect(buf, k, ":") {
			case more:
				return evs, !final
			case miss:
				continue
			}
			k = skipWS(buf, k+1)
			if k == len(buf) {
				return evs, !final
			}
			if key == `"tool_calls"` {
				if buf[k] != '[' {
					break
				}
				k = skipWS(buf, k+1)
				if k == len(buf) {
					return evs, !final
				}
				p.inList = true
			}
			p.pos = k
			p.llamaDone = true
			return p.startCall(evs, i), false
		}
	}
	p.llamaDone = true
	return evs, false
}

// startCall starts reading a call at pos, announced from mark on.
func (p *Parser) startCall(evs []Event, mark int) []Event {
	p.inCall, p.callStart, p.markAt, p.named, p.argsSent = true, p.pos, mark, false, 0
	p.ws = "" // whitespace before a call is not content
	return evs
}

// readCall reads the call at callStart as far as the text goes, emitting
// its name and argument fragments; it reports whether the call and what
// closes it are complete.
func (p *Parser) readCall(evs []Event, final bool) ([]Event, bool) {
	buf := p.buf
	var c scannedCall
	if p.f == Mistral && !p.inList {
		c = scanNamedArgs(buf, p.callStart)
	} else {
		keys := []string{"arguments", "parameters"}
		c = scanCall(buf, p.callStart, keys)
	}
	if c.bad {
		// Not a call after all: the text from its announcement on is
		// content (unless its start is already out).
		p.inCall, p.err = false, true
		if !p.named {
			p.pos = p.markAt
		} else {
			p.calls++
			p.pos = p.callStart
		}
		return evs, true
	}
	p.current = c
	evs = p.callEvents(evs, false)
	if !c.complete {
		return evs, false
	}
	// The call's end, and what closes it.
	end := c.end
	switch p.f {
	case Hermes:
		k := skipWS(buf, end)
		switch expect(buf, k, "</tool_call>") {
		case more:
			if !final {
				return evs, false
			}
			end = len(buf)
		case match:
			end = k + len("</tool_call>")
		}
	case Llama3:
		// Several calls: separated by ; or newlines.
		k := skipWS(buf, end)
		if k < len(buf) && buf[k] == ';' {
			k = skipWS(buf, k+1)
		}
		if k == len(buf) && !final {
			return evs, false
		}
		if k < len(buf) && buf[k] == '{' {
			evs = p.callEvents(evs, true)
			p.calls++
			p.pos = k
			return p.startCall(evs, k), true
		}
		p.llamaDone = true
	case Generic:
		if !p.inList {
			k := skipWS(buf, end)
			if k == len(buf) && !final {
				return evs, false
			}
			if k < len(buf) && buf[k] == '}' {
				end = k + 1
			}
		}
	}
	evs = p.callEvents(evs, true)
	p.calls++
	p.inCall = false
	p.pos = end
	return evs, true
}

// listNext reads what follows a call in a list: a comma and the next
// call, or the list's end (and, for the generic form, the object's).
func (p *Parser) listNext(evs []Event, final bool) ([]Event, bool) {
	buf := p.buf
	i := skipWS(buf, p.pos)
	if i == len(buf) {
		if final {
			p.inList = false
			return evs, false
		}
		return evs, true
	}
	switch buf[i] {
	case ',':
		j := skipWS(buf, i+1)
		if j == len(buf) {
			if final {
				p.inList = false
				return evs, false
			}
			return evs, true
		}
		p.pos = j
		return p.startCall(evs, i), false
	case ']':
		p.pos, p.inList = i+1, false
		if p.f == CommandR {
			j := skipWS(buf, p.pos)
			switch expect(buf, j, crActionClose) {
			case more:
				if !final {
					p.inList = true // wait for the action's end
					p.pos = i
					return evs, true
				}
			case match:
				p.pos = j + len(crActionClose)
			}
		}
		if p.f == Generic {
			j := skipWS(buf, p.pos)
			if j == len(buf) && !final {
				p.inList = true // wait for the object's end
				p.pos = i
				return evs, true
			}
			if j < len(buf) && buf[j] == '}' {
				p.pos = j + 1
			}
		}
		return evs, false
	}
	p.inList, p.err = false, true
	return evs, false
}

// callEvents emits what is new of the current call: its start once its
// name is known, and the arguments written since; done ends it (string
// arguments, which cannot be streamed as written, come out decoded then).
func (p *Parser) callEvents(evs []Event, done bool) []Event {
	c := p.current
	if !p.named {
		if !c.nameDone && !done {
			return evs
		}
		evs = append(evs, Event{Call: p.calls, Name: c.name})
		p.named = true
	}
	if c.argsStart < 0 {
		if done && p.argsSent == 0 {
			evs = append(evs, Event{Call: p.calls, Arguments: "{}"})
			p.argsSent = 1
		}
		return evs
	}
	if c.argsString {
		if done && c.argsEnd >= 0 && p.argsSent == 0 {
			var s string
			if json.Unmarshal([]byte(p.buf[c.argsStart:c.argsEnd]), &s) == nil {
				evs = append(evs, Event{Call: p.calls, Arguments: s})
			}
			p.argsSent = 1
		}
		return evs
	}
	end := c.argsEnd
	if end < 0 {
		end = len(p.buf)
	}
	if from := c.argsStart + p.argsSent; from < end {
		evs = append(evs, Event{Call: p.calls, Arguments: p.buf[from:end]})
		p.argsSent = end - c.argsStart
	}
	return evs
}
