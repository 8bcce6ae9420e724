package grammar

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Character classes of regular expressions. Each class escape has a narrow
// set, which the grammar writes where the class stands on its own, and a
// wide set, which a negated class leaves out: the narrow set is what every
// reader of the pattern agrees is in the class, the wide one everything
// that some reader might count in it, so that what the grammar writes
// matches under each of them.
//
// ECMA-262 (JSON schema's pattern): \d and \w are ASCII. Validators
// written with RE2 (Go's regexp) read \s as ASCII whitespace only, so \s
// writes what both agree on, and \S what neither calls whitespace.
//
// Python's re (vLLM's guided regex): \d, \w and \s are Unicode-aware. \d
// writes only the ASCII digits (what a user of \d means, and what xgrammar
// writes) while [^\d] and \D leave out every decimal digit (Nd); \w writes
// the letters (L) of the Basic Multilingual Plane, the ASCII digits and _,
// while [^\w] and \W leave out all letters, numbers (N), marks (M) and
// connectors (Pc); \s writes ASCII whitespace while \S leaves out
// everything str.isspace or ECMA-262 counts as whitespace. The Unicode
// version of Go's tables may be newer than that of the Python checking the
// output: letters outside the BMP are left out of \w since recent versions
// assigned many there (CJK Extension H in 15.0, unknown to Python 3.11), but
// a BMP letter of a recent version could still be written for \w.
var (
	reDigit = chars('0', '9')
	reWord  = chars('0', '9', 'A', 'Z', '_', '_', 'a', 'z')
	reSpace = chars('\t', '\n', '\f', '\r', ' ', ' ')
	// reSpaceECMA is ECMA-262's \s.
	reSpaceECMA = chars('\t', '\r', ' ', ' ', 0xA0, 0xA0, 0x1680, 0x1680, 0x2000, 0x200A,
		0x2028, 0x2029, 0x202F, 0x202F, 0x205F, 0x205F, 0x3000, 0x3000, 0xFEFF, 0xFEFF)
	reLineEnd = chars('\n', '\n', '\r', '\r', 0x2028, 0x2029)
	reDot     = reLineEnd.negate()

	pySpace = chars('\t', '\r', ' ', ' ')
	// pySpaceWide is str.isspace's whitespace, with ECMA-262's and the
	// Mongolian vowel separator (whitespace before Unicode 6.3).
	pySpaceWide = append(chars('\t', '\r', 0x1C, ' ', 0x85, 0x85, 0x180E, 0x180E), reSpaceECMA...).normalize()
	pyDigitWide = tableChars(unicode.Nd)
	pyWord      = append(tableChars(unicode.L).minus(charSet{{0x10000, maxRune}}), reWord...).normalize()
	pyWordWide  = append(append(append(tableChars(unicode.L), tableChars(unicode.N)...),
		tableChars(unicode.M)...), tableChars(unicode.Pc)...).normalize()
	pyDot = chars('\n', '\n').negate()
)

// tableChars is the code points of a Unicode table.
func tableChars(t *unicode.RangeTable) charSet {
	var cs charSet
	for _, r := range t.R16 {
		for c := rune(r.Lo); c <= rune(r.Hi); c += rune(r.Stride) {
			if r.Stride == 1 {
				cs = append(cs, runeRange{rune(r.Lo), rune(r.Hi)})
				break
			}
			cs = append(cs, runeRange{c, c})
		}
	}
	for _, r := range t.R32 {
		for c := rune(r.Lo); c <= rune(r.Hi); c += rune(r.Stride) {
			if r.Stride == 1 {
				cs = append(cs, runeRange{rune(r.Lo), rune(r.Hi)})
				break
			}
			cs = append(cs, runeRange{c, c})
		}
	}
	return cs.normalize()
}

// reClass is what a class escape or a character stands for: narrow is
// written, wide is left out of a negated class (see above).
type reClass struct{ narrow, wide charSet }

func one(c rune) reClass { cs := chars(c, c); return reClass{cs, cs} }

// negated is the class of the characters not in k.
func (k reClass) negated() reClass { return reClass{k.wide.negate(), k.narrow.negate()} }

// reDialect is a regular-expression syntax.
type reDialect uint8

const (
	ecma   reDialect = iota // ECMA-262, as JSON schema's pattern
	python                  // Python's re, as vLLM's guided_regex
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
	return regexExpr(pattern, ecma, false)
}

// Regex compiles a regular expression in Python's re syntax (vLLM's
// guided_regex and structured_outputs.regex) into the grammar of the texts
// it matches whole, as re.fullmatch reads it: the raw characters, for
// output that is the text itself rather than the contents of a JSON
// string. Supported: literals and escapes (\n \t \xHH \uHHHH \UHHHHHHHH,
// octal \0oo, escaped punctuation), classes with ranges and negation, \d
// \w \s and their negations (Unicode-aware, written as described at
// pyWord and its siblings), . (any character but a newline), groups
// (capturing, non-capturing, named with (?P<name>) or (?<name>)),
// comments (?#...), alternation, the quantifiers * + ? {n} {n,} {,n}
// {n,m} (lazy or not), and ^ \A and $ \Z at the ends of the pattern or
// of a top-level alternative. Inline flags ((?i), (?s), ...),
// lookaround, backreferences, conditionals, atomic groups, possessive
// quantifiers, word boundaries and \N{name} are refused with a
// *SyntaxError.
func Regex(pattern string) (*Grammar, error) {
	e, err := regexExpr(pattern, python, true)
	if err != nil {
		return nil, err
	}
	return Compile(e, nil)
}

// regexExpr compiles pattern in dialect d to the expression of the strings
// it matches whole: raw characters, or (raw false) the contents of a JSON
// string that holds them.
func regexExpr(pattern string, d reDialect, raw bool) (*Expr, error) {
	if !utf8.ValidString(pattern) {
		return nil, &SyntaxError{Lang: "regex", Msg: "the pattern is not valid UTF-8"}
	}
	p := &reParser{src: []rune(pattern), dialect: d, raw: raw}
	e, err := p.alternation(0)
	if err != nil {
		return nil, err
	}
	if p.pos < len(p.src) {
		return nil, p.errorf("unbalanced )")
	}
	return e, nil
}

type reParser struct {
	src     []rune
	pos     int
	dialect reDialect
	raw     bool
}

// errorf is a *SyntaxError at the current position.
func (p *reParser) errorf(format string, a ...any) error {
	return p.errorAt(p.pos, format, a...)
}

func (p *reParser) errorAt(pos int, format string, a ...any) error {
	return &SyntaxError{Lang: "regex", Column: pos + 1, Msg: fmt.Sprintf(format, a...)}
}

// char matches one character of cs, as the output writes it.
func (p *reParser) char(cs charSet) *Expr {
	if p.raw {
		return utf8Expr(cs)
	}
	return jsonCharExpr(cs)
}

func (p *reParser) more() bool { return p.pos < len(p.src) }
func (p *reParser) peek() rune { return p.src[p.pos] }

// at reports whether the source continues with s.
func (p *reParser) at(s string) bool {
	i := p.pos
	for _, c := range s {
		if i >= len(p.src) || p.src[i] != c {
			return false
		}
		i++
	}
	return true
}

func (p *reParser) alternation(depth int) (*Expr, error) {
	if depth > maxNesting {
		return nil, p.errorf("groups nested more than %d deep", maxNesting)
	}
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

// atEnd reports whether the source ends here or a top-level alternative
// does (what may follow an end anchor).
func (p *reParser) atEnd() bool { return !p.more() || p.peek() == '|' }

func (p *reParser) sequence(depth int) (*Expr, error) {
	var items []*Expr
	for p.more() {
		c := p.peek()
		switch {
		case c == '|' || c == ')':
			return Seq(items...), nil
		case c == '^' || (p.dialect == python && p.at(`\A`)):
			if depth > 0 || len(items) > 0 {
				return nil, p.errorf("%s is supported only at the start of the pattern", p.anchorName())
			}
			p.pos += len(p.anchorName())
			continue
		case c == '$' || (p.dialect == python && (p.at(`\Z`) || p.at(`\z`))):
			name := p.anchorName()
			at := p.pos
			p.pos += len(name)
			if depth > 0 || !p.atEnd() {
				return nil, p.errorAt(at, "%s is supported only at the end of the pattern", name)
			}
			continue
		case c == '(' && p.at("(?#"):
			// A comment (Python).
			end := p.pos
			for end < len(p.src) && p.src[end] != ')' {
				end++
			}
			if end == len(p.src) {
				return nil, p.errorf("missing ) at the end of a comment")
			}
			p.pos = end + 1
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

// anchorName is the anchor at the current position.
func (p *reParser) anchorName() string {
	if p.peek() == '\\' {
		return string(p.src[p.pos : p.pos+2])
	}
	return string(p.peek())
}

func (p *reParser) atom(depth int) (*Expr, error) {
	start := p.pos
	c := p.peek()
	p.pos++
	switch c {
	case '(':
		if err := p.groupPrefix(); err != nil {
			return nil, err
		}
		e, err := p.alternation(depth + 1)
		if err != nil {
			return nil, err
		}
		if !p.more() || p.peek() != ')' {
			return nil, p.errorAt(start, "missing ) to close this group")
		}
		p.pos++
		return e, nil
	case '[':
		k, err := p.class()
		if err != nil {
			return nil, err
		}
		return p.classExpr(k.narrow, start)
	case '.':
		if p.dialect == python {
			return p.char(pyDot), nil
		}
		return p.char(reDot), nil
	case '\\':
		k, err := p.escape(false)
		if err != nil {
			return nil, err
		}
		return p.classExpr(k.narrow, start)
	case '*', '+', '?':
		return nil, p.errorAt(start, "nothing to repeat before %q", c)
	case '{':
		if p.dialect == ecma || p.quantifierEnd(start) > 0 {
			return nil, p.errorAt(start, "nothing to repeat before %q", c)
		}
	}
	return p.char(chars(c, c)), nil
}

// groupPrefix reads what may follow the ( of a group: ?: or a name, and
// refuses the other (? forms.
func (p *reParser) groupPrefix() error {
	if !p.more() || p.peek() != '?' {
		return nil
	}
	start := p.pos - 1
	switch {
	case p.at("?:"):
		p.pos += 2
		return nil
	case p.at("?P<") || (p.at("?<") && !p.at("?<=") && !p.at("?<!")):
		if p.at("?P<") && p.dialect == ecma {
			return p.errorAt(start, "(?P<name>...) is Python's syntax; ECMA-262 writes (?<name>...)")
		}
		end := p.pos + 2
		for end < len(p.src) && p.src[end] != '>' {
			end++
		}
		if end == len(p.src) {
			return p.errorAt(start, "unterminated group name")
		}
		p.pos = end + 1
		return nil
	case p.at("?=") || p.at("?!") || p.at("?<=") || p.at("?<!"):
		return p.errorAt(start, "lookaround assertions are not supported")
	case p.at("?P="):
		return p.errorAt(start, "backreferences are not supported")
	case p.at("?>"):
		return p.errorAt(start, "atomic groups are not supported")
	case p.at("?("):
		return p.errorAt(start, "conditional groups are not supported")
	}
	if p.dialect == python {
		return p.errorAt(start, "inline flags and other (?...) groups are not supported")
	}
	return p.errorAt(start, "(?%c...) groups are not supported", p.src[min(p.pos+1, len(p.src)-1)])
}

func (p *reParser) classExpr(cs charSet, start int) (*Expr, error) {
	if len(cs) == 0 {
		return nil, p.errorAt(start, "a character class that matches nothing")
	}
	return p.char(cs), nil
}

// escape reads what follows a backslash: a class (\d), or one character.
func (p *reParser) escape(inClass bool) (reClass, error) {
	start := p.pos - 1
	if !p.more() {
		return reClass{}, p.errorAt(start, "a trailing backslash")
	}
	c := p.peek()
	p.pos++
	py := p.dialect == python
	switch c {
	case 'd':
		if py {
			return reClass{reDigit, pyDigitWide}, nil
		}
		return reClass{reDigit, reDigit}, nil
	case 'D':
		if py {
			return reClass{reDigit, pyDigitWide}.negated(), nil
		}
		return reClass{reDigit, reDigit}.negated(), nil
	case 'w':
		if py {
			return reClass{pyWord, pyWordWide}, nil
		}
		return reClass{reWord, reWord}, nil
	case 'W':
		if py {
			return reClass{pyWord, pyWordWide}.negated(), nil
		}
		return reClass{reWord, reWord}.negated(), nil
	case 's':
		if py {
			return reClass{pySpace, pySpaceWide}, nil
		}
		return reClass{reSpace, reSpaceECMA}, nil
	case 'S':
		if py {
			return reClass{pySpace, pySpaceWide}.negated(), nil
		}
		return reClass{reSpace, reSpaceECMA}.negated(), nil
	case 'n':
		return one('\n'), nil
	case 't':
		return one('\t'), nil
	case 'r':
		return one('\r'), nil
	case 'f':
		return one('\f'), nil
	case 'v':
		return one('\v'), nil
	case 'a':
		if py {
			return one('\a'), nil
		}
	case 'b':
		if inClass {
			return one('\b'), nil
		}
		return reClass{}, p.errorAt(start, "word boundaries (\\b) are not supported")
	case 'B':
		return reClass{}, p.errorAt(start, "word boundaries (\\B) are not supported")
	case 'x':
		return p.hexEscape(start, 2)
	case 'u':
		if !py && p.more() && p.peek() == '{' {
			end := p.pos + 1
			for end < len(p.src) && p.src[end] != '}' {
				end++
			}
			if end == len(p.src) {
				return reClass{}, p.errorAt(start, "a bad \\u{...} escape")
			}
			v, err := strconv.ParseUint(string(p.src[p.pos+1:end]), 16, 32)
			if err != nil || v > maxRune {
				return reClass{}, p.errorAt(start, "a bad \\u{...} escape")
			}
			p.pos = end + 1
			return one(rune(v)), nil
		}
		return p.hexEscape(start, 4)
	case 'U':
		if py {
			return p.hexEscape(start, 8)
		}
	case 'N':
		if py {
			return reClass{}, p.errorAt(start, "named characters (\\N{...}) are not supported")
		}
	case 'c', 'k', 'p', 'P':
		if !py {
			return reClass{}, p.errorAt(start, "the escape \\%c is not supported", c)
		}
	case '0':
		if !py {
			return one(0), nil
		}
		v := 0
		for i := 0; i < 2 && p.more() && p.peek() >= '0' && p.peek() <= '7'; i++ {
			v = v*8 + int(p.peek()-'0')
			p.pos++
		}
		return one(rune(v)), nil
	}
	if c >= '1' && c <= '9' {
		if py && c <= '3' && p.pos+1 < len(p.src) && isOctal(p.src[p.pos]) && isOctal(p.src[p.pos+1]) {
			v := int(c-'0')*64 + int(p.src[p.pos]-'0')*8 + int(p.src[p.pos+1]-'0')
			p.pos += 2
			return one(rune(v)), nil
		}
		return reClass{}, p.errorAt(start, "backreferences are not supported")
	}
	if py && c < utf8.RuneSelf && (unicode.IsLetter(c) || unicode.IsDigit(c)) {
		return reClass{}, p.errorAt(start, "bad escape \\%c", c)
	}
	return one(c), nil
}

func isOctal(c rune) bool { return c >= '0' && c <= '7' }

func (p *reParser) hexEscape(start, n int) (reClass, error) {
	if p.pos+n > len(p.src) {
		return reClass{}, p.errorAt(start, "a short hexadecimal escape")
	}
	v, err := strconv.ParseUint(string(p.src[p.pos:p.pos+n]), 16, 32)
	if err != nil {
		return reClass{}, p.errorAt(start, "a bad hexadecimal escape")
	}
	if v > maxRune {
		return reClass{}, p.errorAt(start, "the escape names no character (above U+10FFFF)")
	}
	p.pos += n
	return one(rune(v)), nil
}

// class reads a bracket expression after its [.
func (p *reParser) class() (reClass, error) {
	start := p.pos - 1
	negated := p.more() && p.peek() == '^'
	if negated {
		p.pos++
	}
	var k reClass
	first := true
	for {
		if !p.more() {
			return reClass{}, p.errorAt(start, "missing ] to close this class")
		}
		c := p.peek()
		if c == ']' && (!first || p.dialect == ecma) {
			// In ECMA-262 [] is the empty class, which matches nothing;
			// in Python a ] first in the class is itself.
			p.pos++
			break
		}
		first = false
		at := p.pos
		lo, err := p.classAtom()
		if err != nil {
			return reClass{}, err
		}
		single := len(lo.narrow) == 1 && lo.narrow[0].lo == lo.narrow[0].hi && slices.Equal(lo.narrow, lo.wide)
		if single && p.pos+1 < len(p.src) && p.peek() == '-' && p.src[p.pos+1] != ']' {
			p.pos++
			hi, err := p.classAtom()
			if err != nil {
				return reClass{}, err
			}
			hiSingle := len(hi.narrow) == 1 && hi.narrow[0].lo == hi.narrow[0].hi
			if !hiSingle || hi.narrow[0].lo < lo.narrow[0].lo {
				return reClass{}, p.errorAt(at, "a bad range in a character class")
			}
			r := charSet{{lo.narrow[0].lo, hi.narrow[0].lo}}
			k.narrow = append(k.narrow, r...)
			k.wide = append(k.wide, r...)
			continue
		}
		k.narrow = append(k.narrow, lo.narrow...)
		k.wide = append(k.wide, lo.wide...)
	}
	k = reClass{k.narrow.normalize(), k.wide.normalize()}
	if negated {
		k = k.negated()
	}
	return k, nil
}

// classAtom reads one member of a class.
func (p *reParser) classAtom() (reClass, error) {
	c := p.peek()
	p.pos++
	if c != '\\' {
		return one(c), nil
	}
	return p.escape(true)
}

// quantifierEnd is the position after the {…} quantifier starting at
// start, or 0 if there is none there (the { is then itself, as ECMA-262
// outside unicode mode and Python read it).
func (p *reParser) quantifierEnd(start int) int {
	end := start + 1
	for end < len(p.src) && p.src[end] != '}' {
		end++
	}
	if end == len(p.src) {
		return 0
	}
	a, b, comma := strings.Cut(string(p.src[start+1:end]), ",")
	digits := func(s string) bool {
		for _, c := range s {
			if c < '0' || c > '9' {
				return false
			}
		}
		return true
	}
	if !digits(a) || !digits(b) || (a == "" && (p.dialect == ecma || !comma)) {
		return 0
	}
	return end + 1
}

// quantified applies a quantifier after atom, if there is one.
func (p *reParser) quantified(atom *Expr) (*Expr, error) {
	if !p.more() {
		return atom, nil
	}
	start := p.pos
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
		end := p.quantifierEnd(start)
		if end == 0 {
			return atom, nil
		}
		body := string(p.src[start+1 : end-1])
		a, b, comma := strings.Cut(body, ",")
		var err error
		if lo, err = repeatCount(a); err != nil {
			return nil, p.errorAt(start, "the quantifier {%s} is too large (at most %d)", body, MaxRepeat)
		}
		hi = lo
		if comma {
			hi = -1
			if b != "" {
				if hi, err = repeatCount(b); err != nil {
					return nil, p.errorAt(start, "the quantifier {%s} is too large (at most %d)", body, MaxRepeat)
				}
				if hi < lo {
					return nil, p.errorAt(start, "the quantifier {%s} has its bounds crossed", body)
				}
			}
		}
		p.pos = end
	default:
		return atom, nil
	}
	if p.more() && p.peek() == '?' {
		p.pos++ // lazy: the same language
	}
	if p.more() && (p.peek() == '*' || p.peek() == '+' || (p.peek() == '{' && p.quantifierEnd(p.pos) > 0)) {
		return nil, p.errorf("a quantifier after a quantifier (possessive quantifiers are not supported)")
	}
	return Repeat(atom, lo, hi), nil
}

// repeatCount reads a repetition count of at most MaxRepeat ("" is 0).
func repeatCount(s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n > MaxRepeat {
		return 0, fmt.Errorf("too large")
	}
	return n, nil
}
