package backends

import (
	"math"

	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// sample draws the next token of the slot's choice from its logits and
// streams it, or ends the choice.
func (e *Engine) sample(s *slot) {
	id, _, reason := e.sampleRow(s, s.logits, -1)
	if reason != "" {
		e.finish(s, reason, nil)
		return
	}
	s.next[0] = id
	s.state = slotDecode
}

// sampleRow draws the choice's next token from row, the logits after its
// last token (which it may change), verifying draft when it is not -1
// (Sampler.Verify: accepted reports that the token is the draft), and
// streams it. reason is why the choice ends now ("stop", "length"), ""
// while it runs; the caller ends it. The request's logit processing sees
// every token streamed before, as without drafts.
func (e *Engine) sampleRow(s *slot, row []float32, draft tokenizer.ID) (id tokenizer.ID, accepted bool, reason string) {
	r := s.req
	if s.constraint != nil && !s.constraint.Mask(s.mask, r.maxTokens-s.made) {
		// Nothing may follow what the choice has written.
		return -1, false, "stop"
	}
	if s.made < r.minTokens {
		// Too early to end: the end-of-generation tokens are banned, as
		// a logit bias of -Inf would.
		for _, id := range e.eog {
			row[id] = float32(math.Inf(-1))
		}
	}
	if draft >= 0 {
		id, accepted = s.sampler.Verify(row, draft)
		if accepted {
			s.spec.accepted++
		}
	} else {
		id = s.sampler.Sample(row)
	}
	if e.opt.IsEOG != nil && e.opt.IsEOG(id) {
		return id, accepted, "stop"
	}
	if len(s.block) == 0 {
		s.block = make([]Token, min(r.maxTokens-s.made, tokenBlock))
	}
	tok := &s.block[0]
	s.block = s.block[1:]
	tok.ID = id
	tok.Drafted, tok.Accepted = s.spec.drafted, s.spec.accepted
	if r.top >= 0 {
		var top []TokenLogprob
		if r.top > 0 {
			top = make([]TokenLogprob, 0, r.top)
		}
		if r.postSampling {
			tok.Logprob, top = s.sampler.PostLogprobs(row, id, r.top, top)
		} else {
			tok.Logprob, top = s.sampler.Logprobs(row, id, r.top, top)
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
		return id, accepted, "stop"
	}
	if s.made == r.maxTokens {
		return id, accepted, "length"
	}
	return id, accepted, ""
}

// verify walks the rows of a decode step with drafts (st.Tokens: the
// choice's pending token, then the drafts): each row's token is sampled,
// verifying the draft that follows in the step, until a draft is
// rejected, the choice ends, or every draft was kept and the last row
// gave one token more. The sequence keeps the tokens whose rows were
// used and forgets the rest, so it holds what it would hold without
// drafts.
func (e *Engine) verify(s *slot, st *Step) {
	vocab := e.info.VocabSize
	n := st.Draft
	base := s.seq.Len() - len(st.Tokens)
	s.spec.drafted += n
	rows, acc := 0, 0
	var id tokenizer.ID
	reason := ""
	for i := 0; i <= n; i++ {
		draft := tokenizer.ID(-1)
		if i < n {
			draft = st.Tokens[i+1]
		}
		var ok bool
		id, ok, reason = e.sampleRow(s, st.Logits[i*vocab:(i+1)*vocab], draft)
		rows = i + 1
		if ok {
			acc++
		}
		if reason != "" || !ok {
			break
		}
	}
	// Truncating within the tokens held cannot fail.
	_ = s.seq.Truncate(base + rows)
	s.spec.update(n, acc)
	e.drafted.Add(uint64(n))
	e.accepted.Add(uint64(acc))
	if reason != "" {
		e.finish(s, reason, nil)
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
	if state != slotEmbed {
		e.rememberOutput(s, r)
	}
	r.endWith(Event{Choice: choice, Finish: reason, Err: err, Drafted: s.spec.drafted, Accepted: s.spec.accepted})
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
	r.endWith(Event{Choice: choice, Finish: reason, Err: err})
}

// endWith is end with the final event ev.
func (r *request) endWith(ev Event) {
	r.unfinished--
	if r.embed != nil {
		r.embed <- embedResult{err: ev.Err}
	} else {
		r.send(ev)
	}
	if r.unfinished == 0 {
		if r.events != nil {
			close(r.events)
		}
		r.stopWake()
	}
}
