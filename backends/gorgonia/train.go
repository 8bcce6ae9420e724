package gorgonia

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/ruvllm/ruvllm/kernels"
	"github.com/ruvllm/ruvllm/lora"
	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// Objective is what a training step minimises.
type Objective string

// The objectives. Each trains the adapter's factors only; the base model is
// frozen and, for DPO and KTO, is the reference policy.
const (
	// SFT maximises log p(chosen | prompt) per token: supervised
	// fine-tuning on the preferred completion.
	SFT Objective = "sft"
	// DPO is Direct Preference Optimization (Rafailov et al., 2023):
	// −log σ(β·[(log π(c) − log π_ref(c)) − (log π(r) − log π_ref(r))]) for
	// a chosen c and a rejected r.
	DPO Objective = "dpo"
	// KTO is Kahneman-Tversky Optimization (Ethayarajh et al., 2024) on
	// rated completions: 1 − σ(β·(log π/π_ref(y) − z)) for a good one,
	// 1 − σ(β·(z − log π/π_ref(y))) for a bad one, z the running estimate
	// of the adapter's KL from the base (clamped at 0, not differentiated).
	KTO Objective = "kto"
	// Margin is a hinge on the adapter's own margin of a preference pair,
	// m = log π(c) − log π(r): max(0, γ + max(0, m_ref) − m), m_ref the
	// base model's margin and γ TrainOptions.Margin. A pair the base gets
	// wrong (m_ref < 0) trains until the adapter prefers the chosen by γ
	// nats, however wrong the base was (SLiC's hinge, Zhao et al., 2023);
	// one the base gets right, until the adapter prefers it by γ more than
	// the base does (the hinge form of DPO, Liu et al., 2024). A pair that
	// meets its target has no gradient, and a step of no gradient leaves
	// the adapter and the optimiser as they are: feedback moves the model
	// as far as it asks and no further. DPO's logistic loss fades after a
	// few nats of change whatever the margin (with β 1 a preference held
	// at −6 nats rose to −0.4 in 32 steps), and keeps pushing preferences
	// already won (docs/microlora.md).
	Margin Objective = "margin"
)

// ParseObjective reads an objective's name.
func ParseObjective(s string) (Objective, error) {
	switch o := Objective(strings.ToLower(s)); o {
	case SFT, DPO, KTO, Margin:
		return o, nil
	}
	return "", fmt.Errorf("unknown objective %q (sft, dpo, margin or kto)", s)
}

// Penalty keeps the adapter near what it learned before, so that learning
// a new preference forgets less of the old ones: λ/2·Σ w_i·(θ_i − θ*_i)²
// over the factors θ, θ* their values at the last Consolidate.
type Penalty string

const (
	// NoPenalty trains without one.
	NoPenalty Penalty = "none"
	// L2Anchor weighs every factor alike (w_i = 1).
	L2Anchor Penalty = "l2"
	// EWC is elastic weight consolidation (Kirkpatrick et al., 2017): w_i is
	// the diagonal of the empirical Fisher information, the mean squared
	// gradient of the loss over the consolidated examples, normalised to
	// mean 1 so that λ means the same as for L2Anchor.
	EWC Penalty = "ewc"
)

// ParsePenalty reads a penalty's name.
func ParsePenalty(s string) (Penalty, error) {
	switch p := Penalty(strings.ToLower(s)); p {
	case NoPenalty, L2Anchor, EWC:
		return p, nil
	case "":
		return NoPenalty, nil
	}
	return "", fmt.Errorf("unknown penalty %q (none, l2 or ewc)", s)
}

// Example is one piece of feedback in tokens. A preference pair has
// Chosen and Rejected; a rated completion (KTO) has Chosen and Rating +1,
// or Rejected and Rating −1. SFT trains on Chosen.
type Example struct {
	Prompt           []tokenizer.ID
	Chosen, Rejected []tokenizer.ID
	Rating           int
}

// TrainOptions configure a Trainer; the zero value trains a rank 2 adapter
// of every block's ffn_down with β 1 and a learning rate of 1e-3: on
// stories260K and three name preferences (docs/performance.md, "MicroLoRA") that moved
// the margin 6–8 nats in 32 DPO steps with perplexity within +1.7%, where
// q and v moved it 3–5 nats for +2.5% and all layers 4–7 nats for +1.4%;
// and Margin's γ is 2 nats, which kept the held-out margins of 13
// preference sets above 0.7 nats, where γ 1.5 left 0.6 and γ 3 cost more
// perplexity on every set (docs/microlora.md).
type TrainOptions struct {
	// Rank of every update; 0 means 2.
	Rank int
	// Alpha is lora_alpha, the update's scale times the rank; 0 means
	// 2·Rank.
	Alpha float32
	// Targets are the roles to update, by GGUF name without the block
	// ("attn_q", "ffn_down", ...) or short ("q", "v", "down"), or "all"
	// for every linear layer of every block; nil means ffn_down.
	Targets []string
	// LearningRate is Adam's; 0 means 1e-3.
	LearningRate float64
	// Beta is DPO's and KTO's inverse temperature; 0 means 1, which
	// saturates the loss once the margin has moved a few nats, so that an
	// adapter trained online stops short of damaging the model.
	Beta float64
	// Penalty and Lambda set the anchor penalty; Lambda 0 means 1.
	Penalty Penalty
	Lambda  float64
	// Seed makes A's random start reproducible.
	Seed uint64
	// Margin is γ of the Margin objective, in nats; 0 means 2.
	Margin float64
}

func (o *TrainOptions) fill() {
	if o.Rank == 0 {
		o.Rank = 2
	}
	if o.Alpha == 0 {
		o.Alpha = 2 * float32(o.Rank)
	}
	if o.Targets == nil {
		o.Targets = []string{"ffn_down"}
	}
	if o.LearningRate == 0 {
		o.LearningRate = 1e-3
	}
	if o.Beta == 0 {
		o.Beta = 1
	}
	if o.Penalty == "" {
		o.Penalty = NoPenalty
	}
	if o.Lambda == 0 {
		o.Lambda = 1
	}
	if o.Margin == 0 {
		o.Margin = 2
	}
}

// param is one factor of the adapter, At (in, rank) or Bt (rank, out),
// with what the optimiser and the penalty keep of it.
type param struct {
	// value holds the factor, the tensor the graphs' adapter nodes hold
	// (F64 in a trainer checking gradients, F32 otherwise); grad its
	// gradient, of the last step's loss.
	value *tensor.Dense
	grad  []float32
	// m and v are Adam's first and second moment estimates.
	m, v []float32
	// anchor and weight are θ* and w of the penalty, nil without one.
	anchor, weight []float32
	// fisher sums squared gradients since the last Consolidate.
	fisher []float32
}

func (p *param) data() []float32 { return p.value.Data().([]float32) }

func newParam(rows, cols int, data []float32, dt tensor.Dtype) *param {
	p := &param{grad: make([]float32, rows*cols), m: make([]float32, rows*cols), v: make([]float32, rows*cols)}
	if dt == tensor.Float64 {
		d := make([]float64, len(data))
		convert(d, data)
		p.value = tensor.New(tensor.WithShape(rows, cols), tensor.WithBacking(d))
	} else {
		p.value = tensor.New(tensor.WithShape(rows, cols), tensor.WithBacking(data))
	}
	return p
}

// update is one target's factors.
type update struct {
	target *linear
	at, bt *param
	scale  float32
}

// Trainer trains one LoRA adapter on a frozen model. It is not safe for
// concurrent use; the model may be shared with a backend.
type Trainer struct {
	m       *Model
	opt     TrainOptions
	updates []*update // sorted by target name
	params  []*param
	// dt is the element type of the graphs: F32, or F64 in a trainer
	// made to check gradients (gradcheck_test.go), which only computes
	// losses and gradients.
	dt tensor.Dtype
	// kl is KTO's running reference point z.
	kl float64
	// Steps counts the optimiser steps taken.
	Steps int
	// fisherN counts the gradients summed in the params' fisher.
	fisherN int
	// graphs are the compiled graphs by shape (stepgraph.go).
	graphs map[string]*stepGraph
}

// NewTrainer starts a new adapter on m: A drawn uniformly in ±1/√in (as
// PEFT's Kaiming init), B zero, so that the adapter starts as the base
// model exactly.
func NewTrainer(m *Model, o TrainOptions) (*Trainer, error) {
	o.fill()
	if o.Rank < 1 || o.Rank > 64 {
		return nil, fmt.Errorf("gorgonia: rank %d is outside 1 … 64", o.Rank)
	}
	names, err := targetNames(m, o.Targets)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(o.Seed, 0x7a11))
	tr := &Trainer{m: m, opt: o, dt: tensor.Float32}
	for _, name := range names {
		l := m.targets[name]
		at := make([]float32, l.in*o.Rank)
		bound := 1 / float32(math.Sqrt(float64(l.in)))
		for i := range at {
			at[i] = (2*rng.Float32() - 1) * bound
		}
		tr.add(l, at, make([]float32, o.Rank*l.out), o.Alpha/float32(o.Rank))
	}
	tr.finish()
	return tr, nil
}

// TrainerFrom continues training adapter a on m; o's Rank, Alpha and
// Targets are taken from a, and the trainer's state (optimiser, penalty)
// from a.Training.State when a carries one (State), so that training
// continues exactly where it stopped. A state that does not fit a's
// factors is an error wrapping lora.ErrInvalid.
func TrainerFrom(m *Model, a *lora.Adapter, o TrainOptions) (*Trainer, error) {
	return trainerFrom(m, a, o, tensor.Float32, true)
}

// trainerFrom is TrainerFrom with graphs computing in dt, restoring the
// trainer state a carries (a.Training.State) when restore is set.
func trainerFrom(m *Model, a *lora.Adapter, o TrainOptions, dt tensor.Dtype, restore bool) (*Trainer, error) {
	o.fill()
	tr := &Trainer{m: m, opt: o, dt: dt}
	for _, t := range a.Targets() {
		l, ok := m.targets[t.Name]
		if !ok || l.in != t.In || l.out != t.Out {
			return nil, fmt.Errorf("gorgonia: adapter %q updates %s, which this model does not have in that shape: %w", a.Name, t.Name, lora.ErrInvalid)
		}
		tr.add(l, transposed(t.A, t.Rank, t.In).Data().([]float32), transposed(t.B(), t.Out, t.Rank).Data().([]float32), t.Scale)
		tr.opt.Rank = t.Rank
	}
	tr.opt.Alpha = a.Alpha
	tr.finish()
	if restore && a.Training != nil && a.Training.State != nil {
		if err := tr.restore(a.Training.State); err != nil {
			return nil, fmt.Errorf("gorgonia: adapter %q: %w: %w", a.Name, lora.ErrInvalid, err)
		}
	}
	return tr, nil
}

// The trainer's state saved with an adapter (lora.TrainState): per factor
// (NAME.a and NAME.b, NAME the target's GGUF name) Adam's moments (.m,
// .v), the Fisher sums since the last Consolidate (.fisher) and the
// penalty's anchor and weights (.anchor, .weight) when it has them; and
// the scalars adam.step, fisher.n and kto.kl.
const (
	stateStep    = "adam.step"
	stateFisherN = "fisher.n"
	stateKL      = "kto.kl"
)

// stateArrays are the arrays of a param's state by their key suffix.
func (p *param) stateArrays() map[string]*[]float32 {
	return map[string]*[]float32{".m": &p.m, ".v": &p.v, ".fisher": &p.fisher, ".anchor": &p.anchor, ".weight": &p.weight}
}

// paramNames names the params as the state does.
func (tr *Trainer) paramNames() []string {
	names := make([]string, 0, len(tr.params))
	for _, u := range tr.updates {
		names = append(names, u.target.name+".a", u.target.name+".b")
	}
	return names
}

// State is a copy of the trainer's state beside the factors: what
// TrainerFrom needs of an adapter to continue training exactly where this
// trainer is, rather than with a new optimiser and penalty.
func (tr *Trainer) State() *lora.TrainState {
	st := &lora.TrainState{Arrays: map[string][]float32{}, Scalars: map[string]float64{
		stateStep: float64(tr.Steps), stateFisherN: float64(tr.fisherN), stateKL: tr.kl,
	}}
	for i, name := range tr.paramNames() {
		for suffix, xs := range tr.params[i].stateArrays() {
			if *xs != nil {
				st.Arrays[name+suffix] = slices.Clone(*xs)
			}
		}
	}
	return st
}

// restore sets the trainer's state from st, refusing arrays of other
// sizes than the factors' or of factors it does not have.
func (tr *Trainer) restore(st *lora.TrainState) error {
	known := map[string]bool{}
	for i, name := range tr.paramNames() {
		p := tr.params[i]
		for suffix, xs := range p.stateArrays() {
			key := name + suffix
			known[key] = true
			v, ok := st.Arrays[key]
			if !ok {
				continue
			}
			if len(v) != len(p.grad) {
				return fmt.Errorf("the trainer state %s has %d values for a factor of %d", key, len(v), len(p.grad))
			}
			*xs = slices.Clone(v)
		}
	}
	for key := range st.Arrays {
		if !known[key] {
			return fmt.Errorf("the trainer state %s names no factor of the adapter", key)
		}
	}
	step, fisherN := st.Scalars[stateStep], st.Scalars[stateFisherN]
	if step < 0 || step != math.Trunc(step) || fisherN < 0 || fisherN != math.Trunc(fisherN) {
		return fmt.Errorf("the trainer state's counts %v and %v are not counts", step, fisherN)
	}
	tr.Steps, tr.fisherN, tr.kl = int(step), int(fisherN), st.Scalars[stateKL]
	return nil
}

func (tr *Trainer) add(l *linear, at, bt []float32, scale float32) {
	r := len(at) / l.in
	tr.updates = append(tr.updates, &update{target: l, at: newParam(l.in, r, at, tr.dt), bt: newParam(r, l.out, bt, tr.dt), scale: scale})
}

func (tr *Trainer) finish() {
	slices.SortFunc(tr.updates, func(a, b *update) int { return strings.Compare(a.target.name, b.target.name) })
	for _, u := range tr.updates {
		tr.params = append(tr.params, u.at, u.bt)
	}
	tr.graphs = map[string]*stepGraph{}
}

// roleAliases are the short names of the linear roles targets may use.
var roleAliases = map[string]string{
	"q": "attn_q", "k": "attn_k", "v": "attn_v", "o": "attn_output",
	"gate": "ffn_gate", "up": "ffn_up", "down": "ffn_down",
}

// targetNames lists the GGUF names of the matrices the roles name.
func targetNames(m *Model, roles []string) ([]string, error) {
	roles = slices.Clone(roles)
	for i, r := range roles {
		if full, ok := roleAliases[r]; ok {
			roles[i] = full
		}
	}
	all := slices.Contains(roles, "all")
	var names []string
	for name := range m.targets {
		r, layer, ok := models.ParseTensorName(name)
		if !ok || layer < 0 {
			continue // the output projection: not a block's
		}
		if all || slices.Contains(roles, r.Spec().Name) {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("gorgonia: the targets %v name no linear layer of a %s block", roles, m.cfg.Arch)
	}
	slices.Sort(names)
	return names, nil
}

// Options are the trainer's options with defaults filled in.
func (tr *Trainer) Options() TrainOptions { return tr.opt }

// Adapter makes a lora.Adapter of the factors as they are now: a copy,
// which later steps do not change.
func (tr *Trainer) Adapter(name string) (*lora.Adapter, error) {
	var ts []*lora.Target
	for _, u := range tr.updates {
		l := u.target
		r := len(u.at.data()) / l.in
		a := transposed(u.at.data(), l.in, r).Data().([]float32)  // (r, in)
		b := transposed(u.bt.data(), r, l.out).Data().([]float32) // (out, r)
		t, err := lora.NewTarget(l.name, l.in, l.out, r, a, b, u.scale)
		if err != nil {
			return nil, err
		}
		ts = append(ts, t)
	}
	a, err := lora.New(name, tr.m.cfg.Arch, tr.opt.Alpha, false, lora.FormatGGUF, ts)
	if err != nil {
		return nil, err
	}
	a.Name = name
	return a, nil
}

// factors makes the adapter's nodes in gr.
func (tr *Trainer) factors(gr *graph) (map[string]*loraFactors, []*G.Node) {
	lf := make(map[string]*loraFactors, len(tr.updates))
	var nodes []*G.Node
	for _, u := range tr.updates {
		f := &loraFactors{at: gr.dense(u.at.value), bt: gr.dense(u.bt.value), scale: u.scale}
		lf[u.target.name] = f
		nodes = append(nodes, f.at, f.bt)
	}
	return lf, nodes
}

// ErrBadExample is wrapped by the errors about an example a trainer
// cannot train on (no prompt, a missing completion, a token outside the
// vocabulary, too long).
var ErrBadExample = errors.New("gorgonia: bad training example")

// check refuses an example the objective cannot train on.
func (tr *Trainer) check(obj Objective, ex *Example) error {
	if err := checkExample(tr.m.cfg, obj, ex); err != nil {
		return fmt.Errorf("%w: %w", ErrBadExample, err)
	}
	return nil
}

// checkExample refuses an example a model of cfg cannot train on: one
// outside its vocabulary or context, or without what obj compares.
func checkExample(cfg *models.Config, obj Objective, ex *Example) error {
	vocab := cfg.VocabSize
	if len(ex.Prompt) == 0 {
		return errors.New("gorgonia: an example needs a prompt of at least one token")
	}
	for _, ids := range [][]tokenizer.ID{ex.Prompt, ex.Chosen, ex.Rejected} {
		for _, id := range ids {
			if id < 0 || int(id) >= vocab {
				return fmt.Errorf("gorgonia: token %d is outside the vocabulary of %d", id, vocab)
			}
		}
	}
	switch {
	case len(ex.Prompt)+max(len(ex.Chosen), len(ex.Rejected)) > cfg.ContextLength:
		return fmt.Errorf("gorgonia: an example of %d tokens is longer than the context of %d", len(ex.Prompt)+max(len(ex.Chosen), len(ex.Rejected)), cfg.ContextLength)
	case obj == SFT && len(ex.Chosen) == 0:
		return errors.New("gorgonia: SFT needs a chosen completion")
	case (obj == DPO || obj == Margin) && (len(ex.Chosen) == 0 || len(ex.Rejected) == 0):
		return fmt.Errorf("gorgonia: %s needs a chosen and a rejected completion", obj)
	case obj == KTO && ex.Rating > 0 && len(ex.Chosen) == 0, obj == KTO && ex.Rating < 0 && len(ex.Rejected) == 0:
		return errors.New("gorgonia: KTO needs the rated completion")
	case obj == KTO && ex.Rating == 0 && (len(ex.Chosen) == 0 || len(ex.Rejected) == 0):
		return errors.New("gorgonia: KTO needs a rating, or a chosen and a rejected completion")
	}
	return nil
}

// Reference scores an example under the base model: log p(chosen) and
// log p(rejected) (0 for a missing one), what DPO and KTO compare against.
func (tr *Trainer) Reference(ex *Example) (chosen, rejected float64, err error) {
	return tr.score(ex, false)
}

// Score is Reference under the adapter as it is now.
func (tr *Trainer) Score(ex *Example) (chosen, rejected float64, err error) {
	return tr.score(ex, true)
}

func (tr *Trainer) score(ex *Example, adapter bool) (chosen, rejected float64, err error) {
	if len(ex.Prompt) == 0 {
		return 0, 0, errors.New("gorgonia: an example needs a prompt")
	}
	var seqs [][2][]tokenizer.ID
	for _, c := range [][]tokenizer.ID{ex.Chosen, ex.Rejected} {
		if len(c) > 0 {
			seqs = append(seqs, [2][]tokenizer.ID{ex.Prompt, c})
		}
	}
	if len(seqs) == 0 {
		return 0, 0, nil
	}
	lps, _, err := tr.run([][]term{{{kind: termScore, seqs: seqs}}}, adapter, false)
	if err != nil {
		return 0, 0, err
	}
	if len(ex.Chosen) > 0 {
		chosen, lps = lps[0], lps[1:]
	}
	if len(ex.Rejected) > 0 {
		rejected = lps[0]
	}
	return chosen, rejected, nil
}

// Scored is an example with its reference log-probabilities, what a step
// trains on.
type Scored struct {
	Example
	RefChosen, RefRejected float64
}

// Prepare checks ex for obj and scores it under the base model.
func (tr *Trainer) Prepare(obj Objective, ex Example) (Scored, error) {
	if err := tr.check(obj, &ex); err != nil {
		return Scored{}, err
	}
	s := Scored{Example: ex}
	if obj == SFT {
		return s, nil
	}
	c, r, err := tr.Reference(&ex)
	if err != nil {
		return Scored{}, err
	}
	s.RefChosen, s.RefRejected = c, r
	return s, nil
}

// Step takes one Adam step on the mean loss of the examples (prepared for
// obj) plus the penalty, and returns that loss (the objective's mean and
// the penalty). A loss of no gradient (anyGradient) takes no step.
func (tr *Trainer) Step(obj Objective, batch []Scored) (loss float64, err error) {
	if len(batch) == 0 {
		return 0, errors.New("gorgonia: a step needs examples")
	}
	loss, err = tr.gradients(obj, batch)
	if err != nil {
		return 0, err
	}
	loss += tr.penalize()
	for _, p := range tr.params {
		for i, g := range p.grad {
			if math.IsNaN(float64(g)) || math.IsInf(float64(g), 0) {
				return 0, fmt.Errorf("gorgonia: the gradient is not finite (entry %d)", i)
			}
		}
	}
	if tr.anyGradient() {
		tr.adam()
	}
	if obj == KTO {
		tr.updateKL(batch)
	}
	return loss, nil
}

// gradients computes the mean loss of the batch and its gradient into
// every param's grad, adding the squared gradients to their Fisher sums.
// Each example runs in its own graph, cached by its shape alone, and the
// gradients are averaged: a batch of examples of other lengths reuses the
// graphs of each rather than compiling one of the combination.
func (tr *Trainer) gradients(obj Objective, batch []Scored) (float64, error) {
	for _, p := range tr.params {
		clear(p.grad)
	}
	loss := 0.0
	w := 1 / float32(len(batch))
	for i := range batch {
		out, grads, err := tr.run([][]term{tr.plan(obj, &batch[i])}, true, true)
		if err != nil {
			return 0, err
		}
		loss += out[0] / float64(len(batch))
		for j, g := range grads {
			kernels.Axpy(w, g.Data().([]float32), tr.params[j].grad)
		}
	}
	for _, p := range tr.params {
		if p.fisher == nil {
			p.fisher = make([]float32, len(p.grad))
		}
		for j, x := range p.grad {
			p.fisher[j] += x * x
		}
	}
	tr.fisherN++
	return loss, nil
}

// updateKL moves KTO's reference point towards the batch's mean log-ratio
// of the adapter to the base (clamped at 0), after the step's scores.
func (tr *Trainer) updateKL(batch []Scored) {
	sum, n := 0.0, 0
	for i := range batch {
		c, r, err := tr.Score(&batch[i].Example)
		if err != nil {
			return
		}
		if len(batch[i].Chosen) > 0 {
			sum, n = sum+c-batch[i].RefChosen, n+1
		}
		if len(batch[i].Rejected) > 0 {
			sum, n = sum+r-batch[i].RefRejected, n+1
		}
	}
	if n > 0 {
		tr.kl = max(0, 0.9*tr.kl+0.1*sum/float64(n))
	}
}

// penalize adds the anchor penalty's gradient λ·w·(θ − θ*) to every
// param's grad and returns the penalty, λ/2·Σ w·(θ − θ*)². It is a
// quadratic with a closed-form gradient, so it is added here rather than
// built into the graph.
func (tr *Trainer) penalize() float64 {
	if tr.opt.Penalty == NoPenalty {
		return 0
	}
	lambda := tr.opt.Lambda
	pen := 0.0
	for _, p := range tr.params {
		pp := p
		if pp.anchor == nil {
			continue
		}
		g := pp.grad
		for i, x := range pp.data() {
			d := float64(x - pp.anchor[i])
			w := 1.0
			if pp.weight != nil {
				w = float64(pp.weight[i])
			}
			pen += 0.5 * lambda * w * d * d
			g[i] += float32(lambda * w * d)
		}
	}
	return pen
}

// Accumulate adds the squared gradients of the batch's loss to the Fisher
// estimate without stepping, so that Consolidate can weigh the factors by
// what earlier examples (not trained in this process) need of them.
func (tr *Trainer) Accumulate(obj Objective, batch []Scored) error {
	_, err := tr.gradients(obj, batch)
	return err
}

// Consolidate makes what the adapter knows now the anchor of the penalty:
// θ* becomes the factors' values and, for EWC, w the mean squared gradient
// since the last Consolidate (the diagonal Fisher estimate), scaled to mean
// 1 over all factors. Without a penalty it does nothing.
func (tr *Trainer) Consolidate() {
	if tr.opt.Penalty == NoPenalty {
		return
	}
	total, count := 0.0, 0
	for _, p := range tr.params {
		pp := p
		pp.anchor = slices.Clone(pp.data())
		for _, f := range pp.fisher {
			total += float64(f)
		}
		count += len(pp.data())
	}
	mean := total / float64(max(count, 1))
	for _, p := range tr.params {
		pp := p
		pp.weight = nil
		if tr.opt.Penalty == EWC && mean > 0 {
			pp.weight = make([]float32, len(pp.data()))
			for i := range pp.weight {
				if pp.fisher != nil {
					pp.weight[i] = float32(float64(pp.fisher[i]) / mean)
				}
			}
		}
		clear(pp.fisher)
	}
	tr.fisherN = 0
}

// anyGradient reports whether any factor has a gradient: a step without
// one (a Margin batch whose pairs all meet their targets, no penalty) is
// not taken, so that Adam's momentum does not carry the adapter past what
// the feedback asked for.
func (tr *Trainer) anyGradient() bool {
	for _, p := range tr.params {
		for _, g := range p.grad {
			if g != 0 {
				return true
			}
		}
	}
	return false
}

// The optimiser is Adam (Kingma and Ba, 2015) with Gorgonia's AdamSolver's
// constants, written out so that its moments are the trainer's own state,
// saved with the adapter (TrainState) and restored with it.
const adamBeta1, adamBeta2, adamEps = 0.9, 0.999, 1e-8

// adam takes one step on every param by its grad: the moments move
// towards the gradient and its square, and each factor by −lr·m̂/(√v̂ + ε),
// m̂ and v̂ the moments corrected for their zero start.
func (tr *Trainer) adam() {
	tr.Steps++
	t := float64(tr.Steps)
	c1, c2 := 1-math.Pow(adamBeta1, t), 1-math.Pow(adamBeta2, t)
	lr := tr.opt.LearningRate
	for _, p := range tr.params {
		w := p.data()
		for i, g := range p.grad {
			m := adamBeta1*float64(p.m[i]) + (1-adamBeta1)*float64(g)
			v := adamBeta2*float64(p.v[i]) + (1-adamBeta2)*float64(g)*float64(g)
			p.m[i], p.v[i] = float32(m), float32(v)
			w[i] -= float32(lr * (m / c1) / (math.Sqrt(v/c2) + adamEps))
		}
	}
}
