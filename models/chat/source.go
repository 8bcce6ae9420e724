package chat

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// literalPrefix names the context variables that carry string literals gonja's
// lexer cannot spell (see rewriteSource). Python Jinja2 never sees these names.
const literalPrefix = "__chat_literal_"

// rewriteSource prepares Jinja2 source for gonja's lexer. gonja reads string
// literals differently from Jinja2 (it knows only \' and \" as escapes, and
// stops at any quote after a backslash), has no implicit concatenation of
// adjacent literals, and ends a tag at the first }} or %} even inside a dict
// literal. So every literal inside a tag is decoded the Python way and spelled
// again in a form gonja reads back to the same value; a literal holding a
// backslash or carriage return is replaced by a variable whose value is
// returned in literals. Text outside tags, comments and raw blocks is copied
// unchanged, after Jinja2's newline normalisation.
func rewriteSource(src string) (string, map[string]string, error) {
	src = strings.ReplaceAll(src, "\r\n", "\n")
	src = strings.ReplaceAll(src, "\r", "\n")
	var out strings.Builder
	out.Grow(len(src) + len(src)/8)
	literals := map[string]string{}
	var blocks blockDepth
	// lineStarting is Jinja2's lexer state of that name: whether the last
	// tag ended by consuming a newline; skip is how much of the following
	// text that tag consumed.
	lineStarting, skip := true, 0
	i := 0
	for i < len(src) {
		j := indexTagStart(src, i)
		if j < 0 {
			out.WriteString(src[i:])
			break
		}
		data := src[i:j]
		out.WriteString(data)
		if skip <= len(data) {
			data = data[skip:]
		}
		kind := src[j+1]
		marked := j+2 < len(src) && (src[j+2] == '-' || src[j+2] == '+')
		// gonja strips the blanks before a block tag even when the line has
		// a tag before them; Jinja2 only at the start of a line. A + mark
		// keeps them where Jinja2 would.
		plus := kind != '{' && !marked && data != "" && !strings.Contains(data, "\n") &&
			strings.Trim(data, " \t") == "" && !lineStarting
		var k int
		var err error
		switch kind {
		case '#':
			end := strings.Index(src[j+2:], "#}")
			if end < 0 {
				return "", nil, fmt.Errorf("unterminated comment at byte %d", j)
			}
			k = j + 2 + end + 2
			out.WriteString(src[j : j+2])
			if plus {
				out.WriteByte('+')
			}
			out.WriteString(src[j+2 : k])
		case '%':
			if r, ok := rawBlockEnd(src, j); ok {
				k = r
				out.WriteString(src[j : j+2])
				if plus {
					out.WriteByte('+')
				}
				out.WriteString(src[j+2 : k])
				break
			}
			k, err = rewriteTag(&out, src, j, "%}", plus, literals, &blocks)
		default:
			k, err = rewriteTag(&out, src, j, "}}", false, literals, &blocks)
		}
		if err != nil {
			return "", nil, err
		}
		i = k
		lineStarting, skip = false, 0
		switch mark := src[max(k-3, 0)]; {
		case mark == '-' && k-3 > j+1:
			ws := len(src[k:]) - len(strings.TrimLeft(src[k:], " \t\n\f\v"))
			lineStarting, skip = ws > 0 && src[k+ws-1] == '\n', ws
		case mark == '+' && k-3 > j+1:
		case kind != '{' && k < len(src) && src[k] == '\n':
			lineStarting, skip = true, 1
		}
	}
	return out.String(), literals, nil
}

// indexTagStart returns the index of the next {{, {% or {# at or after i, or -1.
func indexTagStart(src string, i int) int {
	for {
		k := strings.IndexByte(src[i:], '{')
		if k < 0 || i+k+1 >= len(src) {
			return -1
		}
		k += i
		if c := src[k+1]; c == '{' || c == '%' || c == '#' {
			return k
		}
		i = k + 1
	}
}

// rawBlockEnd reports whether a {% raw %} tag starts at j and, if so, returns
// the index just past its {% endraw %} tag, so the block is copied verbatim.
func rawBlockEnd(src string, j int) (int, bool) {
	k := j + 2
	if k < len(src) && (src[k] == '-' || src[k] == '+') {
		k++
	}
	k = skipSpace(src, k)
	if !strings.HasPrefix(src[k:], "raw") {
		return 0, false
	}
	k = skipSpace(src, k+3)
	if k < len(src) && src[k] == '-' {
		k++
	}
	if !strings.HasPrefix(src[k:], "%}") {
		return 0, false
	}
	for p := k + 2; ; {
		q := strings.Index(src[p:], "{%")
		if q < 0 {
			return len(src), true
		}
		p += q
		r := p + 2
		if r < len(src) && (src[r] == '-' || src[r] == '+') {
			r++
		}
		r = skipSpace(src, r)
		if strings.HasPrefix(src[r:], "endraw") {
			r = skipSpace(src, r+6)
			if r < len(src) && src[r] == '-' {
				r++
			}
			if strings.HasPrefix(src[r:], "%}") {
				return r + 2, true
			}
		}
		p += 2
	}
}

func skipSpace(src string, k int) int {
	for k < len(src) && (src[k] == ' ' || src[k] == '\t' || src[k] == '\n') {
		k++
	}
	return k
}

// readLiteral reads the string literal starting at i and returns its
// decoded value and the index past it.
func readLiteral(src string, i int) (string, int, error) {
	quote := src[i]
	k := i + 1
	for k < len(src) && src[k] != quote {
		if src[k] == '\\' {
			k++
		}
		k++
	}
	if k >= len(src) {
		return "", 0, fmt.Errorf("unterminated string literal at byte %d", i)
	}
	decoded, err := unescapePython(src[i+1 : k])
	if err != nil {
		return "", 0, fmt.Errorf("string literal at byte %d: %w", i, err)
	}
	return decoded, k + 1, nil
}

// writeLiteral spells value so that gonja's lexer and parser read it back
// unchanged, or stores it in literals and writes the variable's name.
func writeLiteral(out *strings.Builder, value string, literals map[string]string) {
	if strings.ContainsAny(value, "\\\r") || !utf8.ValidString(value) {
		name := literalPrefix + strconv.Itoa(len(literals))
		literals[name] = value
		out.WriteString(" " + name + " ")
		return
	}
	quote := byte('\'')
	if strings.IndexByte(value, '\'') >= 0 && strings.IndexByte(value, '"') < 0 {
		quote = '"'
	}
	out.WriteByte(quote)
	for k := 0; k < len(value); k++ {
		if value[k] == quote {
			out.WriteByte('\\')
		}
		out.WriteByte(value[k])
	}
	out.WriteByte(quote)
}

// unescapePython decodes a string literal body as Jinja2 does: the body is
// made ASCII with backslashreplace and then decoded with Python's
// unicode-escape codec.
func unescapePython(body string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(body); {
		c := body[i]
		if c != '\\' {
			b.WriteByte(c)
			i++
			continue
		}
		if i+1 >= len(body) {
			return "", fmt.Errorf("\\ at end of string")
		}
		e := body[i+1]
		i += 2
		switch e {
		case '\n':
		case '\\', '\'', '"':
			b.WriteByte(e)
		case 'a':
			b.WriteByte(7)
		case 'b':
			b.WriteByte(8)
		case 'f':
			b.WriteByte(12)
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte(11)
		case '0', '1', '2', '3', '4', '5', '6', '7':
			v := int(e - '0')
			for n := 0; n < 2 && i < len(body) && body[i] >= '0' && body[i] <= '7'; n++ {
				v = v*8 + int(body[i]-'0')
				i++
			}
			b.WriteRune(rune(v))
		case 'x', 'u', 'U':
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			if i+n > len(body) {
				return "", fmt.Errorf("truncated \\%c escape", e)
			}
			v, err := strconv.ParseUint(body[i:i+n], 16, 32)
			if err != nil || v > utf8.MaxRune {
				return "", fmt.Errorf("bad \\%c escape", e)
			}
			b.WriteRune(rune(v))
			i += n
		default:
			if e >= utf8.RuneSelf {
				// backslashreplace turned the character into an escape whose
				// backslash this backslash escaped: its text stays literal.
				r, size := utf8.DecodeRuneInString(body[i-1:])
				b.WriteString(backslashReplace(r))
				i += size - 1
				continue
			}
			b.WriteByte('\\')
			b.WriteByte(e)
		}
	}
	return b.String(), nil
}

// backslashReplace spells r the way Python's backslashreplace error handler does.
func backslashReplace(r rune) string {
	switch {
	case r < 0x100:
		return fmt.Sprintf("\\x%02x", r)
	case r < 0x10000:
		return fmt.Sprintf("\\u%04x", r)
	default:
		return fmt.Sprintf("\\U%08x", r)
	}
}
