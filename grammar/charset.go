package grammar

import (
	"fmt"
	"slices"
	"unicode/utf8"
)

// runeRange is the code points lo … hi.
type runeRange struct{ lo, hi rune }

// charSet is a set of code points: sorted, disjoint ranges.
type charSet []runeRange

// Bounds of the code points a JSON string can hold: every scalar value,
// that is every code point but the surrogates.
const (
	maxRune      = utf8.MaxRune
	surrogateLo  = 0xD800
	surrogateHi  = 0xDFFF
	maxRuneBytes = utf8.UTFMax
)

// chars builds a set from ranges given as lo, hi pairs.
func chars(pairs ...rune) charSet {
	var cs charSet
	for i := 0; i+1 < len(pairs); i += 2 {
		cs = append(cs, runeRange{pairs[i], pairs[i+1]})
	}
	return cs.normalize()
}

// normalize sorts the ranges and merges those that overlap or touch.
func (cs charSet) normalize() charSet {
	out := slices.Clone(cs)
	slices.SortFunc(out, func(a, b runeRange) int { return int(a.lo - b.lo) })
	merged := out[:0]
	for _, r := range out {
		if r.lo > r.hi {
			continue
		}
		if n := len(merged); n > 0 && r.lo <= merged[n-1].hi+1 {
			merged[n-1].hi = max(merged[n-1].hi, r.hi)
			continue
		}
		merged = append(merged, r)
	}
	return merged
}

// negate is every scalar value (no surrogates) not in cs.
func (cs charSet) negate() charSet {
	var out charSet
	next := rune(0)
	for _, r := range cs.normalize() {
		if r.lo > next {
			out = append(out, runeRange{next, r.lo - 1})
		}
		next = r.hi + 1
	}
	if next <= maxRune {
		out = append(out, runeRange{next, maxRune})
	}
	return out.minus(charSet{{surrogateLo, surrogateHi}})
}

// minus is the code points of cs that are not in other.
func (cs charSet) minus(other charSet) charSet {
	var out charSet
	for _, r := range cs {
		pieces := []runeRange{r}
		for _, o := range other {
			var next []runeRange
			for _, p := range pieces {
				if o.hi < p.lo || o.lo > p.hi {
					next = append(next, p)
					continue
				}
				if p.lo < o.lo {
					next = append(next, runeRange{p.lo, o.lo - 1})
				}
				if p.hi > o.hi {
					next = append(next, runeRange{o.hi + 1, p.hi})
				}
			}
			pieces = next
		}
		out = append(out, pieces...)
	}
	return out.normalize()
}

// utf8Expr matches the UTF-8 encoding of one code point of cs (surrogates
// aside, which UTF-8 cannot hold): a byte-range sequence for each run of
// code points whose encodings vary only in ranges of each byte, as RE2
// and Rust's regex-syntax compile character classes, then merged into a
// trie whose branches with the same continuation share one byte set, so
// that a class of many ranges (\w over Unicode, a negated class) stays a
// handful of alternatives.
func utf8Expr(cs charSet) *Expr {
	var seqs [][]ByteSet
	for _, r := range cs.minus(charSet{{surrogateLo, surrogateHi}}) {
		for _, b := range [][2]rune{{0, 0x7F}, {0x80, 0x7FF}, {0x800, 0xFFFF}, {0x10000, maxRune}} {
			lo, hi := max(r.lo, b[0]), min(r.hi, b[1])
			if lo <= hi {
				seqs = utf8Split(seqs, lo, hi)
			}
		}
	}
	return byteTrie(seqs)
}

// utf8Split appends the byte-range sequences of lo … hi, which encode to
// the same number of bytes.
func utf8Split(seqs [][]ByteSet, lo, hi rune) [][]ByteSet {
	n := utf8.RuneLen(lo)
	for i := 1; i < n; i++ {
		m := rune(1)<<(6*i) - 1
		if lo&^m != hi&^m {
			if lo&m != 0 {
				return utf8Split(utf8Split(seqs, lo, lo|m), (lo|m)+1, hi)
			}
			if hi&m != m {
				return utf8Split(utf8Split(seqs, lo, (hi&^m)-1), hi&^m, hi)
			}
		}
	}
	var a, b [maxRuneBytes]byte
	utf8.EncodeRune(a[:], lo)
	utf8.EncodeRune(b[:], hi)
	seq := make([]ByteSet, n)
	for i := range n {
		seq[i] = Range(a[i], b[i])
	}
	return append(seqs, seq)
}

// byteTrie matches any one of seqs (each a non-empty sequence of byte
// sets): sequences with the same first set share it, and first sets whose
// continuations are the same merge into one.
func byteTrie(seqs [][]ByteSet) *Expr {
	type branch struct {
		first ByteSet
		end   bool        // a sequence ends after first
		tails [][]ByteSet // the rest of the longer ones
	}
	var branches []*branch
	byFirst := map[ByteSet]*branch{}
	for _, s := range seqs {
		b := byFirst[s[0]]
		if b == nil {
			b = &branch{first: s[0]}
			byFirst[s[0]] = b
			branches = append(branches, b)
		}
		if len(s) == 1 {
			b.end = true
		} else {
			b.tails = append(b.tails, s[1:])
		}
	}
	type merged struct {
		set  ByteSet
		rest *Expr
	}
	var out []*merged
	byRest := map[string]*merged{}
	for _, b := range branches {
		var rest *Expr
		if len(b.tails) > 0 {
			rest = byteTrie(b.tails)
			if b.end {
				rest = Opt(rest)
			}
		}
		key := ""
		if rest != nil {
			key = rest.String()
		}
		m := byRest[key]
		if m == nil {
			m = &merged{rest: rest}
			byRest[key] = m
			out = append(out, m)
		}
		for w := range m.set {
			m.set[w] |= b.first[w]
		}
	}
	alts := make([]*Expr, len(out))
	for i, m := range out {
		if m.rest == nil {
			alts[i] = Byte(m.set)
		} else {
			alts[i] = Seq(Byte(m.set), m.rest)
		}
	}
	return Alt(alts...)
}

// jsonEscapes are the short escapes JSON has for some characters.
var jsonEscapes = map[rune]string{'"': `\"`, '\\': `\\`, '\b': `\b`, '\f': `\f`, '\n': `\n`, '\r': `\r`, '\t': `\t`}

// mustEscape are the code points a JSON string cannot hold as themselves.
var mustEscape = chars(0, 0x1F, '"', '"', '\\', '\\')

// jsonCharExpr matches one character of cs as a JSON string writes it:
// itself, or, for those that must be escaped, their escape (the short one
// if JSON has one, else \u00XX).
func jsonCharExpr(cs charSet) *Expr {
	alts := []*Expr{}
	if plain := cs.minus(mustEscape); len(plain) > 0 {
		alts = append(alts, utf8Expr(plain))
	}
	for _, r := range cs {
		for c := r.lo; c <= r.hi && c <= 0x5C; c++ {
			if c >= 0x20 && c != '"' && c != '\\' {
				continue
			}
			if e, ok := jsonEscapes[c]; ok {
				alts = append(alts, Lit(e))
			} else {
				alts = append(alts, Lit(fmt.Sprintf(`\u%04x`, c)))
			}
		}
	}
	return Alt(alts...)
}
