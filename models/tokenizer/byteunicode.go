package tokenizer

import (
	"sort"
	"sync"
	"unicode"
	"unicode/utf8"
)

// Byte-level BPE (GPT-2 and its descendants) never works on raw bytes: every
// byte of the UTF-8 text is first replaced by one printable rune, so that
// merges and token texts are visible, valid UTF-8 without spaces. Bytes that
// are printable Latin-1 ('!'..'~', '¡'..'¬', '®'..'ÿ') stand for themselves;
// the other 68 bytes (controls, space, DEL, NBSP, soft hyphen, ...) are given
// the runes U+0100, U+0101, ... in increasing byte order. A space therefore
// reads 'Ġ' (U+0120) and a newline 'Ċ' (U+010A) in such vocabularies.

// byteRune is the rune byte b stands for in a byte-level BPE token.
var byteRune [256]rune

// runeByte inverts byteRune: runeByte[r] is the byte r stands for, or -1. Every
// rune of byteRune is below 0x144.
var runeByte [0x144]int16

func init() {
	for i := range runeByte {
		runeByte[i] = -1
	}
	next := rune(0x100)
	for b := 0; b < 256; b++ {
		printable := (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
		r := rune(b)
		if !printable {
			r = next
			next++
		}
		byteRune[b] = r
		runeByte[r] = int16(b)
	}
}

// bpeTokenBytes returns the raw bytes a byte-level BPE token stands for: each
// rune of piece is mapped back through the GPT-2 byte table. A rune outside
// that table (a hand-added token that is not byte-encoded) is kept as its own
// UTF-8 bytes, so such a token decodes to its text.
func bpeTokenBytes(piece string) []byte {
	out := make([]byte, 0, len(piece))
	for i := 0; i < len(piece); {
		r, n := utf8.DecodeRuneInString(piece[i:])
		if r < rune(len(runeByte)) && runeByte[r] >= 0 {
			out = append(out, byte(runeByte[r]))
			i += n
			continue
		}
		out = append(out, piece[i:i+n]...)
		i += n
	}
	return out
}

// appendByteEncoded appends the byte-level BPE form of the UTF-8 bytes of
// cpts to dst.
func appendByteEncoded(dst []byte, cpts []rune) []byte {
	var tmp [4]byte
	for _, c := range cpts {
		for _, b := range appendCodepoint(tmp[:0], c) {
			dst = utf8.AppendRune(dst, byteRune[b])
		}
	}
	return dst
}

// decodeCodepoints splits text into code points the way llama.cpp does before
// pre-tokenization. Its decoder is lenient: a lead byte with enough
// continuation bytes is accepted even when the sequence is overlong or a
// surrogate, and any other byte becomes U+FFFD on its own. Values above
// U+10FFFF (which llama.cpp cannot re-encode and fails on) also become U+FFFD.
func decodeCodepoints(text string, dst []rune) []rune {
	cont := func(i int) bool { return i < len(text) && text[i]&0xC0 == 0x80 }
	for i := 0; i < len(text); {
		b := text[i]
		switch {
		case b < 0x80:
			dst = append(dst, rune(b))
			i++
		case b&0x40 == 0:
			dst = append(dst, utf8.RuneError)
			i++
		case b&0x20 == 0:
			if !cont(i + 1) {
				dst = append(dst, utf8.RuneError)
				i++
				continue
			}
			dst = append(dst, rune(b&0x1F)<<6|rune(text[i+1]&0x3F))
			i += 2
		case b&0x10 == 0:
			if !cont(i+1) || !cont(i+2) {
				dst = append(dst, utf8.RuneError)
				i++
				continue
			}
			dst = append(dst, rune(b&0x0F)<<12|rune(text[i+1]&0x3F)<<6|rune(text[i+2]&0x3F))
			i += 3
		case b&0x08 == 0:
			if !cont(i+1) || !cont(i+2) || !cont(i+3) {
				dst = append(dst, utf8.RuneError)
				i++
				continue
			}
			c := rune(b&0x07)<<18 | rune(text[i+1]&0x3F)<<12 | rune(text[i+2]&0x3F)<<6 | rune(text[i+3]&0x3F)
			if c > unicode.MaxRune {
				c = utf8.RuneError
			}
			dst = append(dst, c)
			i += 4
		default:
			dst = append(dst, utf8.RuneError)
			i++
		}
	}
	return dst
}

// appendCodepoint appends the UTF-8 form of c. Unlike utf8.AppendRune it
// encodes surrogates as three bytes, as llama.cpp does, so that text the
// lenient decoder accepted is written back byte for byte.
func appendCodepoint(dst []byte, c rune) []byte {
	switch {
	case c < 0x80:
		return append(dst, byte(c))
	case c < 0x800:
		return append(dst, 0xC0|byte(c>>6), 0x80|byte(c)&0x3F)
	case c < 0x10000:
		return append(dst, 0xE0|byte(c>>12), 0x80|byte(c>>6)&0x3F, 0x80|byte(c)&0x3F)
	default:
		return append(dst, 0xF0|byte(c>>18), 0x80|byte(c>>12)&0x3F, 0x80|byte(c>>6)&0x3F, 0x80|byte(c)&0x3F)
	}
}

// cpFlags classifies a code point the way llama.cpp's pre-tokenizers see it:
// exactly one general-category bit, plus cfSpace for White_Space. The zero
// value means "no code point" (outside the piece being split), which matters
// to the hand-written splitters.
type cpFlags uint16

const (
	cfUndefined cpFlags = 1 << iota // unassigned (Cn)
	cfNumber                        // \p{N}
	cfLetter                        // \p{L}
	cfSeparator                     // \p{Z}
	cfMark                          // \p{M}
	cfPunct                         // \p{P}
	cfSymbol                        // \p{S}
	cfControl                       // Cc, Cf, Cs, Co
	cfSpace                         // White_Space
)

func (f cpFlags) letter() bool { return f&cfLetter != 0 }
func (f cpFlags) number() bool { return f&cfNumber != 0 }
func (f cpFlags) space() bool  { return f&cfSpace != 0 }

// cpIsWhitespace reports whether c has the White_Space property (the 25
// code points llama.cpp's tables list).
func cpIsWhitespace(c rune) bool {
	switch {
	case c >= 0x09 && c <= 0x0D, c == 0x20, c == 0x85, c == 0xA0, c == 0x1680,
		c >= 0x2000 && c <= 0x200A, c == 0x2028, c == 0x2029, c == 0x202F, c == 0x205F, c == 0x3000:
		return true
	}
	return false
}

type cpRange struct {
	lo    rune
	flags cpFlags
}

// cpRanges holds, sorted by lo, the start of every run of code points with the
// same category; a run lasts until the next entry.
var cpRanges = sync.OnceValue(buildCPRanges)

// asciiFlags is the category table for code points below 0x80.
var asciiFlags = func() (t [0x80]cpFlags) {
	for c := rune(0); c < 0x80; c++ {
		t[c] = categoryOf(c)
		if cpIsWhitespace(c) {
			t[c] |= cfSpace
		}
	}
	return t
}()

// unicode151 lists the code points Unicode 15.1 added to 15.0, which is what
// Go's tables hold; llama.cpp's tables are Unicode 15.1. (When Go moves to a
// later version, TestCodepointFlags notices the code points llama.cpp still
// calls unassigned.)
var unicode151 = []struct {
	lo, hi rune
	flags  cpFlags
}{
	{0x2FFC, 0x2FFF, cfSymbol},   // ideographic description characters
	{0x31EF, 0x31EF, cfSymbol},   // CJK stroke HXG
	{0x2EBF0, 0x2EE5D, cfLetter}, // CJK Unified Ideographs Extension I
}

// categoryOf looks c's category up in Go's tables directly; flagsOf uses the
// faster run table built from the same tables.
func categoryOf(c rune) cpFlags {
	switch {
	case unicode.IsLetter(c):
		return cfLetter
	case unicode.IsNumber(c):
		return cfNumber
	case unicode.IsMark(c):
		return cfMark
	case unicode.IsPunct(c):
		return cfPunct
	case unicode.IsSymbol(c):
		return cfSymbol
	case unicode.Is(unicode.Z, c):
		return cfSeparator
	case unicode.In(c, unicode.Cc, unicode.Cf, unicode.Co, unicode.Cs):
		return cfControl
	}
	for _, r := range unicode151 {
		if c >= r.lo && c <= r.hi {
			return r.flags
		}
	}
	return cfUndefined
}

// buildCPRanges turns Go's category tables into one sorted list of runs.
func buildCPRanges() []cpRange {
	type run struct {
		lo, hi rune
		flags  cpFlags
	}
	var spans []run
	add := func(t *unicode.RangeTable, f cpFlags) {
		for _, r := range t.R16 {
			addStrided(rune(r.Lo), rune(r.Hi), rune(r.Stride), func(lo, hi rune) { spans = append(spans, run{lo, hi, f}) })
		}
		for _, r := range t.R32 {
			addStrided(rune(r.Lo), rune(r.Hi), rune(r.Stride), func(lo, hi rune) { spans = append(spans, run{lo, hi, f}) })
		}
	}
	add(unicode.L, cfLetter)
	add(unicode.N, cfNumber)
	add(unicode.M, cfMark)
	add(unicode.P, cfPunct)
	add(unicode.S, cfSymbol)
	add(unicode.Z, cfSeparator)
	// Not unicode.C, which also holds the unassigned code points.
	for _, t := range []*unicode.RangeTable{unicode.Cc, unicode.Cf, unicode.Co, unicode.Cs} {
		add(t, cfControl)
	}
	for _, r := range unicode151 {
		spans = append(spans, run{r.lo, r.hi, r.flags})
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].lo < spans[j].lo })

	var out []cpRange
	push := func(lo rune, f cpFlags) {
		if n := len(out); n > 0 && out[n-1].flags == f {
			return
		}
		out = append(out, cpRange{lo, f})
	}
	next := rune(0)
	for _, s := range spans {
		if s.lo < next { // overlaps: keep the first category seen
			if s.hi < next {
				continue
			}
			s.lo = next
		}
		if s.lo > next {
			push(next, cfUndefined)
		}
		push(s.lo, s.flags)
		next = s.hi + 1
	}
	if next <= unicode.MaxRune {
		push(next, cfUndefined)
	}
	return out
}

// addStrided reports the runs [lo,hi] of a range table entry: one run when
// the stride is 1, else one per code point.
func addStrided(lo, hi, stride rune, emit func(lo, hi rune)) {
	if stride == 1 {
		emit(lo, hi)
		return
	}
	for c := lo; c <= hi; c += stride {
		emit(c, c)
	}
}

// flagsOf returns the category and White_Space flags of code point c.
func flagsOf(c rune) cpFlags {
	if c >= 0 && c < 0x80 {
		return asciiFlags[c]
	}
	if c < 0 || c > unicode.MaxRune {
		return cfUndefined
	}
	rs := cpRanges()
	i := sort.Search(len(rs), func(i int) bool { return rs[i].lo > c }) - 1
	f := rs[i].flags
	if cpIsWhitespace(c) {
		f |= cfSpace
	}
	return f
}
