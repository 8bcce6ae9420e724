package testmodel

import (
	"fmt"
	"testing"

	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// Words are the normal pieces of WordTokenizer's vocabulary, after <unk>,
// <s>, </s> and the 256 byte tokens. "▁" is SentencePiece's space.
var Words = []string{"▁Hello", "▁world", "ST", "OP", "!", "▁here", "▁S", "TOP", "▁the", "▁end", "<", "|", ">", "im", "_", "start", "end", "user", "assistant", "system", "▁"}

// WordTokenizer is an SPM tokenizer over a small hand-made vocabulary with
// byte fallback, so that any text encodes: for tests of what surrounds a
// model (the API, the session) with a fake engine.
func WordTokenizer(tb testing.TB) *tokenizer.Tokenizer {
	tb.Helper()
	v := &tokenizer.Vocab{
		Model: "llama",
		BOS:   1, EOS: 2, UNK: 0, EOT: -1, EOM: -1, PAD: -1, SEP: -1, CLS: -1, MASK: -1,
		FIMPre: -1, FIMSuf: -1, FIMMid: -1, FIMPad: -1, FIMRep: -1, FIMSep: -1,
		AddBOS: true, AddSpacePrefix: true,
	}
	add := func(s string, typ tokenizer.TokenType, score float32) {
		v.Tokens = append(v.Tokens, s)
		v.Types = append(v.Types, typ)
		v.Scores = append(v.Scores, score)
	}
	add("<unk>", tokenizer.TokenUnknown, 0)
	add("<s>", tokenizer.TokenControl, 0)
	add("</s>", tokenizer.TokenControl, 0)
	for b := range 256 {
		add(fmt.Sprintf("<0x%02X>", b), tokenizer.TokenByte, 0)
	}
	for i, w := range Words {
		add(w, tokenizer.TokenNormal, -float32(i))
	}
	tk, err := tokenizer.New(v)
	if err != nil {
		tb.Fatal(err)
	}
	return tk
}

// IDs maps pieces of tk's vocabulary ("▁Hello", or a byte "<0xC3>") to
// their token ids.
func IDs(tb testing.TB, tk *tokenizer.Tokenizer, pieces ...string) []tokenizer.ID {
	tb.Helper()
	out := make([]tokenizer.ID, len(pieces))
	for i, p := range pieces {
		id, ok := tk.Vocab().IDs[p]
		if !ok {
			tb.Fatalf("piece %q is not in the test vocabulary", p)
		}
		out[i] = id
	}
	return out
}
