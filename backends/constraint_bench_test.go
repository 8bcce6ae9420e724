package backends_test

import (
	"testing"
	"time"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/grammar"
	"github.com/ruvllm/ruvllm/internal/testmodel"
	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// benchSchema is a response format of the kind clients send: strings with
// and without bounds, bounded numbers, an enum, a list of objects.
const benchSchema = `{"type":"object","properties":{
	"title":{"type":"string","maxLength":60},"year":{"type":"integer","minimum":1900,"maximum":2100},
	"rating":{"type":"number","minimum":0,"maximum":10},"genre":{"enum":["drama","comedy","horror","documentary"]},
	"cast":{"type":"array","maxItems":4,"items":{"type":"object","properties":{"name":{"type":"string"},
		"role":{"type":"string","maxLength":30}},"required":["name","role"],"additionalProperties":false}},
	"summary":{"type":"string"}},
	"required":["title","year","rating","genre","cast","summary"],"additionalProperties":false}`

// BenchmarkConstraint measures what a JSON-schema constraint adds to a
// decode step, on stories260K and on the tinyllama-1.1b shape (Q4_0,
// random weights, its 32000-token vocabulary): each iteration is one
// decode step (Forward of one token), then the constraint's mask (cached
// or computed), the masked greedy draw and the constraint's advance, as
// the engine runs them; the output restarts with a fresh constraint (cold
// caches included) whenever it is complete or the context is full. It
// reports the mean decode time, the mean constraint time (Mask and Accept,
// plus what masking adds to the draw, measured against an unmasked draw of
// the same logits) and their ratio in percent.
func BenchmarkConstraint(b *testing.B) {
	for _, bm := range []struct {
		name  string
		model func(testing.TB) *models.Model
		opt   backends.Options
	}{
		{"stories260K", func(tb testing.TB) *models.Model { return testmodel.Shared(tb, "models", "stories260K.gguf") }, backends.Options{Threads: 1}},
		{"tinyllama-1.1b-Q4_0", func(tb testing.TB) *models.Model {
			return testmodel.Load(tb, testmodel.Synth(tb, "tinyllama-1.1b", "Q4_0"))
		}, backends.Options{Threads: 2}},
	} {
		b.Run(bm.name, func(b *testing.B) {
			m := bm.model(b)
			be := testmodel.Backend(b, "native", m, bm.opt)
			tok := m.Tokenizer
			g, err := grammar.JSONSchema([]byte(benchSchema))
			if err != nil {
				b.Fatal(err)
			}
			vocab := len(tok.Vocab().Tokens)
			pieces := make([]string, vocab)
			var eog []int32
			o := tokenizer.DecodeOptions{Continuation: true, NoCleanSpaces: true}
			for id := range vocab {
				pieces[id] = tok.Written(tokenizer.ID(id), o)
				if tok.IsEOG(tokenizer.ID(id)) {
					eog = append(eog, int32(id))
				}
			}
			gv := grammar.NewVocabulary(pieces, eog)
			seq, err := be.NewSequence(backends.SequenceOptions{MaxLen: 512})
			if err != nil {
				b.Fatal(err)
			}
			defer seq.Close()
			logits := make([]float32, vocab)
			mask := make([]uint64, gv.MaskWords())
			masked := backends.NewSampler(backends.Params{}, vocab)
			masked.SetMask(mask)
			plain := backends.NewSampler(backends.Params{}, vocab)
			prompt := tok.Encode("Describe a film in JSON:", tokenizer.EncodeOptions{AddSpecial: true})
			var matcher *grammar.Matcher
			next := make([]tokenizer.ID, 1)
			restart := func() {
				seq.Reset()
				if err := be.Forward([]backends.Step{{Seq: seq, Tokens: prompt, Logits: logits}}); err != nil {
					b.Fatal(err)
				}
				matcher = grammar.NewMatcher(g, gv)
			}
			restart()
			var decode, constraint, drawMasked, drawPlain time.Duration
			outputs, decodes := 0, 0
			for b.Loop() {
				t0 := time.Now()
				if !matcher.Mask(mask, 512-seq.Len()) {
					b.Fatal("nothing allowed")
				}
				t1 := time.Now()
				id := masked.Sample(logits)
				t2 := time.Now()
				plain.Sample(logits)
				t3 := time.Now()
				matcher.Accept(id)
				done := matcher.Complete() || seq.Len() >= 500
				t4 := time.Now()
				constraint += t1.Sub(t0) + t4.Sub(t3)
				drawMasked += t2.Sub(t1)
				drawPlain += t3.Sub(t2)
				if done {
					outputs++
					restart()
					continue
				}
				next[0] = id
				t5 := time.Now()
				if err := be.Forward([]backends.Step{{Seq: seq, Tokens: next, Logits: logits}}); err != nil {
					b.Fatal(err)
				}
				decode += time.Since(t5)
				decodes++
			}
			perToken := float64(constraint+drawMasked-drawPlain) / float64(b.N)
			perDecode := float64(decode) / float64(max(decodes, 1))
			b.ReportMetric(perDecode, "decode-ns/token")
			b.ReportMetric(perToken, "mask-ns/token")
			b.ReportMetric(100*perToken/perDecode, "mask-%-of-decode")
			b.ReportMetric(float64(outputs), "outputs")
		})
	}
}
