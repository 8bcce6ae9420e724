package gorgonia

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gorgonia.org/tensor"

	"github.com/ruvllm/ruvllm/internal/testmodel"
	"github.com/ruvllm/ruvllm/lora"
	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// The gradient check: the training graphs evaluated in float64, their
// symbolic gradients (Gorgonia's, and the attention, frozen-linear and
// GELU ops' own) against central differences of the loss along random
// directions. In float32 a loss of tens of nats has an error near 1e-6
// relative, which no step size separates from the curvature; in float64
// both are far below the 1e-4 asked of the gradient.

// gradFamilies are the tiny synthesized files of every family the graphs
// run (dim 64, 3 layers; sliding windows of 8 and soft caps of 5 in the
// Gemma ones, so that they act on the check's 16-position sequences). The
// qwen2 file is tiny-phi3's shape written as qwen2 (q/k/v biases, NeoX
// RoPE).
var gradFamilies = []struct{ arch, shape, as string }{
	{"llama", "tiny-llama3", ""},
	{"qwen2", "tiny-phi3", "qwen2"},
	{"qwen3", "tiny-qwen3", ""},
	{"gemma2", "tiny-gemma2", ""},
	{"gemma3", "tiny-gemma3", ""},
	{"phi3", "tiny-phi3", ""},
}

// gradExample is longer than the Gemma files' window of 8 positions, so
// that the windowed layers mask the first positions from the last.
var gradExample = Example{
	Prompt:   []tokenizer.ID{1, 17, 42, 7, 300, 12, 99, 5, 61, 8, 77},
	Chosen:   []tokenizer.ID{99, 3, 140},
	Rejected: []tokenizer.ID{250, 31},
	Rating:   1,
}

// checkTrainer is a trainer computing in float64 of a random adapter (B
// not zero, so that every factor has a gradient) of every linear layer of
// the model.
func checkTrainer(t *testing.T, m *models.Model, o TrainOptions) *Trainer {
	t.Helper()
	model, err := NewModel(m.File, m.Config)
	if err != nil {
		t.Fatal(err)
	}
	a, err := lora.Random(m.Config, lora.RandomSpec{Rank: 2, Seed: 5, Amplitude: 0.3})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := trainerFrom(model, a, o, tensor.Float64, false)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// gradGroup is one parameter group of the check: a role's A or B factors
// in every block.
type gradGroup struct {
	name   string
	params []int // indices into the trainer's params
}

// gradGroups groups the trainer's params by role and factor.
func gradGroups(tr *Trainer) []gradGroup {
	byName := map[string]*gradGroup{}
	var order []string
	for i, u := range tr.updates {
		r, _, _ := models.ParseTensorName(u.target.name)
		for f, name := range []string{r.Spec().Name + ".A", r.Spec().Name + ".B"} {
			g, ok := byName[name]
			if !ok {
				g = &gradGroup{name: name}
				byName[name] = g
				order = append(order, name)
			}
			g.params = append(g.params, 2*i+f)
		}
	}
	slices.Sort(order)
	groups := make([]gradGroup, len(order))
	for i, n := range order {
		groups[i] = *byName[n]
	}
	return groups
}

// checkGradients compares, for each parameter group and dirs random unit
// directions d over it, the gradient's g·d with the central difference
// (L(θ+hd) − L(θ−hd))/2h (h 1e-5: its truncation error, h² times the
// third derivative, and its rounding error, 1e-16·L/h, are both near
// 1e-10), and returns the largest relative error and where it was.
func checkGradients(t *testing.T, tr *Trainer, obj Objective, ex Scored, dirs int, seed uint64) (worst float64, where string) {
	t.Helper()
	terms := [][]term{tr.plan(obj, &ex)}
	_, grads, err := tr.run(terms, true, true)
	if err != nil {
		t.Fatal(err)
	}
	g := make([][]float64, len(grads))
	for i, v := range grads {
		g[i] = slices.Clone(v.Data().([]float64))
	}
	loss := func() float64 {
		out, _, err := tr.run(terms, true, false)
		if err != nil {
			t.Fatal(err)
		}
		return out[0]
	}
	value := func(i int) []float64 { return tr.params[i].value.Data().([]float64) }
	rng := rand.New(rand.NewPCG(seed, 0x9c))
	const h = 1e-5
	for _, grp := range gradGroups(tr) {
		for k := range dirs {
			d := make([][]float64, len(grp.params))
			norm := 0.0
			for j, pi := range grp.params {
				d[j] = make([]float64, len(value(pi)))
				for e := range d[j] {
					d[j][e] = rng.NormFloat64()
					norm += d[j][e] * d[j][e]
				}
			}
			analytic, gnorm := 0.0, 0.0
			for j, pi := range grp.params {
				for e := range d[j] {
					d[j][e] /= math.Sqrt(norm)
					analytic += g[pi][e] * d[j][e]
					gnorm += g[pi][e] * g[pi][e]
				}
			}
			move := func(by float64) {
				for j, pi := range grp.params {
					v := value(pi)
					for e := range v {
						v[e] += by * d[j][e]
					}
				}
			}
			move(h)
			up := loss()
			move(-2 * h)
			down := loss()
			move(h)
			numeric := (up - down) / (2 * h)
			// Relative to the larger of the two, or to a thousandth of
			// the group's gradient norm when a direction happens to be
			// nearly orthogonal to the gradient.
			rel := math.Abs(numeric-analytic) / max(math.Abs(numeric), math.Abs(analytic), 1e-3*math.Sqrt(gnorm), 1e-300)
			if rel > worst {
				worst, where = rel, fmt.Sprintf("%s direction %d: gradient %.10g, central difference %.10g", grp.name, k, analytic, numeric)
			}
			if rel > 1e-4 {
				t.Errorf("%s direction %d: gradient·d %.10g, central difference %.10g (relative error %.3g)", grp.name, k, analytic, numeric, rel)
			}
		}
	}
	return worst, where
}

// TestGradientsFloat64 checks the gradients of every LoRA factor of every
// linear layer (q, k, v, o, gate, up, down; Phi-3's fused qkv and gate/up)
// of every family's graph in float64, through its norms (Qwen3's and Gemma
// 3's q/k norms, Gemma's post-norms), attention (causal mask, GQA, sliding
// windows, the score cap), GELU and the logit cap: relative error ≤ 1e-4
// along three random directions per role and factor. Every objective is
// checked on llama; every family on Margin, what MicroLoRAs train pairs
// with.
func TestGradientsFloat64(t *testing.T) {
	for _, fam := range gradFamilies {
		objectives := []Objective{Margin}
		if fam.arch == "llama" {
			objectives = []Objective{SFT, DPO, KTO, Margin}
		}
		for _, obj := range objectives {
			t.Run(fam.arch+"/"+string(obj), func(t *testing.T) {
				t.Parallel()
				m := testmodel.Load(t, testmodel.SynthAs(t, fam.shape, fam.as, "F32"))
				if m.Config.Arch != fam.arch {
					t.Fatalf("the file is %s", m.Config.Arch)
				}
				// A margin target of 50 nats keeps the hinge off its kink.
				tr := checkTrainer(t, m, TrainOptions{Beta: 0.5, Margin: 50})
				s, err := tr.Prepare(obj, gradExample)
				if err != nil {
					t.Fatal(err)
				}
				// Off the reference, so that DPO's and KTO's terms are
				// not at their symmetric point.
				s.RefChosen += 0.7
				s.RefRejected -= 0.4
				tr.kl = 0.3
				worst, where := checkGradients(t, tr, obj, s, 3, 1)
				t.Logf("largest relative error %.3g (%s)", worst, where)
			})
		}
	}
}
