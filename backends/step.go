package backends

import (
	"errors"
	"fmt"
)

// run is the scheduler: the only goroutine that touches the backend, the
// slots and the requests' loop-owned fields.
func (e *Engine) run() {
	defer close(e.exited)
	for {
		select {
		case <-e.done:
			e.shutdown()
			return
		default:
		}
		e.tick++
		e.reap()
		e.runTasks()
		e.admit()
		if !e.step() {
			e.wait()
		}
	}
}

// wait blocks until something may have changed: a request arrived or was
// cancelled, the engine closed, or (when choices wait for their consumers)
// a short while passed.
func (e *Engine) wait() {
	busy := false
	for i := range e.slots {
		busy = busy || e.slots[i].state != slotFree
	}
	if !busy {
		select {
		case <-e.wake:
		case <-e.done:
		}
		return
	}
	e.timer.Reset(pausePoll)
	select {
	case <-e.wake:
	case <-e.done:
	case <-e.timer.C:
	}
	e.timer.Stop()
}

// step runs one iteration: it builds one Forward call from the decode
// tokens of the running choices and up to Batch prompt tokens of the
// starting ones, oldest first, runs it, recovers from a call that failed or
// found no room, and hands each slot its outputs. It reports false when
// there was nothing to run.
func (e *Engine) step() bool {
	decodes := e.buildBatch()
	if len(e.steps) == 0 {
		return false
	}
	err := e.b.Forward(e.steps)
	full, gaveUp := e.recoverForward(err, decodes)
	if full && e.drafts(decodes) {
		// The drafts may be what did not fit: none for a while.
		e.draftHold = e.tick + specHold
	}
	// Published before any stream of this step ends, so that whoever saw
	// the end reads figures that count it.
	e.updateKVBytes()
	e.fanOut(err, full)
	if gaveUp {
		e.failRunning(err)
	}
	return true
}

// buildBatch fills e.steps, and e.owner beside it, with the next Forward
// call: first the decode step of every running choice whose stream has
// room for a token, then prefill chunks (addPrefills). It returns the
// number of decode steps.
func (e *Engine) buildBatch() (decodes int) {
	e.steps, e.owner = e.steps[:0], e.owner[:0]
	for i := range e.slots {
		s := &e.slots[i]
		if s.state != slotDecode || !s.req.roomForToken() {
			continue
		}
		s.req.reserved++
		e.add(s, Step{Seq: s.seq, Tokens: s.next[:], Logits: s.logits})
	}
	decodes = len(e.steps)
	e.planDrafts(decodes)
	budget := e.opt.Batch
	if e.prefill == prefillNone && decodes > 0 {
		budget = 0
	}
	e.addPrefills(budget)
	return decodes
}

// addPrefills adds the next prompt chunks of the prefilling slots and
// embeddings, oldest first, up to budget tokens in all: every such slot
// while prefill is prefillAll, else only the oldest.
func (e *Engine) addPrefills(budget int) {
	for budget > 0 {
		s := e.oldestUnfed()
		if s == nil {
			break
		}
		s.passed = e.tick
		if s.match {
			e.matchPrefix(s)
			if s.state == slotDecode {
				// A resumed choice found all its tokens cached.
				continue
			}
		}
		n := min(len(s.prompt)-s.fed, budget)
		scoring := s.state == slotPrefill && s.req.promptLP && !s.resume
		if scoring {
			n = min(n, promptLogitsChunk)
		}
		st := Step{Seq: s.seq, Tokens: s.prompt[s.fed : s.fed+n]}
		switch {
		case s.state == slotEmbed:
			st.Outputs, st.Hidden = AllTokens, s.hidden[:n*e.info.Dim]
		case scoring:
			st.Outputs, st.Logits = AllTokens, s.plogits[:n*e.info.VocabSize]
			if s.fed+n == len(s.prompt) && s.req.maxTokens > 0 {
				if !s.req.roomForToken() {
					n = 0 // the first token would not fit yet: wait
					break
				}
				s.req.reserved++
			}
		case s.fed+n < len(s.prompt) || s.resume:
		case s.req.roomForToken():
			s.req.reserved++
			st.Logits = s.logits
		default:
			// The first token would not fit in the stream yet: prefill
			// all but the last prompt token.
			n--
			st.Tokens = st.Tokens[:n]
		}
		if n > 0 {
			budget -= n
			e.add(s, st)
		}
		if e.prefill != prefillAll {
			break
		}
	}
}

// recoverForward answers a Forward call that returned err, before its
// outputs are handed out. A failure inside the pass leaves the sequences
// of the call undefined, so they are reset. A call that found no room in
// the KV cache (full) changed nothing; makeRoom then decides who waits.
// When it has nothing left to try (gaveUp), every running choice's
// sequence is reset, and the caller ends those choices once the outputs
// are handed out.
func (e *Engine) recoverForward(err error, decodes int) (full, gaveUp bool) {
	full = errors.Is(err, ErrNoRoom)
	if err != nil && !full {
		for i := range e.steps {
			e.owner[i].seq.Reset()
		}
	}
	gaveUp = full && !e.makeRoom(len(e.steps) > decodes, decodes > 0)
	if gaveUp {
		for i := range e.slots {
			if s := &e.slots[i]; s.state != slotFree && s.state != slotShare {
				s.seq.Reset()
			}
		}
	}
	return full, gaveUp
}

// fanOut hands every slot of the call its outputs (after), or ends its
// choice with the call's error, and drops the call's references to the
// slots' buffers.
func (e *Engine) fanOut(err error, full bool) {
	for i := range e.steps {
		s := e.owner[i]
		s.req.reserved = 0
		switch {
		case full:
			// Nothing ran; makeRoom decided who waits.
		case err != nil:
			e.finish(s, "", fmt.Errorf("backends: forward: %w", err))
		default:
			e.after(s, &e.steps[i])
		}
		e.steps[i], e.owner[i] = Step{}, nil // drop references to buffers
	}
}

// failRunning ends every running choice with err, the error of a call
// that found no room when makeRoom had nothing left to try.
func (e *Engine) failRunning(err error) {
	for i := range e.slots {
		if s := &e.slots[i]; s.state != slotFree && s.state != slotShare {
			e.finish(s, "", fmt.Errorf("backends: forward: %w", err))
		}
	}
}

func (e *Engine) add(s *slot, st Step) {
	e.steps = append(e.steps, st)
	e.owner = append(e.owner, s)
}

// oldestUnfed is the earliest started slot with prompt tokens left that
// this iteration has not considered yet.
func (e *Engine) oldestUnfed() *slot {
	var best *slot
	for i := range e.slots {
		s := &e.slots[i]
		if s.state != slotPrefill && s.state != slotEmbed {
			continue
		}
		if s.passed == e.tick {
			if e.prefill != prefillAll {
				// Only the oldest may prefill, and it has had its turn.
				return nil
			}
			continue
		}
		if best == nil || s.started < best.started {
			best = s
		}
	}
	return best
}

// after handles the outputs of a slot's step.
func (e *Engine) after(s *slot, st *Step) {
	switch s.state {
	case slotEmbed:
		dim := e.info.Dim
		for r := range len(st.Tokens) {
			for j, v := range st.Hidden[r*dim : (r+1)*dim] {
				s.pool[j] += float64(v)
			}
		}
		s.fed += len(st.Tokens)
		if s.fed == len(s.prompt) {
			e.finish(s, "", nil)
		}
	case slotPrefill:
		if st.Outputs == AllTokens {
			e.scorePrompt(s, st)
			return
		}
		s.fed += len(st.Tokens)
		if s.req.progress && !s.resume {
			s.req.sendProgress(s.choice, s.fed)
		}
		switch {
		case s.resume:
			if s.fed == len(s.prompt) {
				s.resume = false
				s.state = slotDecode
			}
		case st.Logits != nil:
			if s.leads {
				e.share(s)
			}
			e.sample(s)
		}
	case slotDecode:
		if st.Draft > 0 {
			e.verify(s, st)
		} else {
			e.sample(s)
		}
	}
}

// scorePrompt handles a prompt chunk of a request that wants its prompt's
// logprobs: each row's log-probability of the next prompt token, and at
// the end of the prompt the stream's PromptLogprobs and the first sample
// (or the end, when nothing is to be generated).
func (e *Engine) scorePrompt(s *slot, st *Step) {
	vocab, r := e.info.VocabSize, s.req
	top := max(r.top, 0)
	for j := range len(st.Tokens) {
		next := s.fed + j + 1
		if next >= len(s.prompt) {
			break
		}
		tok := Token{ID: s.prompt[next]}
		var alts []TokenLogprob
		if top > 0 {
			alts = make([]TokenLogprob, 0, top)
		}
		tok.Logprob, alts = e.plain.Logprobs(st.Logits[j*vocab:(j+1)*vocab], tok.ID, top, alts)
		if len(alts) > 0 {
			tok.Top = alts
		}
		s.plp = append(s.plp, tok)
	}
	s.fed += len(st.Tokens)
	if s.fed < len(s.prompt) {
		return
	}
	if s.choice == 0 {
		// Written before the stream's first event, whose send publishes it.
		r.stream.PromptLogprobs = append([]Token(nil), s.plp...)
	}
	if r.maxTokens == 0 {
		e.finish(s, "length", nil)
		return
	}
	n := len(st.Tokens)
	copy(s.logits, st.Logits[(n-1)*vocab:n*vocab])
	e.sample(s)
}
