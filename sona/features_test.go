package sona

import (
	"math"
	"slices"
	"strings"
	"testing"
)

func TestTokenize(t *testing.T) {
	h := fnv64
	num := func(digits int) uint64 { return mix(uint64(kindNumber), uint64(digits)) }
	mark := func(r rune) uint64 { return mix(uint64(kindMark), uint64(r)) }
	tests := []struct {
		name                   string
		text                   string
		want                   []uint64
		numbers, marks, breaks int
	}{
		{"words and marks", "subtract 7 from 42.", []uint64{h("subtract"), num(1), h("from"), num(2), mark('.')}, 2, 1, 0},
		{"numbers alike by their digits", "17 42 123456", []uint64{num(2), num(2), num(4)}, 3, 0, 0},
		{"accents stay in the word", "café crème", []uint64{h("café"), h("crème")}, 0, 0, 0},
		{"ideographs are words of their own", "翻译成中文", []uint64{h("翻"), h("译"), h("成"), h("中"), h("文")}, 0, 0, 0},
		{"line breaks are counted", "a\nb\n", []uint64{h("a"), h("b")}, 0, 0, 2},
		{"empty", "", nil, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, numbers, marks, lines := tokenize(tt.text, nil)
			if !slices.Equal(got, tt.want) || numbers != tt.numbers || marks != tt.marks || lines != tt.breaks {
				t.Fatalf("tokenize(%q) = %v, %d numbers, %d marks, %d lines; want %v, %d, %d, %d",
					tt.text, got, numbers, marks, lines, tt.want, tt.numbers, tt.marks, tt.breaks)
			}
		})
	}
}

func TestExtract(t *testing.T) {
	x := newExtractor(12)
	norm := func(f features) float64 {
		var s float64
		for _, tm := range f.text {
			s += float64(tm.val * tm.val)
		}
		return math.Sqrt(s)
	}
	sorted := func(f features) bool {
		return slices.IsSortedFunc(f.text, func(a, b term) int { return int(a.idx) - int(b.idx) })
	}
	t.Run("unit length, sorted, unique, in range", func(t *testing.T) {
		for _, text := range []string{"Translate to French: the cat sleeps.", "x", strings.Repeat("word ", 5000), "Ünïcödé ✓ 漢字 42"} {
			f := x.extract(Request{Text: text})
			if math.Abs(norm(f)-1) > 1e-5 || !sorted(f) {
				t.Fatalf("%.20q: norm %g, sorted %v", text, norm(f), sorted(f))
			}
			for i, tm := range f.text {
				if int(tm.idx) >= x.buckets() || (i > 0 && f.text[i-1].idx == tm.idx) {
					t.Fatalf("%.20q: term %d has bucket %d (of %d), or repeats", text, i, tm.idx, x.buckets())
				}
			}
		}
	})
	t.Run("the same text gives the same features, case aside", func(t *testing.T) {
		a, b := x.extract(Request{Text: "Name the capital of Peru."}), x.extract(Request{Text: "name THE capital of peru."})
		if !slices.Equal(a.text, b.text) {
			t.Fatal("features differ")
		}
	})
	t.Run("order matters through bigrams, head and tail", func(t *testing.T) {
		a, b := x.extract(Request{Text: "fix the bug quickly"}), x.extract(Request{Text: "quickly fix the bug"})
		if c := cosine(a.text, b.text); c > 0.9 || c < 0.2 {
			t.Fatalf("cosine of reordered texts %g; want between 0.2 and 0.9", c)
		}
	})
	t.Run("a huge text reads its ends only", func(t *testing.T) {
		word := func(i int) string {
			return string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676%26))
		}
		var all, ends []string
		for i := range 3 * maxWords {
			all = append(all, word(i))
			if i < maxWords/2 || i >= 3*maxWords-maxWords/2 {
				ends = append(ends, word(i))
			}
		}
		f, g := x.extract(Request{Text: strings.Join(all, " ")}), x.extract(Request{Text: strings.Join(ends, " ")})
		if !slices.Equal(f.text, g.text) {
			t.Fatal("the features of a long text are not those of its first and last words")
		}
	})
	t.Run("empty text", func(t *testing.T) {
		f := x.extract(Request{})
		if len(f.text) != 0 || f.dense[denseBias] != 1 || f.hasUser {
			t.Fatalf("features of nothing: %+v", f)
		}
	})
	t.Run("max tokens and user", func(t *testing.T) {
		f := x.extract(Request{Text: "hi", MaxTokens: 64, User: "u1"})
		g := x.extract(Request{Text: "hi", User: "u2"})
		if f.dense[denseHasMaxTokens] != 1 || f.dense[denseMaxTokens] <= 0 || g.dense[denseMaxTokens] != 0 {
			t.Fatalf("max tokens features %v and %v", f.dense, g.dense)
		}
		if !f.hasUser || !g.hasUser || f.user == g.user {
			t.Fatalf("users' buckets %d and %d", f.user, g.user)
		}
	})
}

func TestCosine(t *testing.T) {
	a := []term{{1, 0.6}, {3, 0.8}}
	b := []term{{0, 0.6}, {3, 0.8}}
	if got := cosine(a, b); math.Abs(float64(got)-0.64) > 1e-6 {
		t.Fatalf("cosine = %g, want 0.64", got)
	}
	if got := cosine(a, nil); got != 0 {
		t.Fatalf("cosine with nothing = %g", got)
	}
}
