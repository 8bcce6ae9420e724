package tokenizer

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/ruvllm/ruvllm/internal/shared"
	"github.com/ruvllm/ruvllm/models/gguf"
)

// vocabCase is one of llama.cpp's tokenizer test vectors.
type vocabCase struct {
	text string
	ids  []ID
}

// readVocabCases reads NAME.gguf.inp and NAME.gguf.out from the shared vocab
// directory.
func readVocabCases(t *testing.T, name string) []vocabCase {
	t.Helper()
	inp, err := os.ReadFile(shared.Path(t, "vocab", name+".gguf.inp"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(shared.Path(t, "vocab", name+".gguf.out"))
	if err != nil {
		t.Fatal(err)
	}
	texts := strings.Split(string(inp), "\n__ggml_vocab_test__\n")
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	// The piece after the last separator is empty and has no .out line.
	if len(texts) != len(lines)+1 || texts[len(texts)-1] != "" {
		t.Fatalf("%s: %d inputs for %d outputs", name, len(texts), len(lines))
	}
	cases := make([]vocabCase, len(lines))
	for i, line := range lines {
		cases[i].text = texts[i]
		for _, f := range strings.Fields(line) {
			id, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("%s line %d: %v", name, i+1, err)
			}
			cases[i].ids = append(cases[i].ids, ID(id))
		}
	}
	return cases
}

// loadTestVocab reads the vocabulary of a shared vocab file.
func loadTestVocab(t testing.TB, name string) *Vocab {
	t.Helper()
	f, err := gguf.Open(shared.Path(t, "vocab", name+".gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	v, err := LoadVocab(f)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestBPEVocabFiles(t *testing.T) {
	for _, name := range []string{"ggml-vocab-gpt-2", "ggml-vocab-llama-bpe", "ggml-vocab-deepseek-coder", "ggml-vocab-starcoder"} {
		t.Run(name, func(t *testing.T) {
			tk, err := New(loadTestVocab(t, name))
			if err != nil {
				t.Fatal(err)
			}
			for i, c := range readVocabCases(t, name) {
				// As llama.cpp's test: no BOS, special-token text as plain text.
				got := tk.Encode(c.text, EncodeOptions{})
				if !slices.Equal(got, c.ids) {
					t.Errorf("case %d %q:\n got %v\nwant %v", i, c.text, got, c.ids)
				}
			}
		})
	}
}

// byteTokens returns the 256 single-byte tokens of a byte-level vocabulary,
// without those listed in drop.
func byteTokens(drop ...string) []string {
	var toks []string
	for b := range 256 {
		if s := string(byteRune[b]); !slices.Contains(drop, s) {
			toks = append(toks, s)
		}
	}
	return toks
}

// tokenTexts maps ids back to token texts, for readable failures.
func tokenTexts(v *Vocab, ids []ID) []string {
	var s []string
	for _, id := range ids {
		s = append(s, v.Tokens[id])
	}
	return s
}

func TestBPEMerges(t *testing.T) {
	cases := []struct {
		name   string
		pre    string
		drop   []string // byte tokens left out of the vocabulary
		tokens []string // tokens beyond the single bytes
		merges []string
		text   string
		want   []string
	}{
		{"lowest rank first", "gpt-2", nil, []string{"ab", "bc", "abc"}, []string{"b c", "a b", "a bc"}, "abc", []string{"abc"}},
		{"an earlier merge blocks a later one", "gpt-2", nil, []string{"ab", "bc", "abc"}, []string{"a b", "b c", "a bc"}, "abc", []string{"ab", "c"}},
		{"leftmost of equal ranks", "gpt-2", nil, []string{"aa"}, []string{"a a"}, "aaaaa", []string{"aa", "aa", "a"}},
		{"merged pairs merge again", "gpt-2", nil, []string{"aa", "aaaa"}, []string{"a a", "aa aa"}, "aaaaaaa", []string{"aaaa", "aa", "a"}},
		{"spaces are byte-encoded", "gpt-2", nil, []string{"Ġh", "Ġhi"}, []string{"Ġ h", "Ġh i"}, "x hi", []string{"x", "Ġhi"}},
		{"merges stay within words", "gpt-2", nil, []string{"ab", "b!"}, []string{"b !", "a b"}, "ab!", []string{"ab", "!"}},
		{"a merge without a token falls back to byte tokens", "gpt-2", nil, nil, []string{"a b"}, "ab", []string{"a", "b"}},
		{"a symbol that is no token loses its multi-byte parts", "gpt-2", []string{"©"}, nil, nil, "é", []string{"Ã"}},
		{"tiktoken vocabularies take whole-word tokens", "llama-bpe", nil, []string{"abc"}, nil, "abc", []string{"abc"}},
		{"others do not", "qwen2", nil, []string{"abc"}, nil, "abc", []string{"a", "b", "c"}},
		{"empty text", "gpt-2", nil, nil, nil, "", nil},
		// Raw-byte vocabularies (Gemma 4) merge UTF-8 and fall back to <0xNN>.
		{"raw bytes merge UTF-8", "gemma4", nil, []string{"a", "b", "ab", "▁", "▁ab"}, []string{"a b", "▁ ab"}, "▁ab", []string{"▁ab"}},
		{"raw bytes fall back to byte tokens", "gemma4", nil, []string{"a"}, nil, "aé", []string{"a", "<0xC3>", "<0xA9>"}},
		{"a newline run that is a token is whole", "gemma4", nil, []string{"a", "\n\n"}, nil, "a\n\na", []string{"a", "\n\n", "a"}},
		{"other newline runs merge", "gemma4", nil, []string{"\n\n"}, []string{"\n \n"}, "\n\n\n", []string{"\n\n", "<0x0A>"}},
		{"sarvam takes no newline run whole", "sarvam-moe", nil, []string{"\n\n"}, nil, "\n\n", []string{"<0x0A>", "<0x0A>"}},
		{"invalid UTF-8 is U+FFFD", "gpt-2", nil, nil, nil, "\xff", []string{"ï", "¿", "½"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			base := byteTokens(c.drop...)
			if c.pre == "gemma4" || c.pre == "sarvam-moe" {
				base = nil
				for b := range 256 {
					base = append(base, fmt.Sprintf("<0x%02X>", b))
				}
			}
			v := &Vocab{Model: "gpt2", Pre: c.pre, Tokens: append(base, c.tokens...), Merges: c.merges}
			enc, err := newBPE(v)
			if err != nil {
				t.Fatal(err)
			}
			if got := tokenTexts(v, enc.encode(c.text, nil)); !slices.Equal(got, c.want) {
				t.Errorf("encode(%q) = %q, want %q", c.text, got, c.want)
			}
		})
	}
}

func TestBPEMergeRanks(t *testing.T) {
	v := &Vocab{Model: "gpt2", Pre: "gpt-2", Tokens: byteTokens(), Merges: []string{"a b", "x y z", "a b", "nospace", " q r"}}
	enc, err := newBPE(v)
	if err != nil {
		t.Fatal(err)
	}
	ranks := enc.(*bpe).ranks
	want := map[bpePair]int{{"a", "b"}: 0, {"x", "y z"}: 1, {" q", "r"}: 4}
	if len(ranks) != len(want) {
		t.Errorf("ranks = %v, want %v", ranks, want)
	}
	for p, r := range want {
		if got, ok := ranks[p]; !ok || got != r {
			t.Errorf("rank of %q = %d, %v; want %d", p, got, ok, r)
		}
	}
	if _, err := newBPE(&Vocab{Model: "gpt2", Pre: "no-such-pre", Tokens: byteTokens()}); err == nil {
		t.Error("an unknown pre-tokenizer gave no error")
	}
}

// A whole word of one repeated letter is the worst case for the merge loop.
func TestBPELongWord(t *testing.T) {
	v := &Vocab{Model: "gpt2", Pre: "gpt-2", Tokens: append(byteTokens(), "aa", "aaaa"), Merges: []string{"a a", "aa aa"}}
	enc, err := newBPE(v)
	if err != nil {
		t.Fatal(err)
	}
	got := enc.encode(strings.Repeat("a", 100001), nil)
	if len(got) != 25001 || v.Tokens[got[0]] != "aaaa" || v.Tokens[got[len(got)-1]] != "a" {
		t.Errorf("got %d tokens, first %q, last %q", len(got), v.Tokens[got[0]], v.Tokens[got[len(got)-1]])
	}
}

func TestByteRunes(t *testing.T) {
	seen := map[rune]bool{}
	for b := range 256 {
		r := byteRune[b]
		if seen[r] || !unicode.IsGraphic(r) || unicode.IsSpace(r) {
			t.Errorf("byte %#x maps to %U, which is repeated, not graphic or a space", b, r)
		}
		seen[r] = true
		if got := bpeTokenBytes(string(r)); len(got) != 1 || got[0] != byte(b) {
			t.Errorf("bpeTokenBytes(%q) = %v, want [%d]", r, got, b)
		}
	}
	for b, r := range map[byte]rune{' ': 'Ġ', '\n': 'Ċ', '\t': 'ĉ', 0: 'Ā', 0x7F: 'ġ', 0xA0: 'ł', 0xAD: 'Ń', 'a': 'a', 0xE9: 'é'} {
		if byteRune[b] != r {
			t.Errorf("byte %#x maps to %q, want %q", b, byteRune[b], r)
		}
	}
	for piece, want := range map[string]string{
		"ĠHello":          " Hello",
		"ĊĊ":              "\n\n",
		"Ã©":              "é",
		"ðŁ¦Ļ":            "🦙",
		"Ġ<|endoftext|>€": " <|endoftext|>€", // runes outside the table are kept
		"":                "",
	} {
		if got := string(bpeTokenBytes(piece)); got != want {
			t.Errorf("bpeTokenBytes(%q) = %q, want %q", piece, got, want)
		}
	}
}

func TestDecodeCodepoints(t *testing.T) {
	const bad = utf8.RuneError
	for _, c := range []struct {
		in   string
		want []rune
	}{
		{"aé中🦙", []rune("aé中🦙")},
		{"\xff", []rune{bad}},
		{"a\x80b", []rune{'a', bad, 'b'}},
		{"\xe4\xb8", []rune{bad, bad}},    // truncated
		{"\xc0\x80", []rune{0}},           // overlong, accepted as llama.cpp does
		{"\xed\xa0\x80", []rune{0xD800}},  // surrogate, accepted as llama.cpp does
		{"\xf4\x90\x80\x80", []rune{bad}}, // above U+10FFFF
		{"\xf8\x88\x80\x80\x80", []rune{bad, bad, bad, bad, bad}},
	} {
		got := decodeCodepoints(c.in, nil)
		if !slices.Equal(got, c.want) {
			t.Errorf("decodeCodepoints(%q) = %U, want %U", c.in, got, c.want)
		}
	}
	// What the lenient decoder accepts is written back byte for byte.
	for _, s := range []string{"aé中🦙", "\xed\xa0\x80", "\xc2\x80"} {
		var b []byte
		for _, c := range decodeCodepoints(s, nil) {
			b = appendCodepoint(b, c)
		}
		if string(b) != s {
			t.Errorf("%q comes back as %q", s, b)
		}
	}
}

// TestCodepointFlags checks code points against llama.cpp's generated table
// (Unicode 15.1, unassigned code points undefined, Cc Cf Cs Co as control).
func TestCodepointFlags(t *testing.T) {
	for c, want := range map[rune]cpFlags{
		0x00: cfControl, 0x09: cfControl | cfSpace, 0x1C: cfControl, 0x20: cfSeparator | cfSpace,
		'!': cfPunct, '$': cfSymbol, '+': cfSymbol, '0': cfNumber, 'A': cfLetter, '^': cfSymbol, '_': cfPunct,
		'`': cfSymbol, '~': cfSymbol, 0x7F: cfControl, 0x85: cfControl | cfSpace, 0xA0: cfSeparator | cfSpace,
		0xAA: cfLetter, 0xAD: cfControl, 0xB2: cfNumber, 0xB5: cfLetter, 0x300: cfMark, 0x378: cfUndefined,
		0x897: cfUndefined, 0x1C89: cfUndefined, 0x1680: cfSeparator | cfSpace, 0x200B: cfControl,
		0x2028: cfSeparator | cfSpace, 0x2FFC: cfSymbol, 0x3000: cfSeparator | cfSpace, 0x31EF: cfSymbol,
		0x4E00: cfLetter, 0xD800: cfControl, 0xE000: cfControl, 0xFEFF: cfControl, 0xFF5E: cfSymbol,
		0xFFFE: cfUndefined, 0x1F999: cfSymbol, 0x2EBF0: cfLetter, 0x2EE5E: cfUndefined, 0xE0001: cfControl,
		0x10FFFD: cfControl, 0x10FFFE: cfUndefined, 0x110000: cfUndefined,
	} {
		if got := flagsOf(c); got != want {
			t.Errorf("flagsOf(%U) = %#x, want %#x", c, got, want)
		}
	}
	// The range table agrees with direct lookups everywhere.
	for c := rune(0); c <= unicode.MaxRune; c++ {
		want := categoryOf(c)
		if cpIsWhitespace(c) {
			want |= cfSpace
		}
		if got := flagsOf(c); got != want {
			t.Fatalf("flagsOf(%U) = %#x, direct lookup %#x", c, got, want)
		}
	}
}

// GPT-NeoX has no tests of its own: it must load and give back any text.
func TestBPERoundTrip(t *testing.T) {
	var texts []string
	for _, name := range []string{"ggml-vocab-llama-bpe", "ggml-vocab-gpt-2"} {
		for _, c := range readVocabCases(t, name) {
			texts = append(texts, c.text)
		}
	}
	texts = append(texts, "Hello, y'all! 12345 \u00a0 \n\n\t 我想在apple工作 🦙 ``~~ $$ x\u0301 <|endoftext|>")
	for _, name := range []string{"ggml-vocab-gpt-neox", "ggml-vocab-gpt-2", "ggml-vocab-starcoder"} {
		t.Run(name, func(t *testing.T) {
			tk, err := New(loadTestVocab(t, name))
			if err != nil {
				t.Fatal(err)
			}
			for _, text := range texts {
				var b strings.Builder
				for _, id := range tk.Encode(text, EncodeOptions{}) {
					b.WriteString(tk.Piece(id))
				}
				if b.String() != text {
					t.Errorf("%q comes back as %q", text, b.String())
				}
			}
		})
	}
}

func BenchmarkBPEEncode(b *testing.B) {
	v := loadTestVocab(b, "ggml-vocab-llama-bpe")
	enc, err := newBPE(v)
	if err != nil {
		b.Fatal(err)
	}
	text := strings.Repeat("Hello, y'all! How are you 😁 ?我想在apple工作1314151天～ The quick brown fox. ", 100)
	b.SetBytes(int64(len(text)))
	var out []ID
	for b.Loop() {
		out = enc.encode(text, out[:0])
	}
}

// One encoder serves many requests at once.
func TestBPEConcurrent(t *testing.T) {
	texts := []string{"Hello, y'all! 12345", "我想在apple工作 🦙\n\n  x", "a  b\tc 3.14 $$", strings.Repeat("word ", 50)}
	for _, pre := range []string{"deepseek-coder", "default", "llama-bpe"} {
		v := &Vocab{Model: "gpt2", Pre: pre, Tokens: append(byteTokens(), "ll", "Hell"), Merges: []string{"l l", "H e", "He ll"}}
		enc, err := newBPE(v)
		if err != nil {
			t.Fatal(err)
		}
		want := make([][]ID, len(texts))
		for i, s := range texts {
			want[i] = enc.encode(s, nil)
		}
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for n := range 200 {
					i := (g + n) % len(texts)
					if got := enc.encode(texts[i], nil); !slices.Equal(got, want[i]) {
						t.Errorf("%s: concurrent encode(%q) = %v, want %v", pre, texts[i], got, want[i])
						return
					}
				}
			})
		}
		wg.Wait()
	}
}
