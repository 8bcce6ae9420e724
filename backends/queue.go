package backends

import (
	"context"
	"fmt"
	"math"

	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// validate checks a request before it takes room in the queue.
func (e *Engine) validate(r *Request) error {
	switch {
	case len(r.Prompt) == 0:
		return fmt.Errorf("%w: the prompt has no tokens", ErrInvalidRequest)
	case r.MaxTokens < 0 || r.MaxTokens == 0 && !r.PromptLogprobs:
		return fmt.Errorf("%w: max tokens %d must be positive (or 0 to only score the prompt)", ErrInvalidRequest, r.MaxTokens)
	case r.MinTokens < 0:
		return fmt.Errorf("%w: min tokens %d must not be negative", ErrInvalidRequest, r.MinTokens)
	case r.N < 0 || r.N > MaxChoices:
		return fmt.Errorf("%w: %d choices is outside 1 … %d", ErrInvalidRequest, r.N, MaxChoices)
	case r.TopLogprobs < -1 || r.TopLogprobs > MaxTopLogprobs:
		return fmt.Errorf("%w: top logprobs %d is outside 0 … %d", ErrInvalidRequest, r.TopLogprobs, MaxTopLogprobs)
	case r.Adapter != nil && !e.adapters:
		return fmt.Errorf("%w: adapter %q: this backend does not run LoRA adapters", ErrInvalidRequest, r.Adapter.Name)
	case r.Adapter != nil && (math.IsNaN(float64(r.AdapterScale)) || math.IsInf(float64(r.AdapterScale), 0)):
		return fmt.Errorf("%w: adapter scale %v is not finite", ErrInvalidRequest, r.AdapterScale)
	case r.Slot != nil && (*r.Slot < 0 || *r.Slot >= e.opt.Parallel):
		return fmt.Errorf("%w: slot %d is outside 0 … %d: %w", ErrInvalidRequest, *r.Slot, e.opt.Parallel-1, ErrNoSlot)
	}
	if len(r.Prompt) > e.opt.MaxLen || r.MaxTokens > e.opt.MaxLen-len(r.Prompt) {
		return fmt.Errorf("%w: %d prompt tokens + %d max tokens > %d, the context length",
			ErrContextLength, len(r.Prompt), r.MaxTokens, e.opt.MaxLen)
	}
	if err := r.Sampling.ValidateVocab(e.info.VocabSize); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	if err := e.validateSpec(r.Speculative); err != nil {
		return err
	}
	return e.checkTokens(r.Prompt)
}

func (e *Engine) checkTokens(tokens []tokenizer.ID) error {
	for i, t := range tokens {
		if t < 0 || int(t) >= e.info.VocabSize {
			return fmt.Errorf("%w: token %d at %d is outside the vocabulary of %d", ErrInvalidRequest, t, i, e.info.VocabSize)
		}
	}
	return nil
}

// enqueue adds req to the queue, unless the engine is closed or the queue
// is full. Free slots take queued requests at the loop's next iteration, so
// they count as room too.
func (e *Engine) enqueue(req *request) error {
	stop := context.AfterFunc(req.ctx, e.signal)
	e.mu.Lock()
	var err error
	switch {
	case e.closed:
		err = ErrClosed
	case len(e.queue) >= e.opt.QueueSize+e.idle:
		err = ErrQueueFull
	default:
		req.stopWake = stop
		e.queue = append(e.queue, req)
	}
	e.mu.Unlock()
	if err != nil {
		stop()
		return err
	}
	e.signal()
	return nil
}

// signal wakes the loop if it waits.
func (e *Engine) signal() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// reap ends the running choices whose context is done.
func (e *Engine) reap() {
	for i := range e.slots {
		s := &e.slots[i]
		if s.state != slotFree {
			if err := s.req.ctx.Err(); err != nil {
				e.finish(s, "", err)
			}
		}
	}
}

// admit ends the queued requests whose context is done and starts the
// choices at the head of the queue in free slots.
func (e *Engine) admit() {
	e.mu.Lock()
	defer e.mu.Unlock()
	kept := e.queue[:0]
	for _, r := range e.queue {
		if err := r.ctx.Err(); err != nil {
			e.endQueued(r, err)
			continue
		}
		kept = append(kept, r)
	}
	clear(e.queue[len(kept):])
	e.queue = kept
	failed := false
	for e.idle > 0 {
		i, s := e.nextAdmission()
		if s == nil {
			break
		}
		r := e.queue[i]
		e.start(r, s)
		failed = failed || s.failed != nil
		e.idle--
		if r.admitted == r.n {
			// Shift rather than reslice, so that the array is reused.
			n := i + copy(e.queue[i:], e.queue[i+1:])
			e.queue[n] = nil
			e.queue = e.queue[:n]
		}
	}
	if failed {
		// finish takes e.mu, so the failed starts end after it is released.
		e.mu.Unlock()
		for i := range e.slots {
			if s := &e.slots[i]; s.failed != nil {
				err := s.failed
				s.failed = nil
				e.finish(s, "", err)
			}
		}
		e.mu.Lock()
	}
}

// nextAdmission is the queued request to start next, by its index in the
// queue, and its slot: the first request whose slot, if it names one, is
// free; s is nil when there is none. e.mu is held.
func (e *Engine) nextAdmission() (i int, s *slot) {
	for i, r := range e.queue {
		if r.slot < 0 {
			return i, e.pickSlot(r)
		}
		if s := &e.slots[r.slot]; s.state == slotFree {
			return i, s
		}
	}
	return -1, nil
}

// endQueued sends the final event of every choice of r that has not
// started and, when none runs any more, closes its stream.
func (e *Engine) endQueued(r *request, err error) {
	for c := r.admitted; c < r.n; c++ {
		r.admitted++
		r.end(c, "", err)
	}
}

// start runs the next choice of r in s; e.mu is held.
func (e *Engine) start(r *request, s *slot) {
	c := r.admitted
	r.admitted++
	s.req, s.choice, s.started = r, c, e.tick
	if c == 0 && r.stream != nil {
		// Written before the stream's first event, whose send publishes it.
		r.stream.Slot = s.id
	}
	if r.adapter != nil {
		if e.adapterChoices == nil {
			e.adapterChoices = map[string]int{}
		}
		e.adapterChoices[r.adapter.Name]++
	}
	s.prompt = append(s.prompt[:0], r.prompt...)
	s.promptLen = len(r.prompt)
	s.made = 0
	e.startSpec(r, s)
	e.prompt.Add(uint64(len(r.prompt)))
	in := &e.slotInfo[s.id]
	in.Processing, in.PromptTokens, in.MaxTokens = true, len(r.prompt), r.maxTokens
	in.Params = r.params
	in.Params.LogitBias = nil
	if c > 0 && r.params.Seed != nil {
		seed := *r.params.Seed + int64(c)
		in.Params.Seed = &seed
	}
	// The adapter is set before the cached tokens are compared with the
	// prompt: a different adapter or scale clears them.
	if e.adapters {
		if err := s.seq.(AdapterSequence).SetAdapter(r.adapter, r.scale); err != nil {
			s.state = slotPrefill
			s.failed = fmt.Errorf("%w: %w", ErrInvalidRequest, err)
			return
		}
	}
	if r.embed != nil {
		s.state = slotEmbed
		s.fed = 0
		s.seq.Reset()
		if s.hidden == nil {
			s.hidden = make([]float32, e.opt.Batch*e.info.Dim)
			s.pool = make([]float64, e.info.Dim)
		}
		clear(s.pool)
		return
	}
	s.state = slotPrefill
	s.fed, s.match, s.resume = 0, true, false
	// A prompt to score is computed in full: it neither shares nor leads.
	s.leads, s.waitFor = !r.promptLP, nil
	if l := e.leaderFor(s); l != nil && !r.promptLP && !r.noCache {
		s.state, s.leads, s.waitFor = slotShare, false, l
	}
	if r.promptLP && s.plogits == nil {
		s.plogits = make([]float32, promptLogitsChunk*e.info.VocabSize)
	}
	p := r.params
	if c > 0 && p.Seed != nil {
		seed := *p.Seed + int64(c)
		p.Seed = &seed
	}
	s.sampler.SetParams(p)
	s.constraint = nil
	if r.constraint != nil {
		s.constraint = r.constraint()
		if s.mask == nil {
			s.mask = make([]uint64, (e.info.VocabSize+63)/64)
		}
		s.sampler.SetMask(s.mask)
	}
}
