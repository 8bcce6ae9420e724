package reasoning

import (
	"strings"
	"unicode/utf8"
)

// A harmony output is a list of messages,
//
//	<|start|>ROLE [to=RECIPIENT]<|channel|>CHANNEL [to=RECIPIENT] [<|constrain|>TYPE]<|message|>TEXT<|end|>
//
// the first one's <|start|>assistant being the generation prompt's end,
// the last one's end an end-of-generation token (<|return|>, <|call|>)
// that the engine stops on. Analysis is reasoning, a message with a
// recipient (to=functions.NAME) a tool call, anything else content.

// The markers that end a header, a message's text, and the gap between
// messages. A <|start|> or <|channel|> in a message's text ends it too (the
// model left out <|end|>), the latter starting the next one's header.
var (
	headerEnds     = []string{hMessage, hStart, hEnd, hCall, hReturn}
	bodyEnds       = []string{hEnd, hCall, hReturn, hStart, hChannel}
	betweenEnds    = []string{hStart, hChannel}
	harmonyMarkers = []string{hStart, hChannel, hConstrain, hMessage, hEnd, hCall, hReturn}
)

// longestMarker bounds how far back a search must look again for a marker
// that was cut by the end of the text.
const longestMarker = len(hConstrain)

// maxHeader bounds a header (role, channel, recipient, content type): one
// that does not reach <|message|> or another end in that many bytes is not
// a header, and its text is content, as an output that does not follow the
// format is. It bounds what the parser holds back.
const maxHeader = 512

// harmony parses harmony messages.
func (p *Parser) harmony(final bool) []Event {
	var evs []Event
	for {
		switch p.st {
		case inHeader:
			from := max(0, p.scan-longestMarker+1)
			i, m := earliest(p.rest[from:], headerEnds)
			if i >= 0 {
				i += from
			}
			if i >= maxHeader || i < 0 && len(p.rest) >= maxHeader+longestMarker-1 {
				// Not a header: its first maxHeader bytes (the output's
				// part) are content, and the text goes on as a message's.
				k := maxHeader
				for k > 0 && !utf8.RuneStart(p.rest[k]) {
					k--
				}
				p.st = inBody
				p.open(Content, verbatim)
				evs = p.emit(evs, p.rest[min(p.promptLen, k):k])
				p.rest, p.scan, p.promptLen = p.rest[k:], 0, 0
				continue
			}
			if i < 0 {
				p.scan = len(p.rest)
				return evs
			}
			header := p.rest[:i]
			p.rest, p.scan, p.promptLen, p.marked = p.rest[i+len(m):], 0, 0, true
			switch m {
			case hMessage:
				evs = p.startMessage(evs, header)
			case hStart: // a new header begins
			default: // a message ended before its text: skip it
				p.st = between
			}
		case inBody:
			i, m := earliest(p.rest, bodyEnds)
			if i < 0 {
				keep := 0
				if !final {
					keep = holdBackAny(p.rest, bodyEnds)
				}
				evs = p.emit(evs, p.rest[:len(p.rest)-keep])
				p.rest = p.rest[len(p.rest)-keep:]
				return evs
			}
			evs = p.emit(evs, p.rest[:i])
			evs = p.endMessage(evs)
			p.marked, p.promptLen = true, 0
			switch m {
			case hStart:
				p.rest, p.st = p.rest[i+len(m):], inHeader
			case hChannel:
				p.rest, p.st = p.rest[i:], inHeader
			default:
				p.rest, p.st = p.rest[i+len(m):], between
			}
		default: // between: text outside messages is dropped
			i, m := earliest(p.rest, betweenEnds)
			if i < 0 {
				keep := 0
				if !final {
					keep = holdBackAny(p.rest, betweenEnds)
				}
				p.rest = p.rest[len(p.rest)-keep:]
				return evs
			}
			p.marked, p.promptLen = true, 0
			if m == hStart {
				i += len(m)
			}
			p.rest, p.st = p.rest[i:], inHeader
		}
	}
}

// startMessage starts the text of the message whose header is h.
func (p *Parser) startMessage(evs []Event, h string) []Event {
	channel, recipient := parseHeader(h)
	p.st = inBody
	switch {
	case recipient != "" && recipient != "assistant":
		name := strings.TrimPrefix(recipient, "functions.")
		evs = append(evs, Event{Kind: CallStart, Name: name, Call: p.calls})
		p.open(CallArguments, trimBoth)
	case channel == "analysis":
		p.open(Reasoning, trimBoth)
	default: // final, a preamble on commentary, or no channel
		p.open(Content, verbatim)
	}
	return evs
}

// endMessage ends the current message; a call gets its end event.
func (p *Parser) endMessage(evs []Event) []Event {
	if p.seg.kind == CallArguments {
		if !p.seg.begun {
			evs = append(evs, Event{Kind: CallArguments, Text: "{}", Call: p.calls})
		}
		evs = append(evs, Event{Kind: CallEnd, Call: p.calls})
		p.calls++
	}
	p.open(Content, verbatim)
	return evs
}

// parseHeader finds the channel and the recipient in a message's header:
// the word after <|channel|>, and a to=RECIPIENT before or after it.
func parseHeader(h string) (channel, recipient string) {
	h = strings.ReplaceAll(h, hConstrain, " ")
	before, after, ok := strings.Cut(h, hChannel)
	words := strings.Fields(before)
	if ok {
		if w := strings.Fields(after); len(w) > 0 {
			channel = w[0]
			words = append(words, w[1:]...)
		}
	}
	for _, w := range words {
		if r, ok := strings.CutPrefix(w, "to="); ok {
			return channel, r
		}
	}
	return channel, ""
}

// holdBackAny is how long a suffix of s could be the start of one of the
// markers.
func holdBackAny(s string, markers []string) int {
	keep := 0
	for _, m := range markers {
		keep = max(keep, holdBack(s, m))
	}
	return keep
}
