package grammar

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// GBNF compiles a grammar written in llama.cpp's GBNF, as llama-server's
// "grammar" field and vLLM's guided_grammar take it, so that a client of
// either can send us the grammar it already has. A match starts at the
// rule named root.
//
// The language: rules `name ::= alternatives`, one a line (a rule goes on
// past the end of a line only after a | or inside parentheses), in any
// order; names of letters, digits, - and _; alternatives separated by |,
// each a sequence, possibly empty; string literals "..." and character
// classes [...] (ranges a-z, negation [^...]) with the escapes \n \r \t
// \\ \" \[ \] \- \xHH \uHHHH \UHHHHHHHH; . for any character; groups
// ( ); the postfix operators * + ? {m} {m,} {m,n} {,n}, which may follow
// each other; comments from # to the end of the line. Characters are
// Unicode code points written as UTF-8 (so \xE9 is é, two bytes), and a
// class or . matches the UTF-8 bytes of one of its characters.
//
// It fails with a *SyntaxError (line, column and reason) on text it cannot
// read, a rule defined twice, a reference to a rule never defined, a
// missing root rule, a class that matches no character, a repetition
// count above MaxRepeat or repetitions nested inside each other whose
// counts multiply past it (as llama.cpp refuses them too), and llama.cpp's
// token matches (<[id]>, <text>, !<...>), which need token ids this
// package does not see. It fails with a *RuleError (rule and line) on a
// rule that matches no finite string or is left-recursive, and with an
// error wrapping ErrGrammar on a grammar past MaxElements.
func GBNF(src string) (*Grammar, error) {
	p := &gbnfParser{src: src, rules: Rules{}, defs: map[string]int{}}
	if err := p.parse(); err != nil {
		return nil, err
	}
	g, err := Compile(Ref(gbnfRoot), p.rules)
	var re *RuleError
	if errors.As(err, &re) {
		if at, ok := p.defs[re.Rule]; ok {
			located := *re
			located.Line, _ = p.lineCol(at)
			return nil, &located
		}
	}
	return g, err
}

// gbnfRoot is the rule a GBNF grammar's matches start at.
const gbnfRoot = "root"

// anyChar is GBNF's ., every character.
var anyChar = chars(0, maxRune)

type gbnfParser struct {
	src   string
	pos   int
	rules Rules
	defs  map[string]int // rule → the offset of its definition
	refs  []gbnfRef
}

// gbnfRef is a reference to a rule, kept to check that the rule exists.
type gbnfRef struct {
	name string
	at   int
}

func (p *gbnfParser) parse() error {
	if !utf8.ValidString(p.src) {
		i := 0
		for i < len(p.src) {
			r, n := utf8.DecodeRuneInString(p.src[i:])
			if r == utf8.RuneError && n == 1 {
				break
			}
			i += n
		}
		return p.errorAt(i, "the grammar is not valid UTF-8")
	}
	p.skipSpace(true)
	for p.pos < len(p.src) {
		if err := p.rule(); err != nil {
			return err
		}
		p.skipSpace(true)
	}
	for _, r := range p.refs {
		if _, ok := p.rules[r.name]; !ok {
			return p.errorAt(r.at, "rule %q is not defined", r.name)
		}
	}
	if _, ok := p.rules[gbnfRoot]; !ok {
		return &SyntaxError{Lang: "gbnf", Msg: `no rule named "root": a match starts at the root rule`}
	}
	return nil
}

// errorAt is a *SyntaxError at the byte offset at.
func (p *gbnfParser) errorAt(at int, format string, a ...any) error {
	line, col := p.lineCol(at)
	return &SyntaxError{Lang: "gbnf", Line: line, Column: col, Msg: fmt.Sprintf(format, a...)}
}

// lineCol is the 1-based line and column (in characters) of offset at.
func (p *gbnfParser) lineCol(at int) (int, int) {
	before := p.src[:min(at, len(p.src))]
	lineStart := strings.LastIndexByte(before, '\n') + 1
	return strings.Count(before, "\n") + 1, utf8.RuneCountInString(before[lineStart:]) + 1
}

// found describes what stands at the current position, for errors.
func (p *gbnfParser) found() string {
	if p.pos >= len(p.src) {
		return "the end of the grammar"
	}
	switch c := p.src[p.pos]; c {
	case '\n', '\r':
		return "the end of the line"
	default:
		r, _ := utf8.DecodeRuneInString(p.src[p.pos:])
		return fmt.Sprintf("%q", r)
	}
}

// skipSpace skips blanks and comments, and line ends if newlines.
func (p *gbnfParser) skipSpace(newlines bool) {
	for p.pos < len(p.src) {
		switch p.src[p.pos] {
		case ' ', '\t':
			p.pos++
		case '\r', '\n':
			if !newlines {
				return
			}
			p.pos++
		case '#':
			for p.pos < len(p.src) && p.src[p.pos] != '\n' && p.src[p.pos] != '\r' {
				p.pos++
			}
		default:
			return
		}
	}
}

func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

func (p *gbnfParser) name() string {
	start := p.pos
	for p.pos < len(p.src) && isNameByte(p.src[p.pos]) {
		p.pos++
	}
	return p.src[start:p.pos]
}

// rule reads `name ::= alternatives` and the end of its line.
func (p *gbnfParser) rule() error {
	start := p.pos
	name := p.name()
	if name == "" {
		return p.errorAt(p.pos, "expected a rule name, found %s (a rule goes on to the next line only after a | or inside parentheses)", p.found())
	}
	p.skipSpace(false)
	if !strings.HasPrefix(p.src[p.pos:], "::=") {
		return p.errorAt(p.pos, "expected ::= after the rule name %q, found %s", name, p.found())
	}
	p.pos += 3
	p.skipSpace(true)
	e, _, err := p.alternatives(false, 0)
	if err != nil {
		return err
	}
	if p.pos < len(p.src) && p.src[p.pos] != '\n' && p.src[p.pos] != '\r' {
		if p.src[p.pos] == ')' {
			return p.errorAt(p.pos, "unexpected ): no ( to close")
		}
		return p.errorAt(p.pos, "unexpected %s in rule %q", p.found(), name)
	}
	if first, dup := p.defs[name]; dup {
		line, _ := p.lineCol(first)
		return p.errorAt(start, "rule %q is defined twice (first on line %d)", name, line)
	}
	p.defs[name] = start
	p.rules[name] = e
	return nil
}

// alternatives reads sequences separated by |. nested says whether it is
// inside parentheses, where line ends are blanks. It returns the product
// of the repetition counts nested in it (see postfix).
func (p *gbnfParser) alternatives(nested bool, depth int) (*Expr, int, error) {
	var alts []*Expr
	weight := 1
	for {
		e, w, err := p.sequence(nested, depth)
		if err != nil {
			return nil, 0, err
		}
		alts = append(alts, e)
		weight = max(weight, w)
		if p.pos >= len(p.src) || p.src[p.pos] != '|' {
			return Alt(alts...), weight, nil
		}
		p.pos++
		p.skipSpace(true)
	}
}

// sequence reads items and their postfix operators up to what cannot
// start one.
func (p *gbnfParser) sequence(nested bool, depth int) (*Expr, int, error) {
	var items []*Expr
	var weights []int
	weight := 1
	for p.pos < len(p.src) {
		start := p.pos
		var item *Expr
		w := 1
		var err error
		switch c := p.src[p.pos]; {
		case c == '"':
			item, err = p.literal()
		case c == '[':
			item, err = p.class()
		case c == '.':
			p.pos++
			item = utf8Expr(anyChar)
		case c == '(':
			item, w, err = p.group(depth)
		case isNameByte(c):
			name := p.name()
			p.refs = append(p.refs, gbnfRef{name, start})
			item = Ref(name)
		case c == '*' || c == '+' || c == '?' || c == '{':
			if len(items) == 0 {
				return nil, 0, p.errorAt(start, "nothing to repeat before %q", c)
			}
			last := len(items) - 1
			items[last], weights[last], err = p.postfix(items[last], weights[last], nested)
			if err != nil {
				return nil, 0, err
			}
			weight = max(weight, weights[last])
			p.skipSpace(nested)
			continue
		case c == '<' || c == '!':
			return nil, 0, p.errorAt(start, "token matches (<[id]>, <text>, !<...>) are not supported: write the text instead")
		default:
			return Seq(items...), weight, nil
		}
		if err != nil {
			return nil, 0, err
		}
		items = append(items, item)
		weights = append(weights, w)
		weight = max(weight, w)
		p.skipSpace(nested)
	}
	return Seq(items...), weight, nil
}

// group reads ( alternatives ).
func (p *gbnfParser) group(depth int) (*Expr, int, error) {
	open := p.pos
	if depth >= maxNesting {
		return nil, 0, p.errorAt(open, "groups nested more than %d deep", maxNesting)
	}
	p.pos++
	p.skipSpace(true)
	e, w, err := p.alternatives(true, depth+1)
	if err != nil {
		return nil, 0, err
	}
	if p.pos >= len(p.src) || p.src[p.pos] != ')' {
		line, col := p.lineCol(open)
		return nil, 0, p.errorAt(p.pos, "expected ) to close the ( at line %d, column %d, found %s", line, col, p.found())
	}
	p.pos++
	return e, w, nil
}

// postfix applies the operator at the current position to item, whose
// nested repetitions multiply to weight, and returns the new weight:
// repetitions inside repetitions multiply the copies the grammar holds and
// the ways a text can match, so their product is bounded by MaxRepeat.
func (p *gbnfParser) postfix(item *Expr, weight int, nested bool) (*Expr, int, error) {
	start := p.pos
	lo, hi := 0, -1
	switch p.src[p.pos] {
	case '*':
		p.pos++
	case '+':
		lo = 1
		p.pos++
	case '?':
		hi = 1
		p.pos++
	case '{':
		var err error
		if lo, hi, err = p.braces(nested); err != nil {
			return nil, 0, err
		}
	}
	factor := max(lo, 1)
	if hi > 0 {
		factor = hi
	}
	if weight*factor > MaxRepeat {
		return nil, 0, p.errorAt(start, "repetitions nested inside each other multiply to more than %d copies", MaxRepeat)
	}
	return Repeat(item, lo, hi), weight * factor, nil
}

// braces reads {m}, {m,}, {m,n} or {,n} (blanks allowed inside, and line
// ends if nested).
func (p *gbnfParser) braces(nested bool) (int, int, error) {
	start := p.pos
	p.pos++
	p.skipSpace(nested)
	lo, hasLo, err := p.count()
	if err != nil {
		return 0, 0, err
	}
	p.skipSpace(nested)
	if p.pos < len(p.src) && p.src[p.pos] == '}' && hasLo {
		p.pos++
		return lo, lo, nil
	}
	if p.pos >= len(p.src) || p.src[p.pos] != ',' {
		return 0, 0, p.errorAt(p.pos, "expected a count, , or } in the repetition, found %s", p.found())
	}
	p.pos++
	p.skipSpace(nested)
	hi, hasHi, err := p.count()
	if err != nil {
		return 0, 0, err
	}
	p.skipSpace(nested)
	if p.pos >= len(p.src) || p.src[p.pos] != '}' {
		return 0, 0, p.errorAt(p.pos, "expected } to end the repetition, found %s", p.found())
	}
	p.pos++
	switch {
	case !hasLo && !hasHi:
		return 0, 0, p.errorAt(start, "the repetition {,} has no count (write * for any number)")
	case !hasHi:
		return lo, -1, nil
	case hi < lo:
		return 0, 0, p.errorAt(start, "the repetition {%d,%d} has its bounds crossed", lo, hi)
	}
	return lo, hi, nil
}

// count reads a decimal count, if there is one.
func (p *gbnfParser) count() (int, bool, error) {
	start := p.pos
	n := 0
	for p.pos < len(p.src) && p.src[p.pos] >= '0' && p.src[p.pos] <= '9' {
		n = min(n*10+int(p.src[p.pos]-'0'), MaxRepeat+1)
		p.pos++
	}
	if n > MaxRepeat {
		return 0, false, p.errorAt(start, "a repetition count above %d", MaxRepeat)
	}
	return n, p.pos > start, nil
}

// literal reads "...".
func (p *gbnfParser) literal() (*Expr, error) {
	open := p.pos
	p.pos++
	var b strings.Builder
	for {
		if p.pos >= len(p.src) {
			return nil, p.errorAt(open, "a string literal without its closing \"")
		}
		if p.src[p.pos] == '"' {
			p.pos++
			return Lit(b.String()), nil
		}
		c, err := p.char()
		if err != nil {
			return nil, err
		}
		b.WriteRune(c)
	}
}

// class reads [...] or [^...].
func (p *gbnfParser) class() (*Expr, error) {
	open := p.pos
	p.pos++
	negated := p.pos < len(p.src) && p.src[p.pos] == '^'
	if negated {
		p.pos++
	}
	var cs charSet
	for {
		if p.pos >= len(p.src) {
			return nil, p.errorAt(open, "a character class without its closing ]")
		}
		if p.src[p.pos] == ']' {
			p.pos++
			break
		}
		at := p.pos
		lo, err := p.char()
		if err != nil {
			return nil, err
		}
		hi := lo
		if strings.HasPrefix(p.src[p.pos:], "-") && !strings.HasPrefix(p.src[p.pos:], "-]") && p.pos+1 < len(p.src) {
			p.pos++
			if hi, err = p.char(); err != nil {
				return nil, err
			}
			if hi < lo {
				return nil, p.errorAt(at, "the range %s-%s ends before it starts", runeName(lo), runeName(hi))
			}
		}
		cs = append(cs, runeRange{lo, hi})
	}
	if len(cs) == 0 {
		return nil, p.errorAt(open, "an empty character class")
	}
	cs = cs.normalize()
	if negated {
		cs = cs.negate()
	}
	if len(cs.minus(charSet{{surrogateLo, surrogateHi}})) == 0 {
		return nil, p.errorAt(open, "the character class matches no character")
	}
	return utf8Expr(cs), nil
}

func runeName(c rune) string {
	if c > ' ' && c != 0x7F && c < 0x80 {
		return string(c)
	}
	return fmt.Sprintf("U+%04X", c)
}

// char reads one character of a literal or class: itself, or an escape.
func (p *gbnfParser) char() (rune, error) {
	at := p.pos
	if p.src[p.pos] != '\\' {
		c, n := utf8.DecodeRuneInString(p.src[p.pos:])
		p.pos += n
		return c, nil
	}
	if p.pos+1 >= len(p.src) {
		return 0, p.errorAt(at, "a backslash at the end of the grammar")
	}
	e := p.src[p.pos+1]
	p.pos += 2
	switch e {
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case '\\', '"', '[', ']', '-':
		return rune(e), nil
	case 'x':
		return p.hex(at, 2)
	case 'u':
		return p.hex(at, 4)
	case 'U':
		return p.hex(at, 8)
	}
	p.pos--
	r, _ := utf8.DecodeRuneInString(p.src[p.pos:])
	return 0, p.errorAt(at, `unknown escape \%c (GBNF has \n \r \t \\ \" \[ \] \- \xHH \uHHHH \UHHHHHHHH)`, r)
}

// hex reads the n hexadecimal digits of an escape that started at at.
func (p *gbnfParser) hex(at, n int) (rune, error) {
	v := rune(0)
	for i := range n {
		if p.pos >= len(p.src) {
			return 0, p.errorAt(at, "the escape needs %d hexadecimal digits", n)
		}
		c := p.src[p.pos]
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, p.errorAt(at, "the escape needs %d hexadecimal digits, found %d", n, i)
		}
		v = v<<4 | rune(d)
		p.pos++
	}
	switch {
	case v > maxRune:
		return 0, p.errorAt(at, "the escape names no character (above U+10FFFF)")
	case v >= surrogateLo && v <= surrogateHi:
		return 0, p.errorAt(at, "the escape names a surrogate (U+%04X), which UTF-8 cannot write", v)
	}
	return v, nil
}
