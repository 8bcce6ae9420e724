package backends_test

import (
	"context"
	"slices"
	"testing"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// scriptConstraint allows exactly one token at each step, the next of
// script, and is complete after the last one; it records the budgets the
// engine gave it.
type scriptConstraint struct {
	script  []tokenizer.ID
	at      int
	budgets []int
}

func (c *scriptConstraint) Mask(allowed []uint64, budget int) bool {
	c.budgets = append(c.budgets, budget)
	clear(allowed)
	if c.at >= len(c.script) {
		return false
	}
	id := c.script[c.at]
	allowed[id>>6] |= 1 << (id & 63)
	return true
}

func (c *scriptConstraint) Accept(id tokenizer.ID) bool {
	if c.at >= len(c.script) || c.script[c.at] != id {
		return false
	}
	c.at++
	return true
}

func (c *scriptConstraint) Complete() bool { return c.at == len(c.script) }

// TestEngineConstraint runs constrained choices on the tiny model: every
// choice writes the script however it samples and ends with "stop" at its
// end, each choice with a constraint of its own, told the tokens it has
// left; a constraint that allows nothing ends its choice at once.
func TestEngineConstraint(t *testing.T) {
	e := newEngine(t, openTiny(t), backends.EngineOptions{Parallel: 2})
	script := []tokenizer.ID{7, 900, 7, 33, 1000, 5}
	var made []*scriptConstraint
	newConstraint := func() backends.Constraint {
		c := &scriptConstraint{script: script}
		made = append(made, c)
		return c
	}
	for _, p := range []backends.Params{{}, {Temperature: 1.5, TopK: 50}, backends.DefaultParams()} {
		made = nil
		st, err := e.Submit(context.Background(), backends.Request{Prompt: []tokenizer.ID{1, 2, 3}, MaxTokens: 20, N: 3,
			Sampling: p, Constraint: newConstraint})
		if err != nil {
			t.Fatal(err)
		}
		res, err := drain(st, 3)
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range res {
			if !slices.Equal(c.ids(), script) || c.finish != "stop" || c.err != nil {
				t.Errorf("params %+v choice %d: %v %q %v, want %v stop", p, i, c.ids(), c.finish, c.err, script)
			}
		}
		if len(made) != 3 {
			t.Fatalf("%d constraints made for 3 choices", len(made))
		}
		for _, c := range made {
			if want := []int{20, 19, 18, 17, 16, 15}; !slices.Equal(c.budgets, want) {
				t.Errorf("budgets %v, want %v", c.budgets, want)
			}
		}
	}
	st, err := e.Submit(context.Background(), backends.Request{Prompt: []tokenizer.ID{1}, MaxTokens: 5,
		Constraint: func() backends.Constraint { return &scriptConstraint{} }})
	if err != nil {
		t.Fatal(err)
	}
	res, err := drain(st, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(res[0].tokens) != 0 || res[0].finish != "stop" {
		t.Errorf("a constraint allowing nothing: %v %q", res[0].ids(), res[0].finish)
	}
	// Shorter than the script: the budget runs out first.
	st, err = e.Submit(context.Background(), backends.Request{Prompt: []tokenizer.ID{1}, MaxTokens: 4, Constraint: newConstraint})
	if err != nil {
		t.Fatal(err)
	}
	if res, err = drain(st, 1); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res[0].ids(), script[:4]) || res[0].finish != "length" {
		t.Errorf("max tokens 4: %v %q", res[0].ids(), res[0].finish)
	}
}
