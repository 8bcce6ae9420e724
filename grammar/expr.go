package grammar

import (
	"fmt"
	"strconv"
	"strings"
)

// ByteSet is a set of byte values.
type ByteSet [4]uint64

// Has reports whether b is in the set.
func (s *ByteSet) Has(b byte) bool { return s[b>>6]&(1<<(b&63)) != 0 }

// AddRange adds the bytes lo … hi.
func (s *ByteSet) AddRange(lo, hi byte) {
	for c := int(lo); c <= int(hi); c++ {
		s[c>>6] |= 1 << (c & 63)
	}
}

// Range is the set of the bytes lo … hi.
func Range(lo, hi byte) ByteSet {
	var s ByteSet
	s.AddRange(lo, hi)
	return s
}

type op uint8

const (
	opSeq    op = iota // every sub in order; no subs is the empty string
	opAlt              // one of the subs
	opByte             // one byte of set
	opLit              // the bytes of lit
	opRepeat           // subs[0], min … max times (max < 0: unbounded)
	opRef              // the rule named name
	opToken            // the bytes of lit, one token of the vocabulary
)

// Expr is an expression of a grammar over bytes. Expressions are values:
// build them with the functions below and share them freely.
type Expr struct {
	op       op
	set      ByteSet
	lit      string
	subs     []*Expr
	min, max int
	name     string
}

// Empty matches the empty string.
func Empty() *Expr { return &Expr{op: opSeq} }

// Lit matches the bytes of s.
func Lit(s string) *Expr {
	if s == "" {
		return Empty()
	}
	return &Expr{op: opLit, lit: s}
}

// Token matches the bytes of s, which the vocabulary has as one token (a
// tool-call marker such as <tool_call>): the lengths a budget is checked
// against (MinLength, and a Matcher's budget) count it as one byte, so that
// an output that must end with it reserves one token for it rather than
// one per byte.
func Token(s string) *Expr {
	if s == "" {
		return Empty()
	}
	return &Expr{op: opToken, lit: s}
}

// Byte matches one byte of set.
func Byte(set ByteSet) *Expr { return &Expr{op: opByte, set: set} }

// Seq matches its expressions one after the other.
func Seq(es ...*Expr) *Expr {
	var subs []*Expr
	for _, e := range es {
		if e.op == opSeq {
			subs = append(subs, e.subs...)
		} else {
			subs = append(subs, e)
		}
	}
	if len(subs) == 1 {
		return subs[0]
	}
	return &Expr{op: opSeq, subs: subs}
}

// Alt matches any one of its expressions. Alt with none matches nothing.
func Alt(es ...*Expr) *Expr {
	var subs []*Expr
	for _, e := range es {
		if e.op == opAlt {
			subs = append(subs, e.subs...)
		} else {
			subs = append(subs, e)
		}
	}
	if len(subs) == 1 {
		return subs[0]
	}
	return &Expr{op: opAlt, subs: subs}
}

// Repeat matches e min to max times; max < 0 is unbounded.
func Repeat(e *Expr, min, max int) *Expr {
	if max >= 0 && max < min {
		panic(fmt.Sprintf("grammar: Repeat(%d, %d)", min, max))
	}
	if min == 1 && max == 1 {
		return e
	}
	if max == 0 {
		return Empty()
	}
	return &Expr{op: opRepeat, subs: []*Expr{e}, min: min, max: max}
}

// Opt matches e or nothing.
func Opt(e *Expr) *Expr { return Repeat(e, 0, 1) }

// Ref matches the rule of that name, defined on the Rules given to Compile;
// rules may refer to each other and to themselves, as long as none can
// reach itself again before it has matched a byte (left recursion).
func Ref(name string) *Expr { return &Expr{op: opRef, name: name} }

// String renders e in a GBNF-like notation, for tests and messages.
func (e *Expr) String() string {
	var b strings.Builder
	e.write(&b)
	return b.String()
}

func (e *Expr) write(b *strings.Builder) {
	switch e.op {
	case opSeq:
		if len(e.subs) == 0 {
			b.WriteString(`""`)
		}
		for i, s := range e.subs {
			if i > 0 {
				b.WriteByte(' ')
			}
			s.writeAtom(b)
		}
	case opAlt:
		for i, s := range e.subs {
			if i > 0 {
				b.WriteString(" | ")
			}
			s.write(b)
		}
	case opByte:
		b.WriteString(setString(&e.set))
	case opLit, opToken:
		b.WriteString(strconv.Quote(e.lit))
	case opRepeat:
		e.subs[0].writeAtom(b)
		switch {
		case e.min == 0 && e.max == 1:
			b.WriteByte('?')
		case e.min == 0 && e.max < 0:
			b.WriteByte('*')
		case e.min == 1 && e.max < 0:
			b.WriteByte('+')
		case e.max < 0:
			fmt.Fprintf(b, "{%d,}", e.min)
		default:
			fmt.Fprintf(b, "{%d,%d}", e.min, e.max)
		}
	case opRef:
		b.WriteString(e.name)
	}
}

func (e *Expr) writeAtom(b *strings.Builder) {
	if (e.op == opSeq && len(e.subs) > 1) || e.op == opAlt {
		b.WriteByte('(')
		e.write(b)
		b.WriteByte(')')
		return
	}
	e.write(b)
}

func setString(s *ByteSet) string {
	var b strings.Builder
	b.WriteByte('[')
	for c := 0; c < 256; c++ {
		if !s.Has(byte(c)) {
			continue
		}
		end := c
		for end+1 < 256 && s.Has(byte(end+1)) {
			end++
		}
		b.WriteString(byteString(byte(c)))
		if end > c {
			b.WriteByte('-')
			b.WriteString(byteString(byte(end)))
		}
		c = end
	}
	b.WriteByte(']')
	return b.String()
}

func byteString(c byte) string {
	if c > ' ' && c < 0x7f && c != '-' && c != ']' && c != '\\' {
		return string(rune(c))
	}
	return fmt.Sprintf(`\x%02X`, c)
}
