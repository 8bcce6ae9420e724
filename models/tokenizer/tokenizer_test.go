package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ruvllm/ruvllm/internal/shared"
)

func special(text string, typ TokenType) struct {
	text string
	typ  TokenType
} {
	return struct {
		text string
		typ  TokenType
	}{text, typ}
}

// chatFixture is an SPM vocabulary with ChatML-style control tokens, a
// shorter control token that overlaps one of them, and a user-defined token.
func chatFixture(t *testing.T, extra ...kv) *Tokenizer {
	t.Helper()
	return spmFixture{
		pieces: []string{"▁", "a", "b", "u", "s", "e", "r", "h", "i", "▁u", "▁us", "▁use", "▁user"},
		specials: []struct {
			text string
			typ  TokenType
		}{
			special("<|im_start|>", TokenControl),
			special("<|im_end|>", TokenControl),
			special("<|im", TokenControl),
			special("<tool>", TokenUserDefined),
		},
		extra: extra,
	}.tokenizer(t)
}

func TestSpecialTokenSplitting(t *testing.T) {
	tok := chatFixture(t)
	id := func(s string) ID { return tok.Vocab().IDs[s] }
	spm := func(s string) []ID { return tok.enc.encode(s, nil) }
	cat := func(parts ...[]ID) []ID { return slices.Concat(parts...) }
	one := func(s string) []ID { return []ID{id(s)} }

	tests := []struct {
		name string
		text string
		o    EncodeOptions
		want []ID
	}{
		{"control tokens split out, space prefix after each", "<|im_start|>user\nhi<|im_end|>", EncodeOptions{ParseSpecial: true},
			cat(one("<|im_start|>"), spm(" user\nhi"), one("<|im_end|>"))},
		{"control tokens are plain text without ParseSpecial", "<|im_start|>user\nhi<|im_end|>", EncodeOptions{},
			spm(" <|im_start|>user\nhi<|im_end|>")},
		{"BOS first", "<|im_start|>user", EncodeOptions{ParseSpecial: true, AddSpecial: true},
			cat(one("<s>"), one("<|im_start|>"), spm(" user"))},
		{"longest token first", "<|im_start|><|im<|im_end|>", EncodeOptions{ParseSpecial: true},
			cat(one("<|im_start|>"), one("<|im"), one("<|im_end|>"))},
		{"adjacent and repeated", "a<|im_end|><|im_end|>b", EncodeOptions{ParseSpecial: true},
			cat(spm(" a"), one("<|im_end|>"), one("<|im_end|>"), spm(" b"))},
		{"user-defined tokens split either way", "a<tool>b", EncodeOptions{},
			cat(spm(" a"), one("<tool>"), spm(" b"))},
		{"unknown token text with ParseSpecial", "a<unk>", EncodeOptions{ParseSpecial: true},
			cat(spm(" a"), one("<unk>"))},
		{"only a special token", "<|im_end|>", EncodeOptions{ParseSpecial: true}, one("<|im_end|>")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tok.Encode(tt.text, tt.o); !slices.Equal(got, tt.want) {
				t.Errorf("Encode(%q, %+v)\n got %v\nwant %v", tt.text, tt.o, got, tt.want)
			}
		})
	}
}

// TestPhi3Specials uses the real Phi-3 vocabulary: its chat tokens are
// control tokens, and llama.cpp strips the whitespace after them for models
// named Phi-3. Its </s> is a user-defined token, which llama.cpp matches in
// plain text too, and which does not end generation.
func TestPhi3Specials(t *testing.T) {
	tok := openTokenizer(t, "vocab", "ggml-vocab-phi-3.gguf")
	text := "<|user|>\nHello<|end|>\n<|assistant|>"
	got := tok.Encode(text, EncodeOptions{AddSpecial: true, ParseSpecial: true})
	if want := []ID{1, 32010, 15043, 32007, 32001}; !slices.Equal(got, want) {
		t.Errorf("with ParseSpecial: %v, want %v", got, want)
	}
	plain := tok.Encode(text, EncodeOptions{})
	for _, id := range []ID{32010, 32007, 32001} {
		if slices.Contains(plain, id) {
			t.Errorf("without ParseSpecial the encoding %v holds special id %d", plain, id)
		}
	}
	if got := tok.Decode(plain); got != text {
		t.Errorf("Decode(plain) = %q", got)
	}
	if got := tok.Encode("a</s>b", EncodeOptions{}); !slices.Contains(got, 2) {
		t.Errorf("without ParseSpecial the user-defined </s> is not matched: %v", got)
	}
	for id, want := range map[ID]bool{32000: true, 32007: true, 2: false, 32001: false, 32010: false, 15043: false} {
		if tok.IsEOG(id) != want {
			t.Errorf("IsEOG(%d) = %v, want %v", id, !want, want)
		}
	}
}

func TestIsEOG(t *testing.T) {
	tok := chatFixture(t)
	v := tok.Vocab()
	tests := []struct {
		text string
		want bool
	}{
		{"</s>", true}, {"<|im_end|>", true}, {"<|im_start|>", false}, {"<s>", false}, {"a", false},
	}
	for _, tt := range tests {
		if got := tok.IsEOG(v.IDs[tt.text]); got != tt.want {
			t.Errorf("IsEOG(%q) = %v, want %v", tt.text, got, tt.want)
		}
	}
	if v.EOT != v.IDs["<|im_end|>"] {
		t.Errorf("EOT = %d, want <|im_end|>", v.EOT)
	}
	if tok.IsEOG(-1) || tok.IsEOG(1<<30) {
		t.Error("IsEOG of an invalid id")
	}
}

func TestNewRejectsInconsistentVocab(t *testing.T) {
	good := func() *Vocab {
		return &Vocab{Model: "llama", Tokens: []string{"<unk>", "<s>", "</s>", "a"}, BOS: 1, EOS: 2, UNK: 0}
	}
	if _, err := New(good()); err != nil {
		t.Fatalf("a minimal vocabulary: %v", err)
	}
	tests := []struct {
		name   string
		mutate func(v *Vocab)
	}{
		{"no tokens", func(v *Vocab) { v.Tokens = nil }},
		{"short scores", func(v *Vocab) { v.Scores = []float32{0} }},
		{"short types", func(v *Vocab) { v.Types = []TokenType{1} }},
		{"unsupported model", func(v *Vocab) { v.Model = "t5" }},
		{"AddBOS without BOS", func(v *Vocab) { v.AddBOS, v.BOS = true, 99 }},
		{"id out of range", func(v *Vocab) { v.IDs = map[string]ID{"a": 4} }},
	}
	t.Run("empty special token", func(t *testing.T) {
		v := good()
		v.Tokens = append(v.Tokens, "")
		v.Types = []TokenType{TokenUnknown, TokenControl, TokenControl, TokenNormal, TokenControl}
		tok, err := New(v)
		if err != nil {
			t.Fatal(err)
		}
		if got := tok.Encode("a", EncodeOptions{ParseSpecial: true}); len(got) == 0 {
			t.Error("no ids")
		}
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := good()
			tt.mutate(v)
			if _, err := New(v); err == nil {
				t.Error("New succeeded")
			}
		})
	}
}

func TestConcurrentUse(t *testing.T) {
	tok := chatFixture(t)
	want := tok.Encode("<|im_start|>user a<tool>b", EncodeOptions{ParseSpecial: true})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				got := tok.Encode("<|im_start|>user a<tool>b", EncodeOptions{ParseSpecial: true})
				if !slices.Equal(got, want) {
					t.Errorf("got %v, want %v", got, want)
					return
				}
				_ = tok.Decode(got)
			}
		})
	}
	wg.Wait()
}

// TestReferencePrompts checks the prompt ids llama.cpp evaluated for the
// reference outputs: BOS added, special tokens parsed.
func TestReferencePrompts(t *testing.T) {
	dir := shared.Path(t, "reference")
	files, err := filepath.Glob(filepath.Join(dir, "*", "*.logits.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no reference files (%v)", err)
	}
	tokenizers := map[string]*Tokenizer{}
	for _, file := range files {
		model := filepath.Base(filepath.Dir(file))
		t.Run(model+"/"+filepath.Base(file), func(t *testing.T) {
			var ref struct {
				Prompt       string `json:"prompt"`
				PromptTokens []ID   `json:"prompt_tokens"`
			}
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &ref); err != nil {
				t.Fatal(err)
			}
			tok, ok := tokenizers[model]
			if !ok {
				path := []string{"models", model + ".gguf"}
				if strings.HasPrefix(model, "mini-") {
					path = []string{"models", "mini", model + ".gguf"}
				}
				tok = openTokenizer(t, path...)
				tokenizers[model] = tok
			}
			got := tok.Encode(ref.Prompt, EncodeOptions{AddSpecial: true, ParseSpecial: true})
			if !slices.Equal(got, ref.PromptTokens) {
				t.Errorf("Encode(%q) = %v, want %v", ref.Prompt, got, ref.PromptTokens)
			}
		})
	}
}

func TestEncodeContinuation(t *testing.T) {
	tok := chatFixture(t)
	o := EncodeOptions{AddSpecial: true}
	cases := []struct{ prompt, completion string }{
		{"a user", " use"},
		{"ab", "ba"},
		{"us", "er"}, // "user" merges across the boundary: encoded alone
	}
	for _, c := range cases {
		t.Run(c.prompt+"|"+c.completion, func(t *testing.T) {
			p := tok.Encode(c.prompt, o)
			got := tok.EncodeContinuation(p, c.prompt, c.completion, o)
			full := tok.Encode(c.prompt+c.completion, o)
			if slices.Equal(full[:len(p)], p) && !slices.Equal(append(slices.Clone(p), got...), full) {
				t.Errorf("prompt %v + continuation %v, the joined text is %v", p, got, full)
			}
			if len(got) == 0 {
				t.Errorf("no tokens for %q", c.completion)
			}
		})
	}
}
