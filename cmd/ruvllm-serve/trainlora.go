package main

import (
	"context"
	"encoding/json"
	"fmt"
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

func runTrainLoRA(e *env, args []string) error {
	fs := newFlags("train-lora", "--model M --data PAIRS.json --objective dpo|sft|kto [--rank 2] [--steps N] --out A.gguf")
	src := addModelFlags(fs)
	data := fs.String("data", "", "training data: {\"train\": [{prompt, chosen, rejected} or {prompt, completion, rating}], \"eval\": [...]}, or a list of examples")
	objective := fs.String("objective", "dpo", "dpo (chosen/rejected pairs against the frozen base), margin (a hinge on the adapter's own margin of each pair, --margin), sft (the chosen completions) or kto (rated completions; a pair is one good and one bad)")
	margin := fs.Float64("margin", 2, "with --objective margin: γ, the nats by which a pair's chosen must win (beyond the base's margin when the base already prefers it)")
	rank := fs.Int("rank", 2, "rank of every update")
	alpha := fs.Float64("alpha", 0, "lora_alpha (default: 2 × rank)")
	targets := fs.String("targets", "down", "layers to update: roles of every block (q,k,v,o,gate,up,down or GGUF names) or all")
	steps := fs.Int("steps", 64, "optimiser steps")
	batch := fs.Int("batch", 4, "examples per step")
	lr := fs.Float64("lr", 1e-3, "Adam's learning rate")
	beta := fs.Float64("beta", 1, "DPO's and KTO's β")
	init := fs.String("init", "", "continue training this GGUF LoRA adapter instead of starting a new one")
	penalty := fs.String("penalty", "none", "keep the adapter near --init: none, l2 (an anchor) or ewc (weighted by the Fisher information of --anchor-data)")
	lambda := fs.Float64("lambda", 1, "strength of the penalty")
	anchorData := fs.String("anchor-data", "", "examples --init was trained on, for the EWC weights (default: --data)")
	evalData := fs.String("eval", "", "report the margin on this file's eval examples (default: --data's)")
	seed := fs.Uint64("seed", 1, "seed of the adapter's start and of the order of examples")
	inOrder := fs.Bool("in-order", false, "take the examples in the file's order, as feedback arriving one by one trains a MicroLoRA, rather than shuffled")
	out := fs.String("out", "", "GGUF LoRA file to write")
	if _, err := fs.parse(args, e.stdout); err != nil {
		return err
	}
	if *data == "" || *out == "" {
		return fmt.Errorf("%w: --data and --out are required", errUsage)
	}
	obj, err := gorgonia.ParseObjective(*objective)
	if err != nil {
		return fmt.Errorf("%w: --objective: %v", errUsage, err)
	}
	pen, err := gorgonia.ParsePenalty(*penalty)
	if err != nil {
		return fmt.Errorf("%w: --penalty: %v", errUsage, err)
	}
	if *steps < 1 || *batch < 1 || *rank < 1 || *lr <= 0 || *margin <= 0 {
		return fmt.Errorf("%w: --steps, --batch, --rank, --lr and --margin must be positive", errUsage)
	}
	if pen != gorgonia.NoPenalty && *init == "" {
		return fmt.Errorf("%w: --penalty keeps the adapter near --init: give it", errUsage)
	}
	set, err := readPreferences(*data)
	if err != nil {
		return err
	}
	m, err := src.load(context.Background(), models.LoadOptions{Logger: e.log})
	if err != nil {
		return err
	}
	defer m.Close()
	model, err := gorgonia.NewModel(m.File, m.Config)
	if err != nil {
		return err
	}
	o := gorgonia.TrainOptions{Rank: *rank, Alpha: float32(*alpha), Targets: strings.Split(*targets, ","),
		LearningRate: *lr, Beta: *beta, Penalty: pen, Lambda: *lambda, Seed: *seed, Margin: *margin}
	var tr *gorgonia.Trainer
	if *init != "" {
		a, err := lora.Load(*init, m.Config, m.File)
		if err != nil {
			return fmt.Errorf("--init %s: %w", *init, err)
		}
		if tr, err = gorgonia.TrainerFrom(model, a, o); err != nil {
			return err
		}
	} else if tr, err = gorgonia.NewTrainer(model, o); err != nil {
		return err
	}
	tok := m.Tokenizer
	if pen != gorgonia.NoPenalty {
		anchor := set
		if *anchorData != "" {
			if anchor, err = readPreferences(*anchorData); err != nil {
				return err
			}
		}
		scored, err := prepare(tr, obj, tok, anchor.Train)
		if err != nil {
			return fmt.Errorf("--anchor-data: %w", err)
		}
		for i := range scored {
			if err := tr.Accumulate(obj, scored[i:i+1]); err != nil {
				return err
			}
		}
		tr.Consolidate()
	}
	train, err := prepare(tr, obj, tok, set.Train)
	if err != nil {
		return err
	}
	evalSet := set
	if *evalData != "" {
		if evalSet, err = readPreferences(*evalData); err != nil {
			return err
		}
	}
	evalItems := evalSet.Eval
	if len(evalItems) == 0 {
		evalItems = evalSet.Train
	}
	pairs := evalItems[0].Chosen != "" && evalItems[0].Rejected != ""
	if pairs {
		before, err := meanMargin(tr, tok, evalItems)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "margin before: %.4f nats (mean log p(chosen) − log p(rejected) over %d eval examples)\n", before, len(evalItems))
	}
	rng := rand.New(rand.NewPCG(*seed, 0xdada))
	perm := func() []int {
		if *inOrder {
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
	for step := range *steps {
		b := make([]gorgonia.Scored, 0, *batch)
		for len(b) < min(*batch, len(train)) {
			if next == len(order) {
				order, next = perm(), 0
			}
			b = append(b, train[order[next]])
			next++
		}
		loss, err := tr.Step(obj, b)
		if err != nil {
			return err
		}
		if step == 0 || (step+1)%max(1, *steps/8) == 0 || step == *steps-1 {
			fmt.Fprintf(e.stdout, "step %d/%d: loss %.4f (%.1f ms a step)\n", step+1, *steps, loss,
				float64(time.Since(start).Microseconds())/1e3/float64(step+1))
		}
	}
	if pairs {
		after, err := meanMargin(tr, tok, evalItems)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "margin after: %.4f nats\n", after)
	}
	a, err := tr.Adapter(strings.TrimSuffix(strings.TrimSuffix(*out, ".gguf"), "/"))
	if err != nil {
		return err
	}
	if err := a.WriteGGUF(*out, kernels.F32); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "wrote %s: rank %d, %d weights, %s, %d steps\n", *out, a.Rank(), len(a.Targets()), obj, *steps)
	return nil
}
