package tokenizer

import (
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

//go:generate go run wpm_nfd_gen.go -in /usr/share/unicode/UnicodeData.txt

// wpm is llama.cpp's WordPiece for "bert" vocabularies. The converter stores
// a word-initial piece as "▁word" and a continuation piece ("##ing" in BERT's
// own vocabulary) as plain "ing", so each word gets a ▁ in front and is then
// covered greedily by the longest pieces, left to right; a word that cannot
// be covered becomes UNK.
type wpm struct {
	ids          map[string]ID
	unk          ID
	maxTokenLen  int // bytes
	lowercase    bool
	stripAccents bool
}

func newWPM(v *Vocab) *wpm {
	e := &wpm{ids: v.IDs, unk: v.UNK, lowercase: v.Lowercase, stripAccents: v.StripAccents}
	for _, t := range v.Tokens {
		e.maxTokenLen = max(e.maxTokenLen, len(t))
	}
	return e
}

func (e *wpm) encode(text string, out []ID) []ID {
	for _, word := range e.words(text) {
		w := spaceMark + word
		start := len(out)
		for i := 0; i < len(w); {
			j := min(len(w), i+e.maxTokenLen)
			for ; j > i; j-- {
				if id, ok := e.ids[w[i:j]]; ok {
					out = append(out, id)
					break
				}
			}
			if j == i { // no piece starts here: the whole word is unknown
				out = out[:start]
				break
			}
			i = j
		}
		if len(out) == start && e.unk >= 0 {
			out = append(out, e.unk)
		}
	}
	return out
}

// words normalizes text as BERT does and splits it: at whitespace, and around
// every punctuation mark, ASCII symbol and CJK ideograph, each of which is a
// word of its own. Control characters and U+FFFD (also what invalid UTF-8
// decodes to) are dropped; with stripAccents a character is replaced by the
// first code point of its decomposition and combining marks are dropped.
func (e *wpm) words(text string) []string {
	var words []string
	var cur strings.Builder
	finish := func() {
		if cur.Len() > 0 {
			words = append(words, cur.String())
			cur.Reset()
		}
	}
	for _, r := range text {
		if e.stripAccents {
			r = nfdFirst(r)
		}
		if unicode.Is(unicode.White_Space, r) {
			finish()
			continue
		}
		if r == 0 || r == utf8.RuneError || isControl(r) {
			continue
		}
		if e.stripAccents && unicode.Is(unicode.M, r) {
			continue
		}
		alone := unicode.IsPunct(r) || (r < 0x7F && unicode.IsSymbol(r)) || isCJKIdeograph(r)
		if e.lowercase {
			r = unicode.ToLower(r)
		}
		if alone {
			finish()
			words = append(words, string(r))
			continue
		}
		cur.WriteRune(r)
	}
	finish()
	return words
}

// isControl is Unicode's "Other" category as llama.cpp's tables have it:
// Cc, Cf, Cs, Co and unassigned code points.
func isControl(r rune) bool {
	if unicode.Is(unicode.C, r) {
		return true
	}
	for _, t := range [...]*unicode.RangeTable{unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Z} {
		if unicode.Is(t, r) {
			return false
		}
	}
	return true
}

// isCJKIdeograph reports the code points BERT's tokenizer treats as Chinese
// characters (with its quirk of starting Extension E at U+2B920).
func isCJKIdeograph(r rune) bool {
	return (r >= 0x4E00 && r <= 0x9FFF) ||
		(r >= 0x3400 && r <= 0x4DBF) ||
		(r >= 0x20000 && r <= 0x2A6DF) ||
		(r >= 0x2A700 && r <= 0x2B73F) ||
		(r >= 0x2B740 && r <= 0x2B81F) ||
		(r >= 0x2B920 && r <= 0x2CEAF) ||
		(r >= 0xF900 && r <= 0xFAFF) ||
		(r >= 0x2F800 && r <= 0x2FA1F)
}

// nfdFirst is the first code point of r's canonical decomposition.
func nfdFirst(r rune) rune {
	i := sort.Search(len(nfdFirstRanges), func(i int) bool { return nfdFirstRanges[i].hi >= r })
	if i < len(nfdFirstRanges) && nfdFirstRanges[i].lo <= r {
		return nfdFirstRanges[i].nfd
	}
	return r
}
