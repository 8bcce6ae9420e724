package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/ruvllm/ruvllm/backends/gorgonia"
	"github.com/ruvllm/ruvllm/kernels"
	"github.com/ruvllm/ruvllm/lora"
	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

func init() {
	register("train-lora", "train a LoRA adapter on preference pairs or rated completions (SFT, DPO, KTO) and write it as GGUF", runTrainLoRA)
}

// preferenceItem is one example of a --data file: a prompt with a chosen
// and a rejected completion, or with one completion and a rating.
type preferenceItem struct {
	Prompt     string `json:"prompt"`
	Chosen     string `json:"chosen"`
	Rejected   string `json:"rejected"`
	Completion string `json:"completion"`
	Rating     int    `json:"rating"`
}

// preferenceSet is a --data file: {"train": [...], "eval": [...]} as the
// sets of ../shared/feedback are, or a plain list of training examples.
type preferenceSet struct {
	Preference string           `json:"preference"`
	Train      []preferenceItem `json:"train"`
	Eval       []preferenceItem `json:"eval"`
}

// readPreferences reads a --data file.
func readPreferences(path string) (*preferenceSet, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var set preferenceSet
	if trimmed := strings.TrimSpace(string(b)); strings.HasPrefix(trimmed, "[") {
		err = json.Unmarshal(b, &set.Train)
	} else {
		err = json.Unmarshal(b, &set)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(set.Train) == 0 {
		return nil, fmt.Errorf("%s holds no training examples", path)
	}
	return &set, nil
}

// example tokenizes an item: the prompt with BOS, each completion as it
// continues the prompt's text.
func (it preferenceItem) example(t *tokenizer.Tokenizer) gorgonia.Example {
	o := tokenizer.EncodeOptions{AddSpecial: true}
	ex := gorgonia.Example{Prompt: t.Encode(it.Prompt, o), Rating: it.Rating}
	cont := func(s string) []tokenizer.ID {
		if s == "" {
			return nil
		}
		return t.EncodeContinuation(ex.Prompt, it.Prompt, s, o)
	}
	ex.Chosen, ex.Rejected = cont(it.Chosen), cont(it.Rejected)
	if it.Completion != "" {
		if it.Rating < 0 {
			ex.Rejected = cont(it.Completion)
		} else {
			ex.Chosen, ex.Rating = cont(it.Completion), 1
		}
	}
	return ex
}

// prepare tokenizes and scores items under the base model.
func prepare(tr *gorgonia.Trainer, obj gorgonia.Objective, t *tokenizer.Tokenizer, items []preferenceItem) ([]gorgonia.Scored, error) {
	out := make([]gorgonia.Scored, 0, len(items))
	for i, it := range items {
		s, err := tr.Prepare(obj, it.example(t))
		if err != nil {
			return nil, fmt.Errorf("example %d: %w", i, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// meanMargin is the mean over items of log p(chosen) − log p(rejected)
// under the trainer's adapter.
func meanMargin(tr *gorgonia.Trainer, t *tokenizer.Tokenizer, items []preferenceItem) (float64, error) {
	sum := 0.0
	for _, it := range items {
		ex := it.example(t)
		c, r, err := tr.Score(&ex)
		if err != nil {
			return 0, err
		}
		sum += c - r
	}
	return sum / float64(len(items)), nil
}

// trainLoRAFlags are train-lora's options, checked.
type trainLoRAFlags struct {
	src                      *modelSource
	data, out, init, targets string
	anchorData, evalData     string
	obj                      gorgonia.Objective
	pen                      gorgonia.Penalty
	margin, alpha, lr, beta  float64
	lambda                   float64
	rank, steps, batch       int
	seed                     uint64
	inOrder                  bool
}

// runTrainLoRA trains a LoRA adapter offline: read the options and data,
// open the trainer, anchor it (with a penalty), train, report the eval
// margin before and after, write the adapter.
func runTrainLoRA(e *env, args []string) error {
	f, err := parseTrainLoRA(e, args)
	if err != nil {
		return err
	}
	set, err := readPreferences(f.data)
	if err != nil {
		return err
	}
	m, err := f.src.load(context.Background(), models.LoadOptions{Logger: e.log})
	if err != nil {
		return err
	}
	defer m.Close()
	tr, err := f.trainer(m)
	if err != nil {
		return err
	}
	tok := m.Tokenizer
	if err := f.anchor(tr, tok, set); err != nil {
		return err
	}
	train, err := prepare(tr, f.obj, tok, set.Train)
	if err != nil {
		return err
	}
	evalItems, err := f.evalItems(set)
	if err != nil {
		return err
	}
	pairs := evalItems[0].Chosen != "" && evalItems[0].Rejected != ""
	if pairs {
		before, err := meanMargin(tr, tok, evalItems)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "margin before: %.4f nats (mean log p(chosen) − log p(rejected) over %d eval examples)\n", before, len(evalItems))
	}
	if err := f.train(tr, train, e.stdout); err != nil {
		return err
	}
	if pairs {
		after, err := meanMargin(tr, tok, evalItems)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "margin after: %.4f nats\n", after)
	}
	a, err := tr.Adapter(strings.TrimSuffix(strings.TrimSuffix(f.out, ".gguf"), "/"))
	if err != nil {
		return err
	}
	if err := a.WriteGGUF(f.out, kernels.F32); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "wrote %s: rank %d, %d weights, %s, %d steps\n", f.out, a.Rank(), len(a.Targets()), f.obj, f.steps)
	return nil
}

// parseTrainLoRA reads and checks train-lora's flags.
func parseTrainLoRA(e *env, args []string) (*trainLoRAFlags, error) {
	f := &trainLoRAFlags{}
	fs := newFlags("train-lora", "--model M --data PAIRS.json --objective dpo|sft|kto [--rank 2] [--steps N] --out A.gguf")
	f.src = addModelFlags(fs)
	fs.StringVar(&f.data, "data", "", "training data: {\"train\": [{prompt, chosen, rejected} or {prompt, completion, rating}], \"eval\": [...]}, or a list of examples")
	objective := fs.String("objective", "dpo", "dpo (chosen/rejected pairs against the frozen base), margin (a hinge on the adapter's own margin of each pair, --margin), sft (the chosen completions) or kto (rated completions; a pair is one good and one bad)")
	fs.Float64Var(&f.margin, "margin", 2, "with --objective margin: γ, the nats by which a pair's chosen must win (beyond the base's margin when the base already prefers it)")
	fs.IntVar(&f.rank, "rank", 2, "rank of every update")
	fs.Float64Var(&f.alpha, "alpha", 0, "lora_alpha (default: 2 × rank)")
	fs.StringVar(&f.targets, "targets", "down", "layers to update: roles of every block (q,k,v,o,gate,up,down or GGUF names) or all")
	fs.IntVar(&f.steps, "steps", 64, "optimiser steps")
	fs.IntVar(&f.batch, "batch", 4, "examples per step")
	fs.Float64Var(&f.lr, "lr", 1e-3, "Adam's learning rate")
	fs.Float64Var(&f.beta, "beta", 1, "DPO's and KTO's β")
	fs.StringVar(&f.init, "init", "", "continue training this GGUF LoRA adapter instead of starting a new one")
	penalty := fs.String("penalty", "none", "keep the adapter near --init: none, l2 (an anchor) or ewc (weighted by the Fisher information of --anchor-data)")
	fs.Float64Var(&f.lambda, "lambda", 1, "strength of the penalty")
	fs.StringVar(&f.anchorData, "anchor-data", "", "examples --init was trained on, for the EWC weights (default: --data)")
	fs.StringVar(&f.evalData, "eval", "", "report the margin on this file's eval examples (default: --data's)")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the adapter's start and of the order of examples")
	fs.BoolVar(&f.inOrder, "in-order", false, "take the examples in the file's order, as feedback arriving one by one trains a MicroLoRA, rather than shuffled")
	fs.StringVar(&f.out, "out", "", "GGUF LoRA file to write")
	if _, err := fs.parse(args, e.stdout); err != nil {
		return nil, err
	}
	if f.data == "" || f.out == "" {
		return nil, fmt.Errorf("%w: --data and --out are required", errUsage)
	}
	var err error
	if f.obj, err = gorgonia.ParseObjective(*objective); err != nil {
		return nil, fmt.Errorf("%w: --objective: %v", errUsage, err)
	}
	if f.pen, err = gorgonia.ParsePenalty(*penalty); err != nil {
		return nil, fmt.Errorf("%w: --penalty: %v", errUsage, err)
	}
	if f.steps < 1 || f.batch < 1 || f.rank < 1 || f.lr <= 0 || f.margin <= 0 {
		return nil, fmt.Errorf("%w: --steps, --batch, --rank, --lr and --margin must be positive", errUsage)
	}
	if f.pen != gorgonia.NoPenalty && f.init == "" {
		return nil, fmt.Errorf("%w: --penalty keeps the adapter near --init: give it", errUsage)
	}
	return f, nil
}

// trainer is a new trainer on m, or one that continues --init.
func (f *trainLoRAFlags) trainer(m *models.Model) (*gorgonia.Trainer, error) {
	model, err := gorgonia.NewModel(m.File, m.Config)
	if err != nil {
		return nil, err
	}
	o := gorgonia.TrainOptions{Rank: f.rank, Alpha: float32(f.alpha), Targets: strings.Split(f.targets, ","),
		LearningRate: f.lr, Beta: f.beta, Penalty: f.pen, Lambda: f.lambda, Seed: f.seed, Margin: f.margin}
	if f.init == "" {
		return gorgonia.NewTrainer(model, o)
	}
	a, err := lora.Load(f.init, m.Config, m.File)
	if err != nil {
		return nil, fmt.Errorf("--init %s: %w", f.init, err)
	}
	return gorgonia.TrainerFrom(model, a, o)
}

// anchor gives a penalised trainer its weights: the Fisher information of
// the examples --init was trained on (--anchor-data, else --data).
func (f *trainLoRAFlags) anchor(tr *gorgonia.Trainer, tok *tokenizer.Tokenizer, set *preferenceSet) error {
	if f.pen == gorgonia.NoPenalty {
		return nil
	}
	anchor := set
	if f.anchorData != "" {
		var err error
		if anchor, err = readPreferences(f.anchorData); err != nil {
			return err
		}
	}
	scored, err := prepare(tr, f.obj, tok, anchor.Train)
	if err != nil {
		return fmt.Errorf("--anchor-data: %w", err)
	}
	for i := range scored {
		if err := tr.Accumulate(f.obj, scored[i:i+1]); err != nil {
			return err
		}
	}
	tr.Consolidate()
	return nil
}

// evalItems are the examples the margin is reported on: --eval's, else
// --data's eval list, else its training examples.
func (f *trainLoRAFlags) evalItems(set *preferenceSet) ([]preferenceItem, error) {
	if f.evalData != "" {
		var err error
		if set, err = readPreferences(f.evalData); err != nil {
			return nil, err
		}
	}
	if len(set.Eval) > 0 {
		return set.Eval, nil
	}
	return set.Train, nil
}

// train runs --steps optimiser steps of --batch examples, shuffled each
// pass (or in order with --in-order), reporting the loss eight times.
func (f *trainLoRAFlags) train(tr *gorgonia.Trainer, train []gorgonia.Scored, stdout io.Writer) error {
	rng := rand.New(rand.NewPCG(f.seed, 0xdada))
	perm := func() []int {
		if f.inOrder {
			order := make([]int, len(train))
			for i := range order {
				order[i] = i
			}
			return order
		}
		return rng.Perm(len(train))
	}
	order := perm()
	start := time.Now()
	next := 0
	for step := range f.steps {
		b := make([]gorgonia.Scored, 0, f.batch)
		for len(b) < min(f.batch, len(train)) {
			if next == len(order) {
				order, next = perm(), 0
			}
			b = append(b, train[order[next]])
			next++
		}
		loss, err := tr.Step(f.obj, b)
		if err != nil {
			return err
		}
		if step == 0 || (step+1)%max(1, f.steps/8) == 0 || step == f.steps-1 {
			fmt.Fprintf(stdout, "step %d/%d: loss %.4f (%.1f ms a step)\n", step+1, f.steps, loss,
				float64(time.Since(start).Microseconds())/1e3/float64(step+1))
		}
	}
	return nil
}
