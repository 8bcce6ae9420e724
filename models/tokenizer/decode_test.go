package tokenizer

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCleanSpaces(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{" ", " "},
		{"hello , world !", "hello, world!"},
		{"a . b ? c", "a. b? c"},
		{"  ,", " ,"}, // one space goes per mark
		{" ,", ","},
		{"a ' b", "a'b"}, // " ' " closes up
		{"it 's", "it's"},
		{"i 'm", "i'm"},
		{"we 're", "we're"},
		{"you 've", "you've"},
		{"don 't", "don 't"}, // llama.cpp leaves 't, 'd and 'll alone
		{"i 'll", "i 'll"},
		{"a ' ' b", "a'' b"},
		{"a 's", "a's"},
		{"ab '", "ab '"},
	}
	for _, tt := range tests {
		if got := string(cleanSpaces([]byte(tt.in))); got != tt.want {
			t.Errorf("cleanSpaces(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestDecodeOptions(t *testing.T) {
	tok := chatFixture(t)
	id := func(s string) ID { return tok.Vocab().IDs[s] }
	hi := tok.Encode("user hi", EncodeOptions{}) // ▁user ▁ h i
	withBOS := append([]ID{id("<s>")}, hi...)
	tests := []struct {
		name string
		ids  []ID
		o    DecodeOptions
		want string
	}{
		{"space prefix stripped", hi, DecodeOptions{}, "user hi"},
		{"continuation keeps it", hi, DecodeOptions{Continuation: true}, " user hi"},
		// llama.cpp: BOS decodes to nothing but uses up the strip.
		{"BOS skipped", withBOS, DecodeOptions{}, " user hi"},
		{"BOS rendered", withBOS, DecodeOptions{RenderSpecial: true}, "<s> user hi"},
		{"BOS removed", withBOS, DecodeOptions{RemoveSpecial: true}, " user hi"},
		{"EOS kept when not added", append(hi, id("</s>")), DecodeOptions{RemoveSpecial: true, RenderSpecial: true}, "user hi</s>"},
		{"control tokens skipped", []ID{id("<|im_start|>"), id("a"), id("<|im_end|>")}, DecodeOptions{}, "a"},
		{"control tokens rendered", []ID{id("<|im_start|>"), id("a"), id("<|im_end|>")}, DecodeOptions{RenderSpecial: true}, "<|im_start|>a<|im_end|>"},
		{"user-defined tokens always rendered", []ID{id("a"), id("<tool>")}, DecodeOptions{}, "a<tool>"},
		{"chosen control tokens rendered", []ID{id("<|im_start|>"), id("a"), id("<|im_end|>")}, DecodeOptions{Render: []ID{id("<|im_end|>")}}, "a<|im_end|>"},
		{"byte tokens are raw bytes", []ID{id("<0xE4>"), id("<0xBD>"), id("<0xA0>")}, DecodeOptions{}, "你"},
		{"invalid ids decode to nothing", []ID{-1, id("a"), 1 << 30}, DecodeOptions{}, "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tok.DecodeWith(tt.ids, tt.o); got != tt.want {
				t.Errorf("DecodeWith(%v, %+v) = %q, want %q", tt.ids, tt.o, got, tt.want)
			}
		})
	}
}

func TestDecodeRemoveSpecialEOS(t *testing.T) {
	tok := spmFixture{pieces: []string{"▁", "a"}, extra: []kv{{keyAddEOS, true}}}.tokenizer(t)
	ids := tok.Encode("a", EncodeOptions{AddSpecial: true})
	if n := len(ids); n != 4 || ids[0] != 1 || ids[n-1] != 2 {
		t.Fatalf("Encode = %v, want BOS ▁ a EOS", ids)
	}
	if got := tok.DecodeWith(ids, DecodeOptions{RemoveSpecial: true, RenderSpecial: true}); got != " a" {
		t.Errorf("RemoveSpecial: %q", got)
	}
	if got := tok.DecodeWith(ids, DecodeOptions{RenderSpecial: true}); got != "<s> a</s>" {
		t.Errorf("RenderSpecial: %q", got)
	}
	// The streaming decoder holds an EOS back until it knows it is not last.
	mid := []ID{1, 2, ids[2], 2}
	for _, o := range []DecodeOptions{{RemoveSpecial: true, RenderSpecial: true}, {RenderSpecial: true}, {RemoveSpecial: true}} {
		want := tok.DecodeWith(mid, o)
		if got := stream(tok.NewDecoderWith(o), mid); got != want {
			t.Errorf("%+v: streamed %q, want %q", o, got, want)
		}
	}
}

func TestPiece(t *testing.T) {
	tok := chatFixture(t)
	v := tok.Vocab()
	tests := []struct {
		id   ID
		want string
	}{
		{v.IDs["▁user"], " user"},
		{v.IDs["<0x0A>"], "\n"},
		{v.IDs["<|im_start|>"], "<|im_start|>"},
		{v.IDs["<unk>"], "<unk>"},
		{-1, ""},
		{ID(len(v.Tokens)), ""},
	}
	for _, tt := range tests {
		if got := tok.Piece(tt.id); got != tt.want {
			t.Errorf("Piece(%d) = %q, want %q", tt.id, got, tt.want)
		}
	}
}

// stream runs ids through d and concatenates what it emits, failing on any
// invalid UTF-8.
func stream(d *Decoder, ids []ID) string {
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(d.Add(id))
	}
	b.WriteString(d.Flush())
	return b.String()
}

// emojiCJK is text whose characters are mostly not tokens of a small
// vocabulary, so they are encoded as byte tokens.
const emojiCJK = "😀 你好, 世界! 👩‍👩‍👧 🇯🇵 日本語のテキスト 🎉🎉 한국어 ∑ end"

func TestDecoderNeverSplitsCharacters(t *testing.T) {
	small := spmFixture{pieces: []string{"▁", "e", "n", "d", ",", "!"}}.tokenizer(t)
	for name, tok := range map[string]*Tokenizer{"byte tokens": small, "llama-spm": nil} {
		t.Run(name, func(t *testing.T) {
			if tok == nil {
				tok = openTokenizer(t, "vocab", "ggml-vocab-llama-spm.gguf")
			}
			ids := tok.Encode(emojiCJK, EncodeOptions{})
			want := tok.Decode(ids)
			if want != emojiCJK {
				t.Fatalf("Decode = %q", want)
			}
			for _, o := range []DecodeOptions{{}, {Continuation: true}} {
				d := tok.NewDecoderWith(o)
				var b strings.Builder
				held := 0
				for _, id := range ids {
					s := d.Add(id)
					if !utf8.ValidString(s) {
						t.Fatalf("Add(%d) emitted invalid UTF-8 %q", id, s)
					}
					if s == "" && tok.Piece(id) != "" {
						held++
					}
					b.WriteString(s)
				}
				b.WriteString(d.Flush())
				wantStream := want
				if o.Continuation {
					wantStream = " " + emojiCJK // the space prefix is kept
				}
				if b.String() != wantStream {
					t.Errorf("%+v: streamed %q, want %q", o, b.String(), wantStream)
				}
				if held == 0 {
					t.Error("no token was held back: the text was not split into byte tokens")
				}
			}
		})
	}
}

func TestDecoderFlushesBrokenUTF8(t *testing.T) {
	tok := spmFixture{}.tokenizer(t)
	id := func(s string) ID { return tok.Vocab().IDs[s] }
	d := tok.NewDecoderWith(DecodeOptions{Continuation: true})
	if s := d.Add(id("<0xE4>")) + d.Add(id("<0xBD>")); s != "" {
		t.Errorf("an unfinished character was emitted: %q", s)
	}
	if s := d.Flush(); s != "\uFFFD" {
		t.Errorf("Flush = %q, want U+FFFD", s)
	}
	// A byte that can never start a character comes out at once, replaced.
	if s := d.Add(id("<0xFF>")) + d.Add(id("<0x41>")); s != "\uFFFDA" {
		t.Errorf("got %q", s)
	}
}

// TestDecoderCleanSpaces streams random sequences of pieces that exercise
// the space clean-up and compares with decoding them whole.
func TestDecoderCleanSpaces(t *testing.T) {
	pieces := []string{"▁'", "'", "▁s", "s", "▁re", "re", "▁ve", "▁m", "m", "▁,", ",", "▁.", "▁!", "▁?", "▁t", "▁ll", "▁a", "a", "▁"}
	tok := bertFixture(t, pieces...)
	first := len(tok.Vocab().Tokens) - len(pieces)
	r := rand.New(rand.NewPCG(1, 2))
	for n := range 2000 {
		ids := make([]ID, r.IntN(12))
		for i := range ids {
			ids[i] = ID(first + r.IntN(len(pieces)))
		}
		want := tok.Decode(ids)
		if got := stream(tok.NewDecoder(), ids); got != want {
			t.Fatalf("case %d %v: streamed %q, decoded %q", n, ids, got, want)
		}
		// Without the clean-up the pieces just concatenate.
		o := DecodeOptions{NoCleanSpaces: true, Continuation: true}
		var raw strings.Builder
		for _, id := range ids {
			raw.WriteString(tok.Written(id, o))
		}
		if got := stream(tok.NewDecoderWith(o), ids); got != raw.String() || tok.DecodeWith(ids, o) != raw.String() {
			t.Fatalf("case %d %v: without clean-up streamed %q, want %q", n, ids, got, raw.String())
		}
	}
}

// TestDecoderMatchesDecodeOnVocabFiles streams the encodings of llama.cpp's
// test strings with every shared vocabulary (BPE ones included, whose space
// clean-up the decoder must reproduce piece by piece).
func TestDecoderMatchesDecodeOnVocabFiles(t *testing.T) {
	texts := llamaCppTexts(t)
	if len(texts) == 0 {
		t.Skip("shared vocab test strings are absent")
	}
	for _, name := range []string{
		"ggml-vocab-llama-spm.gguf", "ggml-vocab-phi-3.gguf", "ggml-vocab-baichuan.gguf", "ggml-vocab-bert-bge.gguf",
		"ggml-vocab-gpt-2.gguf", "ggml-vocab-gpt-neox.gguf", "ggml-vocab-starcoder.gguf",
		"ggml-vocab-deepseek-coder.gguf", "ggml-vocab-llama-bpe.gguf",
	} {
		t.Run(name, func(t *testing.T) {
			tok := openTokenizer(t, "vocab", name)
			for _, text := range texts {
				for _, o := range []EncodeOptions{{}, {AddSpecial: true, ParseSpecial: true}} {
					ids := tok.Encode(text, o)
					for _, do := range []DecodeOptions{{}, {RenderSpecial: true, RemoveSpecial: true}} {
						want := tok.DecodeWith(ids, do)
						if got := stream(tok.NewDecoderWith(do), ids); got != want {
							t.Errorf("%q %+v %+v: streamed %q, decoded %q", text, o, do, got, want)
						}
					}
				}
			}
		})
	}
}
