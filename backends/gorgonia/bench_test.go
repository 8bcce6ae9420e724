package gorgonia

import (
	"testing"

	"github.com/ruvllm/ruvllm/internal/testmodel"
	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// BenchmarkUpdate is the cost of one online update on one feedback pair,
// as the MicroLoRA trainer takes it: the pair scored under the base model
// (Prepare) and a step of the objective, on a prompt of 12 tokens with
// completions of 3 and 1, the shape of ../shared/feedback's pairs. The
// margin target is out of reach (100 nats), so that every step is taken.
//
// llama-134m is the synthesized model of that shape (dim 768, 12 layers,
// vocab 32000; random weights, its token ids taken as they are).
func BenchmarkUpdate(b *testing.B) {
	for _, obj := range []Objective{Margin, DPO} {
		b.Run("stories260K/"+string(obj), func(b *testing.B) { benchUpdate(b, testmodel.Shared(b, "models", "stories260K.gguf"), obj) })
		b.Run("llama-134m/"+string(obj), func(b *testing.B) {
			benchUpdate(b, testmodel.Load(b, testmodel.Synth(b, "llama-134m", "Q8_0")), obj)
		})
	}
}

func benchUpdate(b *testing.B, m *models.Model, obj Objective) {
	model, err := NewModel(m.File, m.Config)
	if err != nil {
		b.Fatal(err)
	}
	tr, err := NewTrainer(model, TrainOptions{Margin: 100})
	if err != nil {
		b.Fatal(err)
	}
	ex := Example{
		Prompt:   []tokenizer.ID{1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315},
		Chosen:   []tokenizer.ID{301, 425, 411},
		Rejected: []tokenizer.ID{317},
	}
	// The first update compiles the graphs.
	s, err := tr.Prepare(obj, ex)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := tr.Step(obj, []Scored{s}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		s, err := tr.Prepare(obj, ex)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tr.Step(obj, []Scored{s}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUpdateReplay is an online update as the MicroLoRA trainer takes
// it: the new pair and three earlier ones of other lengths.
func BenchmarkUpdateReplay(b *testing.B) {
	m := testmodel.Shared(b, "models", "stories260K.gguf")
	model, err := NewModel(m.File, m.Config)
	if err != nil {
		b.Fatal(err)
	}
	tr, err := NewTrainer(model, TrainOptions{})
	if err != nil {
		b.Fatal(err)
	}
	var batch []Scored
	for n := range 4 {
		ex := Example{Prompt: []tokenizer.ID{1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395}[:5+3*n],
			Chosen: []tokenizer.ID{301, 425, 411}, Rejected: []tokenizer.ID{317}}
		s, err := tr.Prepare(DPO, ex)
		if err != nil {
			b.Fatal(err)
		}
		batch = append(batch, s)
	}
	b.ResetTimer()
	for range b.N {
		if _, err := tr.Step(DPO, batch); err != nil {
			b.Fatal(err)
		}
	}
}
