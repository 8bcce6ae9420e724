package backends

import (
	"fmt"
	"strings"

	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// Speculative decoding: a decoding sequence's next tokens are guessed
// (drafted) cheaply, and the guesses go into the engine's forward pass
// beside the sequence's last token, so that one pass, which on a CPU costs
// about the reading of the weights, checks k guesses and yields up to k+1
// tokens. The sampler walks the k+1 rows of logits in order (verify in
// stream.go): a guess that the request's own sampling would have made is
// kept, the first that is not is replaced by the sampler's token, and the
// keys and values of the rejected guesses are truncated away. The drafts
// never change the output: greedy requests get the tokens they get
// without, sampled ones the same distribution (Sampler.Verify).

// SpecSource is where a sequence's drafted tokens come from.
type SpecSource uint8

// Draft sources.
const (
	// SpecDefault, in a request, is the engine's source; in EngineOptions
	// it is SpecOff.
	SpecDefault SpecSource = iota
	// SpecOff drafts nothing.
	SpecOff
	// SpecNgram is prompt lookup: the longest recent repeat of the
	// sequence's last tokens in its own prompt and output proposes the
	// tokens that followed it.
	SpecNgram
	// SpecSuffix is SpecNgram plus the outputs of the model's recent
	// requests (a bounded cache the engine keeps per model, apart for
	// each adapter), whose most frequent continuation of the longest
	// matching suffix is proposed.
	SpecSuffix
	// SpecDraft runs a small model of the same vocabulary
	// (SpecOptions.Draft), greedily, on its own KV cache.
	SpecDraft
)

var specNames = [...]string{SpecDefault: "default", SpecOff: "off", SpecNgram: "ngram", SpecSuffix: "suffix", SpecDraft: "draft"}

// String is the source's name, as --spec and requests spell it.
func (s SpecSource) String() string {
	if int(s) < len(specNames) {
		return specNames[s]
	}
	return fmt.Sprintf("SpecSource(%d)", int(s))
}

// ParseSpecSource reads a source's name: off (or none), ngram, suffix,
// draft, or default.
func ParseSpecSource(name string) (SpecSource, error) {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "off", "none":
		return SpecOff, nil
	case "ngram", "lookup":
		return SpecNgram, nil
	case "suffix":
		return SpecSuffix, nil
	case "draft":
		return SpecDraft, nil
	case "default", "":
		return SpecDefault, nil
	}
	return SpecDefault, fmt.Errorf("speculative source %q is not off, ngram, suffix or draft", name)
}

// Limits and defaults of speculative decoding.
const (
	// MaxSpecTokens bounds the tokens drafted for one sequence in one
	// step, of the engine and of a request (llama-server's
	// speculative.n_max), so that a request cannot make the engine
	// allocate huge buffers of logits.
	MaxSpecTokens = 64
	// DefaultSpecMax is SpecOptions.Max when it is 0: with the pending
	// token, a step of one sequence holds 8 tokens, one tile of the
	// batched Q4_0/Q4_K kernels (kernels.MatMulInterleaved), which unpack
	// the weights once per tile; a ninth token starts another tile and
	// the step costs 2.6 one-token steps instead of 1.7 (measured on the
	// tinyllama-1.1b shape at Q4_0: docs/speculative.md).
	DefaultSpecMax = 7
	// DefaultSpecBatch is SpecOptions.MaxBatchTokens when it is 0: no
	// drafts in a step that would hold more tokens than that, the same
	// tile: past it a draft adds a pass over the weights, and 8 streams
	// lost 1–10% with drafts allowed past it (docs/speculative.md).
	DefaultSpecBatch = 8
	// DefaultSuffixTokens is SpecOptions.SuffixTokens when it is 0: the
	// recent output tokens the suffix source remembers.
	DefaultSuffixTokens = 1 << 18
)

// SpecOptions configure the engine's speculative decoding; the zero value
// drafts nothing.
type SpecOptions struct {
	// Source is the draft source of requests that do not choose one;
	// SpecDefault means SpecOff.
	Source SpecSource
	// Max is the most tokens drafted for a sequence in one step (at most
	// MaxSpecTokens); 0 means DefaultSpecMax. Each sequence's draft length
	// follows its recent acceptance below it.
	Max int
	// Min is the fewest drafted tokens worth verifying: a shorter draft is
	// dropped (llama-server's n_min); 0 means 1.
	Min int
	// MaxBatchTokens stops drafting, server-wide, for a step that would
	// hold more tokens (decode tokens and drafts) than that: past it the
	// forward pass is bound by arithmetic, not by reading the weights, and
	// a rejected draft costs what it would save. 0 means
	// DefaultSpecBatch, -1 no limit.
	MaxBatchTokens int
	// Draft is the small model of SpecDraft: a Backend of the same
	// vocabulary, which the engine drives from its loop (the caller
	// closes it after the engine). Requests may choose SpecDraft only
	// when it is set.
	Draft Backend
	// SuffixTokens is the memory of SpecSuffix's cache of recent outputs,
	// in tokens (16 bytes each); 0 means DefaultSuffixTokens.
	SuffixTokens int
}

// SpecParams are a request's own speculative decoding settings; the zero
// value keeps the engine's.
type SpecParams struct {
	// Source is the draft source; SpecDefault keeps the engine's.
	Source SpecSource
	// Max and Min bound the draft length as SpecOptions' do, within the
	// engine's Max; 0 keeps the engine's.
	Max, Min int
}

// validate checks a request's settings against the engine's.
func (e *Engine) validateSpec(p SpecParams) error {
	switch {
	case p.Source > SpecDraft:
		return fmt.Errorf("%w: unknown speculative source %d", ErrInvalidRequest, p.Source)
	case p.Max < 0 || p.Max > MaxSpecTokens:
		return fmt.Errorf("%w: speculative n_max %d is outside 0 … %d", ErrInvalidRequest, p.Max, MaxSpecTokens)
	case p.Min < 0 || p.Min > MaxSpecTokens:
		return fmt.Errorf("%w: speculative n_min %d is outside 0 … %d", ErrInvalidRequest, p.Min, MaxSpecTokens)
	case p.Max > 0 && p.Min > p.Max:
		return fmt.Errorf("%w: speculative n_min %d is above n_max %d", ErrInvalidRequest, p.Min, p.Max)
	case p.Source == SpecDraft && e.opt.Spec.Draft == nil:
		return fmt.Errorf("%w: speculative source draft needs a draft model (--draft)", ErrInvalidRequest)
	}
	return nil
}

// checkSpecOptions fills the defaults of o and checks them against the
// target model.
func checkSpecOptions(o *SpecOptions, b Backend, info ModelInfo) error {
	if o.Source == SpecDefault {
		o.Source = SpecOff
	}
	if o.Max == 0 {
		o.Max = DefaultSpecMax
	}
	if o.Min == 0 {
		o.Min = 1
	}
	if o.MaxBatchTokens == 0 {
		o.MaxBatchTokens = DefaultSpecBatch
	}
	if o.SuffixTokens == 0 {
		o.SuffixTokens = DefaultSuffixTokens
	}
	switch {
	case o.Source > SpecDraft:
		return fmt.Errorf("backends: unknown speculative source %d", o.Source)
	case o.Max < 1 || o.Max > MaxSpecTokens:
		return fmt.Errorf("backends: speculative max %d is outside 1 … %d", o.Max, MaxSpecTokens)
	case o.Min < 1 || o.Min > o.Max:
		return fmt.Errorf("backends: speculative min %d is outside 1 … %d (the max)", o.Min, o.Max)
	case o.MaxBatchTokens < -1:
		return fmt.Errorf("backends: speculative batch limit %d must be -1 (none) or more", o.MaxBatchTokens)
	case o.SuffixTokens < 0 || o.SuffixTokens > 1<<28:
		return fmt.Errorf("backends: suffix cache of %d tokens is outside 0 … %d", o.SuffixTokens, 1<<28)
	case o.Source == SpecDraft && o.Draft == nil:
		return fmt.Errorf("backends: speculative source draft needs a draft model")
	}
	if o.Draft != nil {
		d := o.Draft.Model()
		if d.VocabSize != info.VocabSize {
			return fmt.Errorf("backends: the draft model's vocabulary of %d tokens differs from the model's %d", d.VocabSize, info.VocabSize)
		}
		if o.Draft == b {
			return fmt.Errorf("backends: the draft model is the model itself")
		}
	}
	return nil
}

// specState is a slot's speculative decoding: its source and limits for
// the running choice, the adaptive draft length, and the buffers of a
// step with drafts (made when the slot first drafts, so that the decode
// step allocates nothing).
type specState struct {
	src      SpecSource // SpecOff when the choice drafts nothing
	max, min int
	k        int // the draft length to ask for next
	// fails counts the steps in a row whose drafts were all rejected;
	// after specFailLimit of them the slot pauses for pause steps, which
	// doubles at each pause up to specPauseMax and resets once a draft is
	// accepted.
	fails, pause, backoff int
	// drafted and accepted count the choice's drafted tokens and those
	// kept; n is the number of drafts of the current step.
	drafted, accepted int
	n                 int

	tokens []tokenizer.ID // (Max+1): the step's last token and drafts
	logits []float32      // ((Max+1)·vocab): the step's logits
}

const (
	specFailLimit = 3
	specPauseMin  = 4
	specPauseMax  = 64
	// specStart is the draft length a choice starts with.
	specStart = 4
)

// reset prepares the state for a new choice with source src and limits
// max, min (the request's, within the engine's).
func (sp *specState) reset(src SpecSource, max_, min_ int) {
	sp.src, sp.max, sp.min = src, max_, min_
	sp.k = min(specStart, max_)
	sp.k = max(sp.k, min_)
	sp.fails, sp.pause, sp.backoff = 0, 0, specPauseMin
	sp.drafted, sp.accepted = 0, 0
}

// want is the draft length of the next step: 0 while the slot pauses.
func (sp *specState) want() int {
	if sp.src == SpecOff {
		return 0
	}
	if sp.pause > 0 {
		sp.pause--
		return 0
	}
	return sp.k
}

// update adapts the draft length to a step that verified n drafts and
// accepted acc of them: longer after a full acceptance, cut to what was
// accepted after a partial one, shorter and then paused after failures.
func (sp *specState) update(n, acc int) {
	if n == 0 {
		return
	}
	switch {
	case acc == n:
		sp.k = min(max(2*sp.k, n+1), sp.max)
		sp.fails, sp.backoff = 0, specPauseMin
	case acc > 0:
		sp.k = max(acc+1, sp.min)
		sp.fails, sp.backoff = 0, specPauseMin
	default:
		sp.k = max(sp.k/2, sp.min)
		sp.fails++
		if sp.fails >= specFailLimit {
			sp.fails = 0
			sp.pause = sp.backoff
			sp.backoff = min(2*sp.backoff, specPauseMax)
			sp.k = sp.min
		}
	}
}

// startSpec sets up the speculative decoding of r's next choice in s.
func (e *Engine) startSpec(r *request, s *slot) {
	src := r.spec.Source
	if src == SpecDefault {
		src = e.opt.Spec.Source
	}
	if !e.verifier || r.embed != nil || src == SpecDraft && e.drafter == nil {
		src = SpecOff
	}
	hi := e.opt.Spec.Max
	if r.spec.Max > 0 {
		hi = min(r.spec.Max, hi)
	}
	lo := e.opt.Spec.Min
	if r.spec.Min > 0 {
		lo = r.spec.Min
	}
	lo = min(lo, hi)
	if src == SpecSuffix && e.suffix == nil {
		e.suffix = newSuffixCache(e.opt.Spec.SuffixTokens)
	}
	if src != SpecOff && s.spec.tokens == nil {
		s.spec.tokens = make([]tokenizer.ID, e.opt.Spec.Max+1)
		s.spec.logits = make([]float32, (e.opt.Spec.Max+1)*e.info.VocabSize)
	}
	s.spec.reset(src, hi, lo)
}

// rememberOutput adds what the ending choice in s generated, after the end
// of its prompt, to the suffix cache.
func (e *Engine) rememberOutput(s *slot, r *request) {
	if e.suffix == nil || s.made == 0 || s.seq == nil {
		return
	}
	toks := s.seq.Tokens()
	start := max(0, s.promptLen-suffixPromptTail)
	if start >= len(toks) {
		return
	}
	ns := RunNamespace(r.adapter, r.scale, 0)
	e.suffix.begin(ns)
	e.suffix.add(ns, toks[start:])
}

// canDraft reports whether this iteration may draft: the backend verifies
// drafts, no call lately found no room for them, and no prompt is being
// prefilled (a step with a prompt chunk is bound by arithmetic already).
func (e *Engine) canDraft() bool {
	if !e.verifier || e.tick < e.draftHold {
		return false
	}
	for i := range e.slots {
		if st := e.slots[i].state; st == slotPrefill || st == slotEmbed {
			return false
		}
	}
	return true
}

// planDrafts drafts, for the decode steps of this iteration (the first
// decodes of e.steps, each its slot's pending token with a token's room
// reserved in its stream), the tokens each step verifies, and makes the
// steps with drafts verify them. The drafts of all steps together stay
// within the engine's MaxBatchTokens less the decode tokens; each slot's
// within its adaptive length, its stream's room, its max tokens and its
// context.
func (e *Engine) planDrafts(decodes int) {
	if !e.canDraft() {
		return
	}
	budget := MaxSpecTokens * len(e.slots)
	if e.opt.Spec.MaxBatchTokens >= 0 {
		budget = e.opt.Spec.MaxBatchTokens - decodes
	}
	e.dslots = e.dslots[:0]
	for _, s := range e.owner[:decodes] {
		s.spec.n = 0
		if budget < 1 {
			continue
		}
		r := s.req
		room := cap(r.events) - len(r.events) - r.unfinished - r.reserved
		k := s.spec.want()
		k = min(k, room, r.maxTokens-s.made-1, s.seq.MaxLen()-s.seq.Len()-1, budget)
		if k < s.spec.min || k < 1 {
			continue
		}
		dst := s.spec.tokens[1 : 1+k]
		toks, next := s.seq.Tokens(), s.next[0]
		n := 0
		switch s.spec.src {
		case SpecNgram:
			if start, _ := lookup(toks, next); start >= 0 {
				n = fillNgram(toks, next, start, dst)
			}
		case SpecSuffix:
			start, m := lookup(toks, next)
			var m2 int
			n, m2 = e.suffix.draft(RunNamespace(r.adapter, r.scale, 0), toks, next, dst)
			if start >= 0 && m >= m2 {
				n = fillNgram(toks, next, start, dst)
			}
		case SpecDraft:
			e.dwant[len(e.dslots)] = k
			e.dslots = append(e.dslots, s)
			r.reserved += k
			budget -= k
			continue
		}
		if n >= s.spec.min {
			s.spec.n = n
			r.reserved += n
			budget -= n
		}
	}
	if len(e.dslots) > 0 {
		e.drafter.draft(e.dslots, e.dwant[:len(e.dslots)], e.dgot[:len(e.dslots)])
		for i, s := range e.dslots {
			n := e.dgot[i]
			if n < s.spec.min {
				n = 0
			}
			s.spec.n = n
			s.req.reserved -= e.dwant[i] - n
		}
		clear(e.dslots)
		e.dslots = e.dslots[:0]
	}
	vocab := e.info.VocabSize
	for i, s := range e.owner[:decodes] {
		if n := s.spec.n; n > 0 {
			s.spec.tokens[0] = s.next[0]
			e.steps[i] = Step{Seq: s.seq, Tokens: s.spec.tokens[:n+1], Outputs: AllTokens,
				Logits: s.spec.logits[:(n+1)*vocab], Draft: n}
			s.spec.n = 0
		}
	}
}

// specHold is how many iterations draft nothing after a call with drafts
// found no room in the KV cache.
const specHold = 16

// drafts reports whether a decode step of this iteration has drafts.
func (e *Engine) drafts(decodes int) bool {
	for _, st := range e.steps[:decodes] {
		if st.Draft > 0 {
			return true
		}
	}
	return false
}
