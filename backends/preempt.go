package backends

// makeRoom answers a Forward that found no room in the KV cache, so that
// the next iteration fits: it first lets go of what free slots keep cached;
// then, when the call prefilled, it holds prefill back (while others decode,
// until a choice ends; else to the oldest prefilling choice); then it drops
// the cache of the most recently started choice other than the oldest,
// which recomputes it later (vLLM's recompute preemption). It reports false
// when nothing is left to try.
func (e *Engine) makeRoom(prefilled, decoded bool) bool {
	released := false
	for i := range e.slots {
		if s := &e.slots[i]; s.state == slotFree && s.seq.Len() > 0 {
			s.seq.Reset()
			released = true
		}
	}
	switch {
	case released:
		return true
	case prefilled && decoded:
		e.prefill = prefillNone
		return true
	case prefilled && e.prefill == prefillAll:
		e.prefill = prefillOldest
		return true
	}
	var oldest, victim *slot
	for i := range e.slots {
		s := &e.slots[i]
		if s.state == slotFree || s.state == slotShare {
			continue
		}
		if oldest == nil || s.started < oldest.started {
			oldest = s
		}
	}
	for i := range e.slots {
		s := &e.slots[i]
		if s == oldest || s.state == slotFree || s.state == slotShare || s.seq.Len() == 0 {
			continue
		}
		if victim == nil || s.started > victim.started {
			victim = s
		}
	}
	if victim == nil {
		return false
	}
	if victim.state == slotDecode {
		victim.prompt = append(victim.prompt[:0], victim.seq.Tokens()...)
		victim.resume = true
		victim.state = slotPrefill
	}
	victim.seq.Reset()
	victim.fed, victim.match = 0, true
	e.preempt.Add(1)
	// The victim's blocks stay cached, and it would take them straight
	// back: it resumes once a choice ends (or nothing else can run).
	e.prefill = prefillNone
	return true
}
