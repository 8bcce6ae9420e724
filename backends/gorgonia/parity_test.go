package gorgonia

import (
	"math"
	"testing"

	"github.com/ruvllm/ruvllm/backends"
	_ "github.com/ruvllm/ruvllm/backends/native"
	"github.com/ruvllm/ruvllm/internal/testmodel"
	"github.com/ruvllm/ruvllm/kvcache"
	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// relDev is the largest |a−b| over the largest |b|: how far logits a are
// from logits b relative to their scale.
func relDev(a, b []float32) float64 {
	dev, scale := 0.0, 0.0
	for i := range b {
		dev = max(dev, math.Abs(float64(a[i]-b[i])))
		scale = max(scale, math.Abs(float64(b[i])))
	}
	return dev / scale
}

func argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

// runGreedy decodes n tokens greedily after prompt on b and returns the
// ids and each step's logits.
func runGreedy(t *testing.T, b backends.Backend, prompt []tokenizer.ID, n int, kv kvcache.Precision) ([]int, [][]float32) {
	t.Helper()
	seq, err := b.NewSequence(backends.SequenceOptions{MaxLen: len(prompt) + n, KV: kv})
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()
	vocab := b.Model().VocabSize
	var ids []int
	var all [][]float32
	toks := prompt
	for range n {
		logits := make([]float32, vocab)
		if err := b.Forward([]backends.Step{{Seq: seq, Tokens: toks, Logits: logits}}); err != nil {
			t.Fatal(err)
		}
		id := argmax(logits)
		ids = append(ids, id)
		all = append(all, logits)
		toks = []tokenizer.ID{tokenizer.ID(id)}
	}
	return ids, all
}

// TestParityWithNative runs the same greedy decode on the native backend and
// this one, with F32 keys and values, and compares ids and logits.
func TestParityWithNative(t *testing.T) {
	cases := []struct {
		name  string
		model func(t *testing.T) *models.Model
	}{
		{"tiny", func(t *testing.T) *models.Model { return testmodel.Tiny(t) }},
		{"stories260K", func(t *testing.T) *models.Model { return testmodel.Shared(t, "models", "stories260K.gguf") }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := c.model(t)
			nat := testmodel.Backend(t, "native", m, backends.Options{Threads: 1})
			gor := testmodel.Backend(t, "gorgonia", m, backends.Options{Threads: 1})
			prompt := m.Tokenizer.Encode("Once upon a time", tokenizer.EncodeOptions{AddSpecial: true})
			want, wl := runGreedy(t, nat, prompt, 16, kvcache.F32)
			got, gl := runGreedy(t, gor, prompt, 16, kvcache.F32)
			worst := 0.0
			for i := range want {
				worst = max(worst, relDev(gl[i], wl[i]))
				if got[i] != want[i] {
					t.Errorf("step %d: gorgonia chose %d, native %d", i, got[i], want[i])
				}
			}
			t.Logf("largest relative logit deviation %.3g", worst)
			if worst > 1e-4 {
				t.Errorf("logits deviate by %.3g relative, more than 1e-4", worst)
			}
		})
	}
}
