package tokenizer

import (
	"slices"
	"testing"
)

func TestWPMLlamaCppCases(t *testing.T) {
	checkLlamaCppCases(t, "ggml-vocab-bert-bge.gguf")
}

// bertFixture is a small WordPiece vocabulary as llama.cpp's converter writes
// it: word-initial pieces with ▁, continuation pieces bare.
func bertFixture(t *testing.T, pieces ...string) *Tokenizer {
	t.Helper()
	tokens := append([]string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}, pieces...)
	types := make([]int32, len(tokens))
	for i := range types {
		types[i] = int32(TokenNormal)
		if i < 5 {
			types[i] = int32(TokenControl)
		}
	}
	tok, err := FromGGUF(kvFile(t,
		kv{keyModel, "bert"}, kv{keyTokens, tokens}, kv{keyTypes, types},
		kv{"tokenizer.ggml.padding_token_id", uint32(0)}, kv{"tokenizer.ggml.unknown_token_id", uint32(1)},
		kv{keyCLS, uint32(2)}, kv{"tokenizer.ggml.seperator_token_id", uint32(3)},
		kv{"tokenizer.ggml.mask_token_id", uint32(4)},
	))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestWPMWords(t *testing.T) {
	uncased := &wpm{lowercase: true, stripAccents: true}
	cased := &wpm{}
	tests := []struct {
		e    *wpm
		text string
		want []string
	}{
		{uncased, "Hello, World!", []string{"hello", ",", "world", "!"}},
		{uncased, "  Café\tnaïve\n", []string{"cafe", "naive"}},
		{uncased, "e\u0301te\u0301", []string{"ete"}}, // combining acute accents dropped
		{uncased, "你好abc", []string{"你", "好", "abc"}},
		{uncased, "a\x00b\u200bc\ufffdd\xffe", []string{"abcde"}}, // NUL, a format character, U+FFFD, invalid UTF-8
		{uncased, "$5 €5 a+b", []string{"$", "5", "€5", "a", "+", "b"}},
		{uncased, "ÅNGSTRÖM", []string{"angstrom"}},
		{cased, "Café Naïve", []string{"Café", "Naïve"}},
		{uncased, "", nil},
	}
	for _, tt := range tests {
		if got := tt.e.words(tt.text); !slices.Equal(got, tt.want) {
			t.Errorf("words(%q) = %q, want %q", tt.text, got, tt.want)
		}
	}
}

func TestWPMEncode(t *testing.T) {
	tok := bertFixture(t, "▁un", "▁unaff", "aff", "able", "▁hello", "▁,", "▁world", "▁!", "▁x", "y")
	tests := []struct {
		text   string
		o      EncodeOptions
		pieces []string
	}{
		{"unaffable", EncodeOptions{}, []string{"▁unaff", "able"}},
		{"Hello, world!", EncodeOptions{}, []string{"▁hello", "▁,", "▁world", "▁!"}},
		{"hello zzz world", EncodeOptions{}, []string{"▁hello", "[UNK]", "▁world"}},
		{"xyz", EncodeOptions{}, []string{"[UNK]"}}, // ▁x y match, z does not: the whole word is unknown
		{"hello", EncodeOptions{AddSpecial: true}, []string{"[CLS]", "▁hello", "[SEP]"}},
		{"", EncodeOptions{AddSpecial: true}, []string{"[CLS]", "[SEP]"}},
		{"hello [MASK] world", EncodeOptions{ParseSpecial: true}, []string{"▁hello", "[MASK]", "▁world"}},
	}
	for _, tt := range tests {
		got := tok.Encode(tt.text, tt.o)
		if want := idsOf(t, tok, tt.pieces...); !slices.Equal(got, want) {
			t.Errorf("Encode(%q, %+v) = %v, want %v %q", tt.text, tt.o, got, want, tt.pieces)
		}
	}
}

func TestWPMDecodeCleansSpaces(t *testing.T) {
	tok := bertFixture(t, "▁hello", "▁,", "▁world", "▁!", "▁it", "▁'", "▁s")
	ids := tok.Encode("Hello, world! it's", EncodeOptions{AddSpecial: true})
	// Pieces " hello" " ," " world" " !" " it" " '" " s": the space before
	// punctuation goes, and " ' " closes up. WordPiece has no space prefix to
	// strip, so the leading space stays, as in llama.cpp.
	if got, want := tok.Decode(ids), " hello, world! it's"; got != want {
		t.Errorf("Decode = %q, want %q", got, want)
	}
	if got, want := tok.DecodeWith(ids, DecodeOptions{RenderSpecial: true}), "[CLS] hello, world! it's[SEP]"; got != want {
		t.Errorf("DecodeWith(RenderSpecial) = %q, want %q", got, want)
	}
}
