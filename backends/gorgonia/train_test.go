package gorgonia

import (
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/internal/testmodel"
	"github.com/ruvllm/ruvllm/kernels"
	"github.com/ruvllm/ruvllm/kvcache"
	"github.com/ruvllm/ruvllm/lora"
	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// tinyModel is the synthesized tiny model as a Model.
func tinyModel(t *testing.T) (*models.Model, *Model) {
	t.Helper()
	m := testmodel.Tiny(t)
	model, err := NewModel(m.File, m.Config)
	if err != nil {
		t.Fatal(err)
	}
	return m, model
}

// randomTrainer continues a random adapter (B not zero, so every factor
// has a gradient) of the q, v and down projections and the output
// projection.
func randomTrainer(t *testing.T, m *models.Model, model *Model, o TrainOptions) *Trainer {
	t.Helper()
	var names []string
	for _, n := range m.Config.Architecture().Linear(m.Config) {
		if r, l, _ := models.ParseTensorName(n); (l >= 0 && (r == models.AttnQ || r == models.AttnV || r == models.FFNDown)) || r == models.Output {
			names = append(names, n)
		}
	}
	a, err := lora.Random(m.Config, lora.RandomSpec{Rank: 2, Seed: 3, Targets: names, Amplitude: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := TrainerFrom(model, a, o)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestScoreMatchesNativeBackend checks the trainer's log p(completion) under
// an adapter against the native backend's logits with the same adapter: the
// graph the trainer differentiates is the model the server runs.
func TestScoreMatchesNativeBackend(t *testing.T) {
	m, model := tinyModel(t)
	tr := randomTrainer(t, m, model, TrainOptions{})
	a, err := tr.Adapter("x")
	if err != nil {
		t.Fatal(err)
	}
	nat := testmodel.Backend(t, "native", m, backends.Options{Threads: 1})
	ex := Example{Prompt: []tokenizer.ID{1, 17, 42, 7}, Chosen: []tokenizer.ID{99, 3, 8}}
	got, _, err := tr.Score(&ex)
	if err != nil {
		t.Fatal(err)
	}
	seq, err := nat.NewSequence(backends.SequenceOptions{KV: kvcache.F32, MaxLen: 16})
	if err != nil {
		t.Fatal(err)
	}
	if err := seq.(backends.AdapterSequence).SetAdapter(a, 1); err != nil {
		t.Fatal(err)
	}
	all := append(append([]tokenizer.ID{}, ex.Prompt...), ex.Chosen...)
	vocab := m.Config.VocabSize
	logits := make([]float32, len(all)*vocab)
	if err := nat.Forward([]backends.Step{{Seq: seq, Tokens: all, Outputs: backends.AllTokens, Logits: logits}}); err != nil {
		t.Fatal(err)
	}
	want := 0.0
	for i := len(ex.Prompt) - 1; i < len(all)-1; i++ {
		row := logits[i*vocab : (i+1)*vocab]
		mx := math.Inf(-1)
		for _, v := range row {
			mx = max(mx, float64(v))
		}
		sum := 0.0
		for _, v := range row {
			sum += math.Exp(float64(v) - mx)
		}
		want += float64(row[all[i+1]]) - mx - math.Log(sum)
	}
	t.Logf("log p = %.6f (gorgonia), %.6f (native)", got, want)
	if math.Abs(got-want) > 1e-4*max(1, math.Abs(want)) {
		t.Errorf("log p = %.6f under the trainer, %.6f under the native backend", got, want)
	}
}

// TestCachedGraphsRefill checks that a compiled graph reused for another
// example of the same padded shape gives what a fresh graph gives.
func TestCachedGraphsRefill(t *testing.T) {
	m, model := tinyModel(t)
	a := Example{Prompt: []tokenizer.ID{1, 17, 42}, Chosen: []tokenizer.ID{99}, Rejected: []tokenizer.ID{5, 6}}
	b := Example{Prompt: []tokenizer.ID{1, 8, 9, 10}, Chosen: []tokenizer.ID{7, 3}, Rejected: []tokenizer.ID{250}}
	reused := randomTrainer(t, m, model, TrainOptions{})
	if _, _, err := reused.Score(&a); err != nil {
		t.Fatal(err)
	}
	gc, gr, err := reused.Score(&b)
	if err != nil {
		t.Fatal(err)
	}
	if len(reused.graphs) != 1 {
		t.Errorf("%d graphs compiled for two examples of one shape, want 1", len(reused.graphs))
	}
	wc, wr, err := randomTrainer(t, m, model, TrainOptions{}).Score(&b)
	if err != nil {
		t.Fatal(err)
	}
	if gc != wc || gr != wr {
		t.Errorf("reused graph: log p %v, %v; fresh graph: %v, %v", gc, gr, wc, wr)
	}
}

// TestTrainerStateRestores checks that a trainer continued from an adapter
// carrying its state (Trainer.State, as a MicroLoRA saves it) takes
// exactly the steps the trainer it was saved from takes, where one
// continued without the state (a new optimiser) does not.
func TestTrainerStateRestores(t *testing.T) {
	m := testmodel.Load(t, testmodel.Synth(t, "tiny-llama3", "F32"))
	model, err := NewModel(m.File, m.Config)
	if err != nil {
		t.Fatal(err)
	}
	examples := []Example{
		{Prompt: []tokenizer.ID{1, 17, 42, 7}, Chosen: []tokenizer.ID{99, 3}, Rejected: []tokenizer.ID{250}, Rating: 1},
		{Prompt: []tokenizer.ID{1, 8, 9}, Chosen: []tokenizer.ID{7}, Rejected: []tokenizer.ID{31, 5}, Rating: -1},
		{Prompt: []tokenizer.ID{1, 300, 12, 4, 4}, Chosen: []tokenizer.ID{61}, Rejected: []tokenizer.ID{62}, Rating: 1},
	}
	cases := []struct {
		obj     Objective
		penalty Penalty
	}{
		{DPO, NoPenalty},
		{KTO, NoPenalty},
		{DPO, L2Anchor},
		{DPO, EWC},
	}
	for _, c := range cases {
		t.Run(string(c.obj)+"/"+string(c.penalty), func(t *testing.T) {
			o := TrainOptions{Targets: []string{"q", "down"}, Penalty: c.penalty, Lambda: 3, Seed: 4}
			// steps runs n steps of tr from the i-th example on, with a
			// Consolidate after the second, and returns the losses.
			steps := func(tr *Trainer, i, n int) []float64 {
				var losses []float64
				for k := i; k < i+n; k++ {
					s, err := tr.Prepare(c.obj, examples[k%len(examples)])
					if err != nil {
						t.Fatal(err)
					}
					loss, err := tr.Step(c.obj, []Scored{s})
					if err != nil {
						t.Fatal(err)
					}
					losses = append(losses, loss)
					if k == 1 {
						tr.Consolidate()
					}
				}
				return losses
			}
			whole, err := NewTrainer(model, o)
			if err != nil {
				t.Fatal(err)
			}
			want := steps(whole, 0, 6)[3:]
			first, err := NewTrainer(model, o)
			if err != nil {
				t.Fatal(err)
			}
			steps(first, 0, 3)
			saved, err := first.Adapter("x")
			if err != nil {
				t.Fatal(err)
			}
			// Through a file, as a restarted server reads it.
			saved.Training = &lora.Training{Version: 4, Updates: 3, State: first.State()}
			path := filepath.Join(t.TempDir(), "x.gguf")
			if err := saved.WriteGGUF(path, kernels.F32); err != nil {
				t.Fatal(err)
			}
			read, err := lora.Load(path, m.Config, m.File)
			if err != nil {
				t.Fatal(err)
			}
			restored, err := TrainerFrom(model, read, o)
			if err != nil {
				t.Fatal(err)
			}
			got := steps(restored, 3, 3)
			read.Training.State = nil
			fresh, err := TrainerFrom(model, read, o)
			if err != nil {
				t.Fatal(err)
			}
			without := steps(fresh, 3, 3)
			t.Logf("losses of steps 4-6: uninterrupted %.6g, restored %.6g, without the state %.6g", want, got, without)
			if !slices.Equal(got, want) {
				t.Errorf("restored with its state, the trainer's losses are %v, want %v", got, want)
			}
			if slices.Equal(without, want) {
				t.Errorf("without its state the trainer took the same steps: the state is not needed?")
			}
			if restored.Steps != whole.Steps {
				t.Errorf("%d steps counted after the restart, %d without one", restored.Steps, whole.Steps)
			}
		})
	}
}
