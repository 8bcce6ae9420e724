package backends

import "math"

// sample draws the next token of the slot's choice from its logits and
// streams it, or ends the choice.
func (e *Engine) sample(s *slot) {
	r := s.req
	if s.constraint != nil && !s.constraint.Mask(s.mask, r.maxTokens-s.made) {
		// Nothing may follow what the choice has written.
		e.finish(s, "stop", nil)
		return
	}
	if s.made < r.minTokens {
		// Too early to end: the end-of-generation tokens are banned, as
		// a logit bias of -Inf would.
		for _, id := range e.eog {
			s.logits[id] = float32(math.Inf(-1))
		}
	}
	id := s.sampler.Sample(s.logits)
	if e.opt.IsEOG != nil && e.opt.IsEOG(id) {
		e.finish(s, "stop", nil)
		return
	}
	if len(s.block) == 0 {
		s.block = make([]Token, min(r.maxTokens-s.made, tokenBlock))
	}
	tok := &s.block[0]
	s.block = s.block[1:]
	tok.ID = id
	if r.top >= 0 {
		var top []TokenLogprob
		if r.top > 0 {
			top = make([]TokenLogprob, 0, r.top)
		}
		if r.postSampling {
			tok.Logprob, top = s.sampler.PostLogprobs(s.logits, id, r.top, top)
		} else {
			tok.Logprob, top = s.sampler.Logprobs(s.logits, id, r.top, top)
		}
		if len(top) > 0 {
			tok.Top = top
		}
	}
	s.sampler.Accept(id)
	s.made++
	e.gen.Add(1)
	r.send(Event{Choice: s.choice, Token: tok})
	if s.constraint != nil && (!s.constraint.Accept(id) || s.constraint.Complete()) {
		e.finish(s, "stop", nil)
		return
	}
	if s.made == r.maxTokens {
		e.finish(s, "length", nil)
		return
	}
	s.next[0] = id
	s.state = slotDecode
}

// finish ends the slot's choice or embedding (err == nil for a normal end)
// and frees the slot, keeping its cached tokens for prefix reuse.
func (e *Engine) finish(s *slot, reason string, err error) {
	e.release(s)
	r, choice, state := s.req, s.choice, s.state
	s.req, s.state = nil, slotFree
	s.resume, s.match = false, false
	e.prefill = prefillAll
	s.lastUsed = e.tick
	e.updateRunningKV()
	// Free the slot before the receiver can see the end, so that Stats
	// read after the end does not count it.
	e.mu.Lock()
	e.idle++
	e.slotInfo[s.id].Processing = false
	e.slotInfo[s.id].Cached = s.seq.Len()
	if r.adapter != nil {
		if e.adapterChoices[r.adapter.Name]--; e.adapterChoices[r.adapter.Name] <= 0 {
			delete(e.adapterChoices, r.adapter.Name)
		}
	}
	e.mu.Unlock()
	if state == slotEmbed && err == nil {
		r.embed <- embedResult{vec: s.embedding()}
		r.unfinished = 0
		r.stopWake()
		return
	}
	r.end(choice, reason, err)
}

// roomForToken reports whether the stream can take one more token event
// while keeping room for the final event of every unfinished choice. Only
// the loop sends, so the room can only grow meanwhile.
func (r *request) roomForToken() bool {
	return cap(r.events)-len(r.events)-r.unfinished-r.reserved >= 1
}

// sendProgress sends a progress event when the stream has room for it
// beside a token and the final events: progress is best effort.
func (r *request) sendProgress(choice, prefilled int) {
	if cap(r.events)-len(r.events)-r.unfinished-r.reserved >= 2 {
		r.send(Event{Choice: choice, Prefilled: prefilled})
	}
}

// send never blocks: roomForToken and the final events' reserve make room.
func (r *request) send(ev Event) {
	select {
	case r.events <- ev:
	default:
	}
}

// end sends the final event of a choice and closes the stream after the
// last one. An embedding gets its error instead.
func (r *request) end(choice int, reason string, err error) {
	r.unfinished--
	if r.embed != nil {
		r.embed <- embedResult{err: err}
	} else {
		r.send(Event{Choice: choice, Finish: reason, Err: err})
	}
	if r.unfinished == 0 {
		if r.events != nil {
			close(r.events)
		}
		r.stopWake()
	}
}
