package backends

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// ErrNoSlot means a request or a slot task named a slot the engine does
// not have.
var ErrNoSlot = errors.New("backends: no such slot")

// SlotInfo is the state of one slot, as Slots reports it.
type SlotInfo struct {
	// ID is the slot's index, 0 … Parallel-1, as Request.Slot names it.
	ID int
	// Processing is set while a choice or an embedding runs in the slot.
	Processing bool
	// MaxLen is the slot's context in tokens.
	MaxLen int
	// Cached is the tokens the slot's sequence held when its last choice
	// ended or a slot task ran: its prompt and what it generated, which
	// it keeps for prefix reuse.
	Cached int
	// PromptTokens and MaxTokens are those of the slot's running (or
	// last) choice, and Params its sampling, without the logit bias.
	PromptTokens, MaxTokens int
	Params                  Params
}

// Slots reports the state of every slot, in slot order.
func (e *Engine) Slots() []SlotInfo {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.slotInfo)
}

// slotTask is work on one slot's sequence that runs in the loop once the
// slot is free.
type slotTask struct {
	slot int
	f    func(seq Sequence) error
	done chan error // capacity 1
}

// SlotDo runs f on the sequence of slot id from the engine's loop, once no
// choice runs in the slot, and returns f's error. Requests that name the
// slot and arrive after it wait for it; f may change the sequence (Reset,
// or a StateSequence's LoadState) but must not keep it. It fails with
// ErrNoSlot for an id outside 0 … Parallel-1, with ErrClosed when the
// engine closes first, and with ctx's error when ctx ends before f runs.
func (e *Engine) SlotDo(ctx context.Context, id int, f func(seq Sequence) error) error {
	if id < 0 || id >= e.opt.Parallel {
		return fmt.Errorf("%w: slot %d is outside 0 … %d", ErrNoSlot, id, e.opt.Parallel-1)
	}
	t := &slotTask{slot: id, f: f, done: make(chan error, 1)}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return ErrClosed
	}
	e.tasks = append(e.tasks, t)
	e.mu.Unlock()
	e.signal()
	select {
	case err := <-t.done:
		return err
	case <-ctx.Done():
	}
	e.mu.Lock()
	i := slices.Index(e.tasks, t)
	if i >= 0 {
		e.tasks = slices.Delete(e.tasks, i, i+1)
	}
	e.mu.Unlock()
	if i >= 0 {
		return ctx.Err()
	}
	// It has started: it ends within this iteration.
	return <-t.done
}

// runTasks runs the slot tasks whose slots are free, in the order they
// came.
func (e *Engine) runTasks() {
	e.mu.Lock()
	if len(e.tasks) == 0 {
		e.mu.Unlock()
		return
	}
	var ready []*slotTask
	kept := e.tasks[:0]
	for _, t := range e.tasks {
		if e.slots[t.slot].state == slotFree {
			ready = append(ready, t)
		} else {
			kept = append(kept, t)
		}
	}
	clear(e.tasks[len(kept):])
	e.tasks = kept
	e.mu.Unlock()
	for _, t := range ready {
		s := &e.slots[t.slot]
		err := t.f(s.seq)
		s.lastUsed = e.tick
		e.mu.Lock()
		e.slotInfo[t.slot].Cached = s.seq.Len()
		e.mu.Unlock()
		e.updateKVBytes()
		t.done <- err
	}
}
