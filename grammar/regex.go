package grammar

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Character classes of ECMA-262 regular expressions, which JSON schema's
// pattern uses. Validators written with RE2 (Go's regexp) read \s as ASCII
// whitespace only, so \s writes what both agree on, and \S what neither
// calls whitespace.
var (
	reDigit = chars('0', '9')
	reWord  = chars('0', '9', 'A', 'Z', '_', '_', 'a', 'z')
	reSpace = chars('\t', '\n', '\f', '\r', ' ', ' ')
	// reSpaceECMA is ECMA-262's \s.
	reSpaceECMA = chars('\t', '\r', ' ', ' ', 0xA0, 0xA0, 0x1680, 0x1680, 0x2000, 0x200A,
		0x2028, 0x2029, 0x202F, 0x202F, 0x205F, 0x205F, 0x3000, 0x3000, 0xFEFF, 0xFEFF)
	reLineEnd = chars('\n', '\n', '\r', '\r', 0x2028, 0x2029)
	reDot     = reLineEnd.negate()
)

// patternExpr compiles an ECMA-262 regular expression to the JSON string
// contents (without the quotes) that it matches whole. JSON schema's
// pattern is not anchored, so any string containing a match is valid; the
// strings that are a match from start to end are among them, and those are
// what the grammar generates. Supported: literals and escapes, classes
// (with ranges, negation, \d \w \s and their negations), ., groups
// (capturing, non-capturing, named), alternation, the quantifiers * + ? {n}
// {n,} {n,m} (lazy or not), and ^ and $ at the ends of the pattern or of a
// top-level alternative. Lookaround, backreferences and word boundaries
// are refused.
func patternExpr(pattern string) (*Expr, error) {
	if !utf8.ValidString(pattern) {
		return nil, fmt.Errorf("the pattern is not valid UTF-8")
	}
	p := &reParser{src: []rune(pattern)}
	e, err := p.alternation(0)
	if err != nil {
		return nil, err
	}
	if p.pos < len(p.src) {
		return nil, fmt.Errorf("unbalanced ) at %d", p.pos)
	}
	return e, nil
}

type reParser struct {
	src []rune
	pos int
}

func (p *reParser) more() bool { return p.pos < len(p.src) }
func (p *reParser) peek() rune { return p.src[p.pos] }

func (p *reParser) alternation(depth int) (*Expr, error) {
	var alts []*Expr
	for {
		e, err := p.sequence(depth)
		if err != nil {
			return nil, err
		}
		alts = append(alts, e)
		if !p.more() || p.peek() != '|' {
			return Alt(alts...), nil
		}
		p.pos++
	}
}

func (p *reParser) sequence(depth int) (*Expr, error) {
	var items []*Expr
	for p.more() {
		c := p.peek()
		switch {
		case c == '|' || c == ')':
			return Seq(items...), nil
		case c == '^':
			if depth > 0 || len(items) > 0 {
				return nil, fmt.Errorf("^ is supported only at the start of the pattern")
			}
			p.pos++
			continue
		case c == '$':
			p.pos++
			if depth > 0 || (p.more() && p.peek() != '|') {
				return nil, fmt.Errorf("$ is supported only at the end of the pattern")
			}
			continue
		}
		atom, err := p.atom(depth)
		if err != nil {
			return nil, err
		}
		if atom, err = p.quantified(atom); err != nil {
			return nil, err
		}
		items = append(items, atom)
	}
	return Seq(items...), nil
}

func (p *reParser) atom(depth int) (*Expr, error) {
	c := p.peek()
	p.pos++
	switch c {
	case '(':
		if p.more() && p.peek() == '?' {
			rest := string(p.src[p.pos:min(p.pos+3, len(p.src))])
			switch {
			case strings.HasPrefix(rest, "?:"):
				p.pos += 2
			case strings.HasPrefix(rest, "?<") && !strings.HasPrefix(rest, "?<=") && !strings.HasPrefix(rest, "?<!"):
				end := p.pos + 2
				for end < len(p.src) && p.src[end] != '>' {
					end++
				}
				if end == len(p.src) {
					return nil, fmt.Errorf("unterminated group name")
				}
				p.pos = end + 1
			default:
				return nil, fmt.Errorf("lookaround assertions are not supported")
			}
		}
		e, err := p.alternation(depth + 1)
		if err != nil {
			return nil, err
		}
		if !p.more() || p.peek() != ')' {
			return nil, fmt.Errorf("missing )")
		}
		p.pos++
		return e, nil
	case '[':
		cs, err := p.class()
		if err != nil {
			return nil, err
		}
		return classExpr(cs)
	case '.':
		return jsonCharExpr(reDot), nil
	case '\\':
		cs, err := p.escape(false)
		if err != nil {
			return nil, err
		}
		return classExpr(cs)
	case '*', '+', '?', '{':
		return nil, fmt.Errorf("nothing to repeat before %q", c)
	}
	return jsonCharExpr(chars(c, c)), nil
}

func classExpr(cs charSet) (*Expr, error) {
	if len(cs) == 0 {
		return nil, fmt.Errorf("a character class that matches nothing")
	}
	return jsonCharExpr(cs), nil
}

// escape reads what follows a backslash: a class (\d), or one character.
func (p *reParser) escape(inClass bool) (charSet, error) {
	if !p.more() {
		return nil, fmt.Errorf("a trailing backslash")
	}
	c := p.peek()
	p.pos++
	switch c {
	case 'd':
		return reDigit, nil
	case 'D':
		return reDigit.negate(), nil
	case 'w':
		return reWord, nil
	case 'W':
		return reWord.negate(), nil
	case 's':
		return reSpace, nil
	case 'S':
		return reSpaceECMA.negate(), nil
	case 'n':
		return chars('\n', '\n'), nil
	case 't':
		return chars('\t', '\t'), nil
	case 'r':
		return chars('\r', '\r'), nil
	case 'f':
		return chars('\f', '\f'), nil
	case 'v':
		return chars('\v', '\v'), nil
	case '0':
		return chars(0, 0), nil
	case 'b':
		if inClass {
			return chars('\b', '\b'), nil
		}
		return nil, fmt.Errorf("word boundaries (\\b) are not supported")
	case 'B':
		return nil, fmt.Errorf("word boundaries (\\B) are not supported")
	case 'x':
		return p.hexEscape(2)
	case 'u':
		if p.more() && p.peek() == '{' {
			end := p.pos + 1
			for end < len(p.src) && p.src[end] != '}' {
				end++
			}
			v, err := strconv.ParseUint(string(p.src[p.pos+1:end]), 16, 32)
			if end == len(p.src) || err != nil || v > maxRune {
				return nil, fmt.Errorf("a bad \\u{...} escape")
			}
			p.pos = end + 1
			return chars(rune(v), rune(v)), nil
		}
		return p.hexEscape(4)
	case 'c', 'k', 'p', 'P':
		return nil, fmt.Errorf("the escape \\%c is not supported", c)
	}
	if c >= '1' && c <= '9' {
		return nil, fmt.Errorf("backreferences are not supported")
	}
	return chars(c, c), nil
}

func (p *reParser) hexEscape(n int) (charSet, error) {
	if p.pos+n > len(p.src) {
		return nil, fmt.Errorf("a short hexadecimal escape")
	}
	v, err := strconv.ParseUint(string(p.src[p.pos:p.pos+n]), 16, 32)
	if err != nil {
		return nil, fmt.Errorf("a bad hexadecimal escape")
	}
	p.pos += n
	return chars(rune(v), rune(v)), nil
}

// class reads a bracket expression after its [.
func (p *reParser) class() (charSet, error) {
	negated := p.more() && p.peek() == '^'
	if negated {
		p.pos++
	}
	var cs charSet
	first := true
	for {
		if !p.more() {
			return nil, fmt.Errorf("missing ]")
		}
		c := p.peek()
		if c == ']' && !first {
			p.pos++
			break
		}
		if c == ']' {
			// []: ECMA-262's empty class, which matches nothing.
			p.pos++
			break
		}
		first = false
		lo, single, err := p.classAtom()
		if err != nil {
			return nil, err
		}
		if single && p.pos+1 < len(p.src) && p.peek() == '-' && p.src[p.pos+1] != ']' {
			p.pos++
			hi, hiSingle, err := p.classAtom()
			if err != nil {
				return nil, err
			}
			if !hiSingle || hi[0].lo < lo[0].lo {
				return nil, fmt.Errorf("a bad range in a character class")
			}
			cs = append(cs, runeRange{lo[0].lo, hi[0].lo})
			continue
		}
		cs = append(cs, lo...)
	}
	cs = cs.normalize()
	if negated {
		cs = cs.negate()
	}
	return cs, nil
}

// classAtom reads one member of a class, and whether it is one character.
func (p *reParser) classAtom() (charSet, bool, error) {
	c := p.peek()
	p.pos++
	if c != '\\' {
		return chars(c, c), true, nil
	}
	cs, err := p.escape(true)
	if err != nil {
		return nil, false, err
	}
	return cs, len(cs) == 1 && cs[0].lo == cs[0].hi, nil
}

// quantified applies a quantifier after atom, if there is one.
func (p *reParser) quantified(atom *Expr) (*Expr, error) {
	if !p.more() {
		return atom, nil
	}
	lo, hi := 1, 1
	switch p.peek() {
	case '*':
		lo, hi = 0, -1
		p.pos++
	case '+':
		lo, hi = 1, -1
		p.pos++
	case '?':
		lo, hi = 0, 1
		p.pos++
	case '{':
		end := p.pos + 1
		for end < len(p.src) && p.src[end] != '}' {
			end++
		}
		if end == len(p.src) {
			return atom, nil // a literal {, as ECMA-262 reads it outside unicode mode
		}
		body := string(p.src[p.pos+1 : end])
		a, b, comma := strings.Cut(body, ",")
		var err error
		if lo, err = strconv.Atoi(a); err != nil || lo < 0 {
			return nil, fmt.Errorf("a bad quantifier {%s}", body)
		}
		hi = lo
		if comma {
			hi = -1
			if b != "" {
				if hi, err = strconv.Atoi(b); err != nil || hi < lo {
					return nil, fmt.Errorf("a bad quantifier {%s}", body)
				}
			}
		}
		if lo > MaxRepeat || hi > MaxRepeat {
			return nil, fmt.Errorf("the quantifier {%s} is too large", body)
		}
		p.pos = end + 1
	default:
		return atom, nil
	}
	if p.more() && p.peek() == '?' {
		p.pos++ // lazy: the same language
	}
	if p.more() && (p.peek() == '*' || p.peek() == '+' || p.peek() == '{') {
		return nil, fmt.Errorf("a quantifier after a quantifier")
	}
	return Repeat(atom, lo, hi), nil
}
