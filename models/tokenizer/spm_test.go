package tokenizer

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ruvllm/ruvllm/internal/shared"
	"github.com/ruvllm/ruvllm/models/gguf"
)

// llamaCppCase is one of llama.cpp's tokenizer test vectors.
type llamaCppCase struct {
	text string
	ids  []ID
}

// llamaCppCases reads NAME.gguf.inp and NAME.gguf.out from the shared vocab
// directory: cases separated by "\n__ggml_vocab_test__\n", one line of ids per
// case (the empty piece after the last separator has none).
func llamaCppCases(t *testing.T, name string) []llamaCppCase {
	t.Helper()
	inp, err := os.ReadFile(shared.Path(t, "vocab", name+".inp"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(shared.Path(t, "vocab", name+".out"))
	if err != nil {
		t.Fatal(err)
	}
	texts := strings.Split(string(inp), "\n__ggml_vocab_test__\n")
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(texts) != len(lines)+1 || texts[len(texts)-1] != "" {
		t.Fatalf("%s: %d cases for %d lines of ids", name, len(texts), len(lines))
	}
	cases := make([]llamaCppCase, len(lines))
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

// openTokenizer builds the tokenizer of a GGUF file under the shared directory.
func openTokenizer(t testing.TB, parts ...string) *Tokenizer {
	t.Helper()
	f, err := gguf.Open(shared.Path(t, parts...))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tok, err := FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func equalIDs(a, b []ID) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// checkLlamaCppCases checks every llama.cpp test vector of a vocabulary file:
// the same ids, from plain text, without BOS.
func checkLlamaCppCases(t *testing.T, name string) {
	tok := openTokenizer(t, "vocab", name)
	cases := llamaCppCases(t, name)
	failed := 0
	for i, c := range cases {
		got := tok.Encode(c.text, EncodeOptions{})
		if !equalIDs(got, c.ids) {
			failed++
			t.Errorf("case %d %q:\n got %v\nwant %v", i, c.text, got, c.ids)
		}
	}
	t.Logf("%s: %d/%d cases identical to llama.cpp", name, len(cases)-failed, len(cases))
}

func TestSPMLlamaCppCases(t *testing.T) {
	for _, name := range []string{"ggml-vocab-llama-spm.gguf", "ggml-vocab-phi-3.gguf"} {
		t.Run(name, func(t *testing.T) { checkLlamaCppCases(t, name) })
	}
}

// idsOf maps token texts to their ids in tok.
func idsOf(t *testing.T, tok *Tokenizer, texts ...string) []ID {
	t.Helper()
	ids := make([]ID, len(texts))
	for i, s := range texts {
		id, ok := tok.Vocab().IDs[s]
		if !ok {
			t.Fatalf("no token %q", s)
		}
		ids[i] = id
	}
	return ids
}

func TestSPMMerges(t *testing.T) {
	tests := []struct {
		name   string
		fx     spmFixture
		text   string
		pieces []string // expected token texts
	}{
		{"merges to the longest token", spmFixture{
			pieces: []string{"a", "b", "c", "ab", "bc", "abc"},
			scores: map[string]float32{"ab": -1, "bc": -2, "abc": -3},
		}, "abc", []string{"abc"}},
		{"best score first", spmFixture{
			pieces: []string{"a", "b", "c", "ab", "bc"},
			scores: map[string]float32{"ab": -5, "bc": -1},
		}, "abc", []string{"a", "bc"}},
		{"ties go to the leftmost pair", spmFixture{
			pieces: []string{"a", "aa"},
		}, "aaa", []string{"aa", "a"}},
		{"spaces become ▁", spmFixture{
			pieces: []string{"a", "b", "▁", "▁b"},
			scores: map[string]float32{"▁b": -1},
		}, "a b", []string{"a", "▁b"}},
		{"unknown characters fall back to bytes", spmFixture{
			pieces: []string{"a"},
		}, "aé", []string{"a", "<0xC3>", "<0xA9>"}},
		{"without byte tokens unknown characters are UNK", spmFixture{
			pieces:  []string{"a"},
			noBytes: true,
		}, "aéa", []string{"a", "<unk>", "<unk>", "a"}},
		{"invalid UTF-8 falls back to bytes", spmFixture{
			pieces: []string{"a"},
		}, "\xff\xe4a", []string{"<0xFF>", "<0xE4>", "<0x61>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok := tt.fx.tokenizer(t)
			got := tok.enc.encode(tt.text, nil)
			if want := idsOf(t, tok, tt.pieces...); !equalIDs(got, want) {
				t.Errorf("encode(%q) = %v, want %v %q", tt.text, got, want, tt.pieces)
			}
		})
	}
}

func TestSPMSpacePrefixAndBOS(t *testing.T) {
	tok := spmFixture{pieces: []string{"▁", "h", "i", "▁h", "▁hi"}}.tokenizer(t)
	tests := []struct {
		text   string
		o      EncodeOptions
		pieces []string
	}{
		{"hi", EncodeOptions{}, []string{"▁hi"}},
		{"hi", EncodeOptions{AddSpecial: true}, []string{"<s>", "▁hi"}},
		{"", EncodeOptions{AddSpecial: true}, []string{"<s>"}},
		{"", EncodeOptions{}, nil},
		{" hi", EncodeOptions{}, []string{"▁", "▁hi"}},
	}
	for _, tt := range tests {
		got := tok.Encode(tt.text, tt.o)
		if want := idsOf(t, tok, tt.pieces...); !equalIDs(got, want) {
			t.Errorf("Encode(%q, %+v) = %v, want %v %q", tt.text, tt.o, got, want, tt.pieces)
		}
	}
}

// TestStories260KBOS checks the real stories260K vocabulary: with special
// tokens the encoding starts with BOS 1 and matches llama.cpp's ids.
func TestStories260KBOS(t *testing.T) {
	tok := openTokenizer(t, "models", "stories260K.gguf")
	got := tok.Encode("Once upon a time", EncodeOptions{AddSpecial: true, ParseSpecial: true})
	if want := []ID{1, 403, 407, 261, 378}; !equalIDs(got, want) {
		t.Fatalf("Encode = %v, want %v", got, want)
	}
	if s := tok.Decode(got); s != " Once upon a time" {
		// llama.cpp's detokenize: BOS renders as nothing but uses up the strip
		// of the space prefix.
		t.Errorf("Decode = %q", s)
	}
	if s := tok.DecodeWith(got[1:], DecodeOptions{}); s != "Once upon a time" {
		t.Errorf("Decode without BOS = %q", s)
	}
}

// TestSPMRoundTrip decodes the encoding of every llama.cpp test string with
// the SPM vocabularies, including baichuan, which has no test vectors.
func TestSPMRoundTrip(t *testing.T) {
	cases := llamaCppCases(t, "ggml-vocab-llama-spm.gguf")
	for _, name := range []string{"ggml-vocab-llama-spm.gguf", "ggml-vocab-phi-3.gguf", "ggml-vocab-baichuan.gguf"} {
		t.Run(name, func(t *testing.T) {
			tok := openTokenizer(t, "vocab", name)
			if tok.Vocab().Model != "llama" {
				t.Fatalf("model %q, want llama", tok.Vocab().Model)
			}
			for _, c := range cases {
				ids := tok.Encode(c.text, EncodeOptions{})
				if got := tok.Decode(ids); got != c.text {
					t.Errorf("Decode(Encode(%q)) = %q", c.text, got)
				}
			}
		})
	}
}

// FuzzSPMRoundTrip checks decode(encode(s)) == s on the llama SPM vocabulary
// for valid UTF-8 s, and that the streaming decoder gives the same text.
// Known exceptions, as in llama.cpp: the character ▁ (U+2581) itself is read
// as a space and decodes to " " (skipped here); invalid UTF-8 mostly
// round-trips through byte tokens, but an unfinished sequence just before a
// space swallows the bytes of its ▁, which then decode as "▁" (only checked
// not to panic).
func FuzzSPMRoundTrip(f *testing.F) {
	for _, c := range llamaCppCasesForFuzz(f) {
		f.Add(c)
	}
	f.Add("\xe4\xb8")
	f.Add("<s>hello</s> <unk>")
	tok := openTokenizer(f, "vocab", "ggml-vocab-llama-spm.gguf")
	f.Fuzz(func(t *testing.T, s string) {
		ids := tok.Encode(s, EncodeOptions{})
		got := tok.Decode(ids)
		if !utf8.ValidString(s) || strings.Contains(s, spaceMark) {
			return
		}
		if got != s {
			t.Fatalf("Decode(Encode(%q)) = %q (ids %v)", s, got, ids)
		}
		d := tok.NewDecoder()
		var b strings.Builder
		for _, id := range ids {
			b.WriteString(d.Add(id))
		}
		b.WriteString(d.Flush())
		if b.String() != s {
			t.Fatalf("streamed %q, want %q", b.String(), s)
		}
	})
}

// llamaCppCasesForFuzz returns the test strings as fuzz seeds, or none when
// the shared data is absent (the fuzz target then skips).
func llamaCppCasesForFuzz(f *testing.F) []string { return llamaCppTexts(f) }

func llamaCppTexts(testing.TB) []string {
	dir := shared.Dir()
	if dir == "" {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(dir, "vocab", "ggml-vocab-llama-spm.gguf.inp"))
	if err != nil {
		return nil
	}
	return strings.Split(string(b), "\n__ggml_vocab_test__\n")
}

func BenchmarkEncodeSPM(b *testing.B) {
	tok := openTokenizer(b, "vocab", "ggml-vocab-llama-spm.gguf")
	text := strings.Repeat(strings.Join(llamaCppTexts(b), " "), 10)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		tok.Encode(text, EncodeOptions{AddSpecial: true, ParseSpecial: true})
	}
}
