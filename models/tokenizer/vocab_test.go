package tokenizer

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/ruvllm/ruvllm/models/gguf"
)

// kv is one metadata entry of a fixture file.
type kv struct {
	key   string
	value any
}

// kvFile writes a tensorless GGUF file holding kvs and parses it back.
func kvFile(t testing.TB, kvs ...kv) *gguf.File {
	t.Helper()
	w := gguf.NewWriter()
	for _, e := range kvs {
		if err := w.Set(e.key, e.value); err != nil {
			t.Fatalf("set %s: %v", e.key, err)
		}
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// spmFixture describes a small SentencePiece vocabulary: <unk> <s> </s>, the
// 256 byte tokens (unless noBytes), then pieces (normal, score -1 each unless
// scores says otherwise) and specials (with their types).
type spmFixture struct {
	pieces   []string
	scores   map[string]float32
	specials []struct {
		text string
		typ  TokenType
	}
	noBytes bool
	extra   []kv
}

func (fx spmFixture) file(t testing.TB) *gguf.File {
	t.Helper()
	tokens := []string{"<unk>", "<s>", "</s>"}
	types := []int32{int32(TokenUnknown), int32(TokenControl), int32(TokenControl)}
	if !fx.noBytes {
		for b := range 256 {
			tokens = append(tokens, fmt.Sprintf("<0x%02X>", b))
			types = append(types, int32(TokenByte))
		}
	}
	for _, p := range fx.pieces {
		tokens = append(tokens, p)
		types = append(types, int32(TokenNormal))
	}
	for _, s := range fx.specials {
		tokens = append(tokens, s.text)
		types = append(types, int32(s.typ))
	}
	scores := make([]float32, len(tokens))
	for i, tok := range tokens {
		scores[i] = -1
		if s, ok := fx.scores[tok]; ok {
			scores[i] = s
		}
	}
	kvs := []kv{
		{"general.architecture", "llama"},
		{keyModel, "llama"},
		{keyTokens, tokens},
		{keyScores, scores},
		{keyTypes, types},
	}
	return kvFile(t, append(kvs, fx.extra...)...)
}

func (fx spmFixture) tokenizer(t testing.TB) *Tokenizer {
	t.Helper()
	tok, err := FromGGUF(fx.file(t))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// nTokens is a list of n distinct token texts.
func nTokens(n int) []string {
	toks := make([]string, n)
	for i := range toks {
		toks[i] = fmt.Sprintf("t%d", i)
	}
	return toks
}

func TestLoadVocabDefaults(t *testing.T) {
	tokens := nTokens(200)
	tests := []struct {
		name  string
		kvs   []kv
		check func(t *testing.T, v *Vocab)
	}{
		{"llama", []kv{{keyModel, "llama"}}, func(t *testing.T, v *Vocab) {
			if v.BOS != 1 || v.EOS != 2 || v.UNK != 0 || v.PAD != -1 || v.SEP != -1 {
				t.Errorf("ids BOS %d EOS %d UNK %d PAD %d SEP %d", v.BOS, v.EOS, v.UNK, v.PAD, v.SEP)
			}
			if !v.AddBOS || v.AddEOS || !v.AddSpacePrefix || v.CleanSpaces {
				t.Errorf("flags AddBOS %v AddEOS %v AddSpacePrefix %v CleanSpaces %v", v.AddBOS, v.AddEOS, v.AddSpacePrefix, v.CleanSpaces)
			}
		}},
		{"llama keys override", []kv{{keyModel, "llama"}, {keyAddBOS, false}, {keyAddPrefix, false},
			{"tokenizer.ggml.eos_token_id", uint32(7)}, {"tokenizer.ggml.padding_token_id", uint32(4294967295)}},
			func(t *testing.T, v *Vocab) {
				if v.AddBOS || v.AddSpacePrefix || v.EOS != 7 || v.PAD != -1 {
					t.Errorf("AddBOS %v AddSpacePrefix %v EOS %d PAD %d", v.AddBOS, v.AddSpacePrefix, v.EOS, v.PAD)
				}
			}},
		{"bert", []kv{{keyModel, "bert"}}, func(t *testing.T, v *Vocab) {
			if v.BOS != 101 || v.CLS != 101 || v.SEP != 102 || v.UNK != 100 || v.PAD != 0 || v.MASK != 103 || v.EOS != -1 {
				t.Errorf("ids BOS %d CLS %d SEP %d UNK %d PAD %d MASK %d EOS %d", v.BOS, v.CLS, v.SEP, v.UNK, v.PAD, v.MASK, v.EOS)
			}
			if !v.AddBOS || !v.AddSEP || v.AddSpacePrefix || !v.CleanSpaces || !v.Lowercase || !v.StripAccents {
				t.Errorf("flags %+v", v)
			}
		}},
		{"bert cased", []kv{{keyModel, "bert"}, {keyLowercase, false}}, func(t *testing.T, v *Vocab) {
			if v.Lowercase || v.StripAccents {
				t.Errorf("Lowercase %v StripAccents %v", v.Lowercase, v.StripAccents)
			}
		}},
		{"gpt2 llama-bpe", []kv{{keyModel, "gpt2"}, {keyPre, "llama-bpe"}}, func(t *testing.T, v *Vocab) {
			if !v.AddBOS || v.AddSpacePrefix || !v.CleanSpaces || v.BOS != 11 {
				t.Errorf("AddBOS %v AddSpacePrefix %v CleanSpaces %v BOS %d", v.AddBOS, v.AddSpacePrefix, v.CleanSpaces, v.BOS)
			}
		}},
		{"gpt2 qwen2", []kv{{keyModel, "gpt2"}, {keyPre, "qwen2"}}, func(t *testing.T, v *Vocab) {
			if v.AddBOS || v.CleanSpaces {
				t.Errorf("AddBOS %v CleanSpaces %v", v.AddBOS, v.CleanSpaces)
			}
		}},
		{"eot found by text", []kv{{keyModel, "gpt2"}, {keyPre, "qwen2"},
			{keyTokens, append(nTokens(150), "<|im_start|>", "<|im_end|>", "<|fim_pad|>")}}, func(t *testing.T, v *Vocab) {
			if v.EOT != 151 || v.FIMPad != 152 || v.EOM != -1 {
				t.Errorf("EOT %d FIMPad %d EOM %d", v.EOT, v.FIMPad, v.EOM)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kvs := append([]kv{{keyTokens, tokens}}, tt.kvs...)
			v, err := LoadVocab(kvFile(t, kvs...))
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, v)
		})
	}
}

func TestLoadVocabSmallVocabDisablesDefaults(t *testing.T) {
	v, err := LoadVocab(kvFile(t, kv{keyModel, "gpt2"}, kv{keyPre, "gpt-2"}, kv{keyTokens, nTokens(5)}))
	if err != nil {
		t.Fatal(err)
	}
	if v.BOS != -1 || v.EOS != -1 {
		t.Errorf("BOS %d EOS %d, want -1: the default 11 is outside a 5-token vocabulary", v.BOS, v.EOS)
	}
}

func TestLoadVocabRejectsBadMetadata(t *testing.T) {
	tokens := nTokens(10)
	tests := []struct {
		name string
		kvs  []kv
	}{
		{"no model", []kv{{keyTokens, tokens}}},
		{"no tokens", []kv{{keyModel, "llama"}}},
		{"tokens not strings", []kv{{keyModel, "llama"}, {keyTokens, []int32{1, 2}}}},
		{"empty tokens", []kv{{keyModel, "llama"}, {keyTokens, []string{}}}},
		{"unknown model", []kv{{keyModel, "martian"}, {keyTokens, tokens}}},
		{"no vocab", []kv{{keyModel, "none"}, {keyTokens, tokens}}},
		{"short scores", []kv{{keyModel, "llama"}, {keyTokens, tokens}, {keyScores, []float32{1, 2}}}},
		{"string scores", []kv{{keyModel, "llama"}, {keyTokens, tokens}, {keyScores, tokens}}},
		{"short types", []kv{{keyModel, "llama"}, {keyTokens, tokens}, {keyTypes, []int32{1}}}},
		{"scalar types", []kv{{keyModel, "llama"}, {keyTokens, tokens}, {keyTypes, int32(1)}}},
		{"merges not strings", []kv{{keyModel, "gpt2"}, {keyTokens, tokens}, {keyMerges, []int32{1}}}},
		{"add_bos without bos", []kv{{keyModel, "gpt2"}, {keyTokens, tokens}, {keyAddBOS, true}}},
		{"add_eos without eos", []kv{{keyModel, "gpt2"}, {keyTokens, tokens}, {keyAddEOS, true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadVocab(kvFile(t, tt.kvs...))
			if !errors.Is(err, ErrVocab) {
				t.Fatalf("err = %v, want ErrVocab", err)
			}
		})
	}
}

func TestLoadVocabEmptyAndDuplicateTokens(t *testing.T) {
	v, err := LoadVocab(kvFile(t, kv{keyModel, "llama"}, kv{keyTokens, []string{"a", "", "b", "a"}}))
	if err != nil {
		t.Fatal(err)
	}
	if v.Tokens[1] != "[EMPTY_1]" || v.IDs["[EMPTY_1]"] != 1 {
		t.Errorf("empty token became %q", v.Tokens[1])
	}
	if v.IDs["a"] != 0 {
		t.Errorf("IDs[a] = %d, want the first id 0", v.IDs["a"])
	}
	if len(v.Types) != 4 || v.Types[2] != TokenNormal || v.Scores != nil {
		t.Errorf("Types %v Scores %v, want all normal and nil", v.Types, v.Scores)
	}
}

func TestLoadVocabIntegerScores(t *testing.T) {
	v, err := LoadVocab(kvFile(t, kv{keyModel, "llama"}, kv{keyTokens, []string{"a", "b", "c"}}, kv{keyScores, []int32{-3, 0, 5}}))
	if err != nil {
		t.Fatal(err)
	}
	if v.Scores[0] != -3 || v.Scores[2] != 5 {
		t.Errorf("Scores %v", v.Scores)
	}
}
