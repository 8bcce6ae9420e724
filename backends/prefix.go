package backends

import (
	"slices"

	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// pickSlot chooses the free slot for the next choice of r: the one whose
// cached tokens share the longest prefix with the prompt, the least
// recently used among equals. Cached tokens count only in a slot that ran
// the same adapter at the same scale: they were computed with it, and
// start clears them otherwise. An embedding recomputes everything, so it
// takes the least useful slot.
func (e *Engine) pickSlot(r *request) *slot {
	var best *slot
	bestLen, bestSame := -1, false
	for i := range e.slots {
		s := &e.slots[i]
		if s.state != slotFree {
			continue
		}
		same := r.embed == nil && e.sameAdapter(s, r)
		k := 0
		if same && !e.opt.NoPrefixReuse {
			k = commonPrefix(s.seq.Tokens(), r.prompt)
		}
		better := k > bestLen ||
			k == bestLen && same && !bestSame ||
			k == bestLen && same == bestSame && s.lastUsed < best.lastUsed
		if better {
			best, bestLen, bestSame = s, k, same
		}
	}
	return best
}

// sameAdapter reports whether the slot's sequence runs the request's
// adapter at the request's scale.
func (e *Engine) sameAdapter(s *slot, r *request) bool {
	if !e.adapters {
		return true
	}
	a, scale := s.seq.(AdapterSequence).Adapter()
	return a == r.adapter && scale == r.scale
}

// leaderFor is the slot prefilling the same prompt as s with the same
// adapter and scale, which s can wait for and share; nil when there is
// none or prefix reuse is off.
func (e *Engine) leaderFor(s *slot) *slot {
	if e.opt.NoPrefixReuse {
		return nil
	}
	for i := range e.slots {
		o := &e.slots[i]
		if o != s && o.leads && o.state == slotPrefill && e.sameAdapter(o, s.req) && slices.Equal(o.prompt, s.prompt) {
			return o
		}
	}
	return nil
}

func commonPrefix(cached, prompt []tokenizer.ID) int {
	n := min(len(cached), len(prompt))
	for i := range n {
		if cached[i] != prompt[i] {
			return i
		}
	}
	return n
}

// matchPrefix looks up how much of the slot's prompt is cached and starts
// its prefill after it. At least the last prompt token of a new choice is
// recomputed: its logits are the first sample's.
func (e *Engine) matchPrefix(s *slot) {
	s.match = false
	limit := len(s.prompt) - 1
	if s.resume {
		limit = len(s.prompt)
	}
	k := 0
	if s.req.promptLP && !s.resume {
		// Every prompt token's logits are wanted.
		limit = 0
		s.plp = s.plp[:0]
	}
	if s.req.noCache && !s.resume {
		limit = 0
	}
	if e.opt.NoPrefixReuse {
		s.seq.Reset()
	} else {
		k = s.seq.Reuse(s.prompt, limit)
	}
	s.fed = k
	if s.resume {
		if k == len(s.prompt) {
			s.resume = false
			s.state = slotDecode
		}
		return
	}
	e.cached.Add(uint64(k))
	if s.choice == 0 {
		// Written before the stream's first event, whose send publishes it.
		s.req.stream.CachedTokens = k
	}
}

// share hands the prompt the leader s has just prefilled, and its logits,
// to the choices waiting for it.
func (e *Engine) share(s *slot) {
	s.leads = false
	for i := range e.slots {
		o := &e.slots[i]
		if o.state != slotShare || o.waitFor != s {
			continue
		}
		o.waitFor = nil
		if err := o.seq.ShareFrom(s.seq); err != nil {
			o.state, o.match = slotPrefill, true
			continue
		}
		o.state = slotPrefill
		o.fed, o.match = len(o.prompt), false
		e.cached.Add(uint64(len(o.prompt)))
		if o.choice == 0 {
			// Written before the stream's first event, whose send publishes it.
			o.req.stream.CachedTokens = len(o.prompt)
		}
		copy(o.logits, s.logits)
		if o.req.roomForToken() {
			e.sample(o)
		} else {
			// The stream is full: recompute the last prompt token when
			// it has room again.
			o.fed--
			o.seq.Truncate(o.fed)
		}
	}
}

// release ends the wait of choices for their leader s, which stops before
// it has prefilled: they prefill the prompt themselves.
func (e *Engine) release(s *slot) {
	if !s.leads {
		return
	}
	s.leads = false
	for i := range e.slots {
		if o := &e.slots[i]; o.state == slotShare && o.waitFor == s {
			o.state, o.match, o.waitFor = slotPrefill, true, nil
		}
	}
}
