package grammar

import (
	"math/rand/v2"
	"testing"

	"github.com/ruvllm/ruvllm/internal/testmodel"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// BenchmarkMask replays outputs of random walks through a schema with a
// real vocabulary, a fresh Matcher for each output (cold caches
// included): one op is one token's Mask and Accept.
func BenchmarkMask(b *testing.B) {
	schema := `{"type":"object","properties":{
	"title":{"type":"string","maxLength":60},"year":{"type":"integer","minimum":1900,"maximum":2100},
	"rating":{"type":"number","minimum":0,"maximum":10},"genre":{"enum":["drama","comedy","horror","documentary"]},
	"cast":{"type":"array","maxItems":4,"items":{"type":"object","properties":{"name":{"type":"string"},
		"role":{"type":"string","maxLength":30}},"required":["name","role"],"additionalProperties":false}},
	"summary":{"type":"string"}},
	"required":["title","year","rating","genre","cast","summary"],"additionalProperties":false}`
	for _, path := range [][]string{{"models", "stories260K.gguf"}, {"models", "llama-2-tiny-random.gguf"}} {
		b.Run(path[len(path)-1], func(b *testing.B) {
			tok := testmodel.Shared(b, path...).Tokenizer
			n := len(tok.Vocab().Tokens)
			pieces := make([]string, n)
			var eog []int32
			for id := range n {
				pieces[id] = tok.Written(tokenizer.ID(id), tokenizer.DecodeOptions{Continuation: true, NoCleanSpaces: true})
				if tok.IsEOG(tokenizer.ID(id)) {
					eog = append(eog, int32(id))
				}
			}
			v := NewVocabulary(pieces, eog)
			g, err := JSONSchema([]byte(schema))
			if err != nil {
				b.Fatal(err)
			}
			r := rand.New(rand.NewPCG(1, 2))
			var outputs [][]int32
			mask := make([]uint64, v.MaskWords())
			for range 8 {
				m := NewMatcher(g, v)
				var out []int32
				for left := 300; left > 0 && !m.Complete(); left-- {
					m.Mask(mask, left)
					var allowed []int32
					for id := range n {
						if mask[id>>6]&(1<<(id&63)) != 0 {
							allowed = append(allowed, int32(id))
						}
					}
					id := allowed[r.IntN(len(allowed))]
					if v.isEOG[id] {
						break
					}
					m.Accept(id)
					out = append(out, id)
				}
				outputs = append(outputs, out)
			}
			var m *Matcher
			o, i := 0, 0
			for b.Loop() {
				if m == nil || i == len(outputs[o]) {
					o, i = (o+1)%len(outputs), 0
					m = NewMatcher(g, v)
				}
				m.Mask(mask, 300-i)
				m.Accept(outputs[o][i])
				i++
			}
		})
	}
}
