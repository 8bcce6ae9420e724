package backends

import (
	"cmp"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"

	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// Limits and defaults of the sampling parameters.
const (
	// DefaultRepeatLastN is the penalty window when Params.RepeatLastN is 0,
	// llama.cpp's default.
	DefaultRepeatLastN = 64
	// MaxRepeatLastN bounds the penalty window so that a request cannot make
	// the sampler allocate a huge ring buffer.
	MaxRepeatLastN = 1 << 20
	// MaxTopLogprobs is the most alternatives Logprobs reports, as OpenAI's
	// top_logprobs allows.
	MaxTopLogprobs = 20
	// MaxLogitBias is the largest magnitude of a logit bias, as OpenAI allows.
	MaxLogitBias = 100
)

// Params configure a Sampler. The zero value samples greedily with every
// filter and penalty off; DefaultParams gives llama.cpp's defaults.
//
// The sampler applies them in llama.cpp's default chain order: logit bias,
// penalties, top-k, top-p, min-p, temperature, then a draw from the
// remaining distribution. Top-k, top-p and min-p therefore see the
// distribution at temperature 1.
type Params struct {
	// Temperature divides the logits before the draw; 0 or less picks the
	// most likely token (argmax of the biased and penalised logits).
	Temperature float32
	// TopK keeps the K most likely tokens; 0 (or K >= vocab) is off.
	TopK int
	// TopP keeps the smallest set of most likely tokens whose probability
	// sums to at least TopP; 0 and 1 (or more) are off.
	TopP float32
	// MinP keeps the tokens whose probability is at least MinP times that of
	// the most likely token; 0 is off.
	MinP float32
	// RepeatPenalty divides a positive logit, and multiplies a negative one,
	// of every token seen in the penalty window; 0 and 1 are off.
	RepeatPenalty float32
	// RepeatLastN is the penalty window, in accepted tokens, shared by all
	// three penalties as in llama.cpp: 0 means DefaultRepeatLastN, -1 every
	// token accepted since the last Reset (OpenAI's semantics).
	RepeatLastN int
	// PresencePenalty is subtracted from the logit of every token that
	// occurs in the penalty window (OpenAI's presence_penalty).
	PresencePenalty float32
	// FrequencyPenalty times a token's count in the penalty window is
	// subtracted from its logit (OpenAI's frequency_penalty).
	FrequencyPenalty float32
	// LogitBias is added to the logits of the given token ids before
	// anything else; -100 effectively bans a token and +100 forces it.
	// Ids outside the vocabulary are ignored by NewSampler (ValidateVocab
	// reports them).
	LogitBias map[tokenizer.ID]float32
	// Seed makes the draws reproducible: the same seed, parameters and
	// logits give the same tokens. nil draws a random seed.
	Seed *int64
}

// DefaultParams are llama.cpp's default sampling settings (temperature 0.8,
// top-k 40, top-p 0.95, min-p 0.05, no penalties), for callers that want
// llama-server's behaviour when a request leaves a field out.
func DefaultParams() Params {
	return Params{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1}
}

// ParamError is a sampling parameter out of range. Param is the name of the
// OpenAI (or llama-server) request field, so that an API can report it.
type ParamError struct {
	Param string
	Msg   string
}

func (e *ParamError) Error() string { return "invalid " + e.Param + ": " + e.Msg }

// Validate reports the first parameter outside the range OpenAI (or, for the
// fields OpenAI lacks, llama-server) accepts.
func (p Params) Validate() error {
	finite := func(v float32) bool { return !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0) }
	inRange := func(name string, v, lo, hi float32) error {
		if !finite(v) || v < lo || v > hi {
			return &ParamError{name, fmt.Sprintf("%v is outside [%v, %v]", v, lo, hi)}
		}
		return nil
	}
	if err := inRange("temperature", p.Temperature, 0, 2); err != nil {
		return err
	}
	if p.TopK < 0 {
		return &ParamError{"top_k", fmt.Sprintf("%d is negative", p.TopK)}
	}
	if err := inRange("top_p", p.TopP, 0, 1); err != nil {
		return err
	}
	if err := inRange("min_p", p.MinP, 0, 1); err != nil {
		return err
	}
	if !finite(p.RepeatPenalty) || p.RepeatPenalty < 0 {
		return &ParamError{"repeat_penalty", fmt.Sprintf("%v is not a finite non-negative number", p.RepeatPenalty)}
	}
	if p.RepeatLastN < -1 || p.RepeatLastN > MaxRepeatLastN {
		return &ParamError{"repeat_last_n", fmt.Sprintf("%d is outside [-1, %d]", p.RepeatLastN, MaxRepeatLastN)}
	}
	if err := inRange("presence_penalty", p.PresencePenalty, -2, 2); err != nil {
		return err
	}
	if err := inRange("frequency_penalty", p.FrequencyPenalty, -2, 2); err != nil {
		return err
	}
	for id, b := range p.LogitBias {
		if id < 0 {
			return &ParamError{"logit_bias", fmt.Sprintf("token id %d is negative", id)}
		}
		if !finite(b) || b < -MaxLogitBias || b > MaxLogitBias {
			return &ParamError{"logit_bias", fmt.Sprintf("bias %v of token %d is outside [-%d, %d]", b, id, MaxLogitBias, MaxLogitBias)}
		}
	}
	return nil
}

// ValidateVocab is Validate plus a check that every logit bias names a token
// of a vocabulary of the given size.
func (p Params) ValidateVocab(vocab int) error {
	if err := p.Validate(); err != nil {
		return err
	}
	for id := range p.LogitBias {
		if int(id) >= vocab {
			return &ParamError{"logit_bias", fmt.Sprintf("token id %d is outside the vocabulary of %d tokens", id, vocab)}
		}
	}
	return nil
}

// TokenLogprob is a token and its log-probability.
type TokenLogprob struct {
	ID      tokenizer.ID
	Logprob float32
}

// candidate is a token still in the running after the filters so far.
type candidate struct {
	id    int32
	logit float32
}

type biasEntry struct {
	id   int32
	bias float32
}

// Top-p without top-k sorts only the tokens whose logit lies within
// pBuckets/bucketsPerNat nats of the maximum, found with a histogram of
// probability mass; the last bucket holds everything further away.
const (
	pBuckets      = 128
	bucketsPerNat = 4
)

// Sampler picks the next token from a row of logits. It owns every buffer it
// needs, sized once for the vocabulary, so Sample, Logprobs and Accept
// allocate nothing. A Sampler serves one sequence and is not safe for
// concurrent use.
type Sampler struct {
	vocab int

	greedy  bool
	invTemp float32
	topK    int     // 0: off
	topP    float64 // 0: off
	minP    bool
	logMinP float32
	bias    []biasEntry

	// Penalty state: the last window accepted tokens in a ring (unused when
	// the window is unbounded), each token's count in it, and the distinct
	// tokens with a non-zero count (slot[t] is t's index in distinct), so
	// that applying the penalties costs O(distinct), not O(vocab).
	penalize bool
	repeat   float32
	presence float32
	freq     float32
	window   int // -1: unbounded
	ring     []int32
	ringHead int
	ringLen  int
	count    []int32
	slot     []int32
	distinct []int32

	seedSet bool
	seed    uint64
	rng     rand.PCG

	work []float32   // (vocab) biased, penalised logits; later scratch
	cand []candidate // (vocab) candidates of the filters

	// mask, when set, holds one bit per token: the tokens a constraint
	// allows; the others are never drawn.
	mask []uint64

	bucketMass [pBuckets]float64
}

// NewSampler returns a sampler for logits of vocab entries (vocab > 0).
// It does not validate p (call Validate first); out-of-range values are
// taken as the nearest setting that means something (a NaN temperature is
// greedy, a negative top-k is off, and so on).
func NewSampler(p Params, vocab int) *Sampler {
	if vocab <= 0 {
		panic(fmt.Sprintf("backends: NewSampler with vocabulary size %d", vocab))
	}
	s := &Sampler{
		vocab: vocab,
		work:  make([]float32, vocab),
		cand:  make([]candidate, vocab),
	}
	s.SetParams(p)
	return s
}

// SetParams reconfigures the sampler for p as NewSampler(p, vocab) would,
// keeping its buffers, so that an engine can reuse one sampler per slot
// across requests. It forgets the accepted tokens and restarts the random
// stream, as Reset does. It allocates only when p needs a buffer the
// sampler does not have yet (penalties, or a longer penalty window).
func (s *Sampler) SetParams(p Params) {
	// Forget the accepted tokens while the old window still describes them.
	for _, t := range s.distinct {
		s.count[t] = 0
	}
	s.distinct = s.distinct[:0]
	s.ringHead, s.ringLen = 0, 0

	vocab := s.vocab
	s.greedy = !(p.Temperature > 0)
	s.invTemp = 0
	if !s.greedy {
		s.invTemp = 1 / p.Temperature
	}
	s.topK = 0
	if p.TopK > 0 && p.TopK < vocab {
		s.topK = p.TopK
	}
	s.topP = 0
	if p.TopP > 0 && p.TopP < 1 {
		s.topP = float64(p.TopP)
	}
	s.minP, s.logMinP = false, 0
	if p.MinP > 0 && p.MinP <= 1 {
		s.minP = true
		s.logMinP = float32(math.Log(float64(p.MinP)))
	}

	s.bias = s.bias[:0]
	for id, b := range p.LogitBias {
		if id >= 0 && int(id) < vocab && b == b && b != 0 {
			s.bias = append(s.bias, biasEntry{int32(id), b})
		}
	}
	// Map order is random; a fixed order keeps the sampler's state the same
	// for the same parameters.
	slices.SortFunc(s.bias, func(a, b biasEntry) int { return cmp.Compare(a.id, b.id) })

	s.repeat = 1
	if p.RepeatPenalty > 0 && !math.IsInf(float64(p.RepeatPenalty), 0) {
		s.repeat = p.RepeatPenalty
	}
	s.presence = 0
	if p.PresencePenalty == p.PresencePenalty {
		s.presence = p.PresencePenalty
	}
	s.freq = 0
	if p.FrequencyPenalty == p.FrequencyPenalty {
		s.freq = p.FrequencyPenalty
	}
	s.penalize = s.repeat != 1 || s.presence != 0 || s.freq != 0
	s.window = 0
	if s.penalize {
		s.window = p.RepeatLastN
		switch {
		case s.window == 0:
			s.window = DefaultRepeatLastN
		case s.window < -1:
			s.window = -1
		case s.window > MaxRepeatLastN:
			s.window = MaxRepeatLastN
		}
		distinctCap := vocab
		if s.window > 0 {
			if cap(s.ring) < s.window {
				s.ring = make([]int32, s.window)
			}
			s.ring = s.ring[:s.window]
			distinctCap = min(s.window, vocab)
		}
		if s.count == nil {
			s.count = make([]int32, vocab)
			s.slot = make([]int32, vocab)
		}
		// Accept appends to distinct: it must never grow there.
		if cap(s.distinct) < distinctCap {
			s.distinct = make([]int32, 0, distinctCap)
		}
	}

	s.mask = nil
	s.seedSet, s.seed = false, 0
	if p.Seed != nil {
		s.seedSet = true
		s.seed = uint64(*p.Seed)
	}
	s.Reset()
}

// SetMask makes the sampler draw only among the tokens whose bit is set in
// mask (one bit per token id, (vocab+63)/64 words), read at every Sample
// and Logprobs until the next SetMask or SetParams; nil allows every
// token. The caller keeps mask and may change its bits between steps, as
// a constraint does. Masked tokens have probability 0 (logprob -Inf);
// when no bit is set, every token is masked and greedy picks token 0.
func (s *Sampler) SetMask(mask []uint64) {
	if mask != nil && len(mask) != (s.vocab+63)/64 {
		panic(fmt.Sprintf("backends: a mask of %d words for a sampler of vocabulary %d", len(mask), s.vocab))
	}
	s.mask = mask
}

// Seed is the seed of the current draws: Params.Seed, or the random seed
// drawn at the last Reset, so that a run can be reproduced.
func (s *Sampler) Seed() int64 { return int64(s.seed) }

// Reset forgets the accepted tokens and restarts the random stream: from
// Params.Seed if it was given, else from a fresh random seed.
func (s *Sampler) Reset() {
	for _, t := range s.distinct {
		s.count[t] = 0
	}
	s.distinct = s.distinct[:0]
	s.ringHead, s.ringLen = 0, 0
	if !s.seedSet {
		s.seed = rand.Uint64()
	}
	// The second PCG word is fixed: the seed alone picks the stream.
	s.rng.Seed(s.seed, 0x9e3779b97f4a7c15)
}

// Accept records a token of the sequence (generated, or prompt tokens if the
// caller wants them penalised too) for the penalties. Ids outside the
// vocabulary are ignored.
func (s *Sampler) Accept(id tokenizer.ID) {
	if !s.penalize || id < 0 || int(id) >= s.vocab {
		return
	}
	t := id
	if s.window > 0 {
		if s.ringLen == s.window {
			s.uncount(s.ring[s.ringHead])
			s.ring[s.ringHead] = t
			s.ringHead++
			if s.ringHead == s.window {
				s.ringHead = 0
			}
		} else {
			i := s.ringHead + s.ringLen
			if i >= s.window {
				i -= s.window
			}
			s.ring[i] = t
			s.ringLen++
		}
	}
	if s.count[t] == 0 {
		s.slot[t] = int32(len(s.distinct))
		s.distinct = append(s.distinct, t)
	}
	s.count[t]++
}

func (s *Sampler) uncount(t int32) {
	s.count[t]--
	if s.count[t] > 0 {
		return
	}
	i, last := s.slot[t], s.distinct[len(s.distinct)-1]
	s.distinct[i] = last
	s.slot[last] = i
	s.distinct = s.distinct[:len(s.distinct)-1]
}

// prepare copies logits into the sampler's buffer and applies the logit
// bias and the penalties, in that order, as llama.cpp's chain does.
func (s *Sampler) prepare(logits []float32) []float32 {
	if len(logits) != s.vocab {
		panic(fmt.Sprintf("backends: %d logits for a sampler of vocabulary %d", len(logits), s.vocab))
	}
	w := s.work
	copy(w, logits)
	for _, b := range s.bias {
		w[b.id] += b.bias
	}
	if s.penalize {
		for _, t := range s.distinct {
			c := float32(s.count[t])
			l := w[t]
			// Dividing a negative logit would raise it: llama.cpp (after
			// CTRL) multiplies those instead.
			if l <= 0 {
				l *= s.repeat
			} else {
				l /= s.repeat
			}
			w[t] = l - c*s.freq - s.presence
		}
	}
	if s.mask != nil {
		applyMask(w, s.mask)
	}
	return w
}

// applyMask sets to -Inf the entries of w whose bit in mask is clear,
// skipping the words with every bit set (most of them, where a grammar
// allows almost anything).
func applyMask(w []float32, mask []uint64) {
	negInf := float32(math.Inf(-1))
	for i, m := range mask {
		if m == ^uint64(0) {
			continue
		}
		base := i * 64
		for off := ^m; off != 0; off &= off - 1 {
			if j := base + bits.TrailingZeros64(off); j < len(w) {
				w[j] = negInf
			}
		}
	}
}

// Sample picks the next token from logits (vocab entries, the model's raw
// scores; not modified). It panics if len(logits) is not the vocabulary
// size. Sample does not record the token: call Accept with the token the
// sequence actually continues with.
func (s *Sampler) Sample(logits []float32) tokenizer.ID {
	w := s.prepare(logits)
	if s.greedy {
		return tokenizer.ID(argmax(w))
	}
	c := s.filter(w)
	if c == nil {
		return tokenizer.ID(s.drawAll(w))
	}
	return tokenizer.ID(s.draw(c))
}

// Verify decides a token that speculative decoding drafted for this step
// (a point mass: the drafter proposed draft and nothing else) from the
// step's logits, so that the token it returns has exactly the distribution
// Sample draws from. A greedy sampler returns the most likely token, which
// accepts the draft when it is that token. Otherwise the draft is accepted
// with its probability p(draft) under the distribution Sample draws from
// (after the bias, penalties, mask, filters and temperature); when it is
// not, the token is drawn from that distribution with the draft left out,
// p(x)/(1-p(draft)). Together, P(x) = p(draft)·[x = draft] +
// (1-p(draft))·p(x)/(1-p(draft))·[x ≠ draft] = p(x). A rejection takes
// two random numbers where Sample takes one, so a seeded run with drafts
// draws other tokens than one without (with the same distribution).
func (s *Sampler) Verify(logits []float32, draft tokenizer.ID) (id tokenizer.ID, accepted bool) {
	w := s.prepare(logits)
	if s.greedy {
		id = tokenizer.ID(argmax(w))
		return id, id == draft
	}
	if c := s.filter(w); c != nil {
		return s.verifyCandidates(c, int32(draft))
	}
	return s.verifyAll(w, int32(draft))
}

// verifyCandidates is Verify's draw over the candidates the filters kept;
// it overwrites their logits with the unnormalised probabilities.
func (s *Sampler) verifyCandidates(c []candidate, draft int32) (tokenizer.ID, bool) {
	m := float32(math.Inf(-1))
	best := 0
	for i, x := range c {
		if x.logit > m {
			m, best = x.logit, i
		}
	}
	if math.IsInf(float64(m), 0) {
		return tokenizer.ID(c[best].id), c[best].id == draft
	}
	var sum, pd float64
	for i := range c {
		e := expNeg((c[i].logit - m) * s.invTemp)
		c[i].logit = e
		sum += float64(e)
		if c[i].id == draft {
			pd = float64(e)
		}
	}
	if !(sum > 0) || math.IsInf(sum, 0) {
		return tokenizer.ID(c[best].id), c[best].id == draft
	}
	if s.uniform()*sum < pd {
		return tokenizer.ID(draft), true
	}
	// The residual: the same weights with the draft's taken out.
	var rest float64
	for i := range c {
		if c[i].id == draft {
			c[i].logit = 0
		}
		rest += float64(c[i].logit)
	}
	if !(rest > 0) {
		return tokenizer.ID(draft), true // the draft had all the mass
	}
	u := s.uniform() * rest
	var cum float64
	for _, x := range c {
		cum += float64(x.logit)
		if cum > u {
			return tokenizer.ID(x.id), false
		}
	}
	for i := len(c) - 1; i >= 0; i-- {
		if c[i].logit > 0 {
			return tokenizer.ID(c[i].id), false
		}
	}
	return tokenizer.ID(draft), true
}

// verifyAll is Verify's draw over the whole vocabulary (no filter on); it
// overwrites w with the unnormalised probabilities.
func (s *Sampler) verifyAll(w []float32, draft int32) (tokenizer.ID, bool) {
	best := argmax(w)
	m := w[best]
	if math.IsInf(float64(m), 0) || m != m {
		return tokenizer.ID(best), int32(best) == draft
	}
	var sum float64
	for i, v := range w {
		e := expNeg((v - m) * s.invTemp)
		w[i] = e
		sum += float64(e)
	}
	if !(sum > 0) || math.IsInf(sum, 0) {
		return tokenizer.ID(best), int32(best) == draft
	}
	var pd float64
	if draft >= 0 && int(draft) < len(w) {
		pd = float64(w[draft])
	}
	if s.uniform()*sum < pd {
		return tokenizer.ID(draft), true
	}
	rest := sum - pd
	if draft >= 0 && int(draft) < len(w) {
		w[draft] = 0
		rest = 0
		for _, e := range w {
			rest += float64(e)
		}
	}
	if !(rest > 0) {
		return tokenizer.ID(draft), true
	}
	u := s.uniform() * rest
	var cum float64
	for i, e := range w {
		cum += float64(e)
		if cum > u {
			return tokenizer.ID(i), false
		}
	}
	for i := len(w) - 1; i >= 0; i-- {
		if w[i] > 0 {
			return tokenizer.ID(i), false
		}
	}
	return tokenizer.ID(best), int32(best) == draft
}

// filter applies top-k, top-p and min-p to the prepared logits w and returns
// the surviving candidates in no particular order, or nil when no filter is
// on (every token stays).
func (s *Sampler) filter(w []float32) []candidate {
	var c []candidate
	if s.topK > 0 {
		c = s.topKOf(w, s.topK)
	}
	if s.topP > 0 {
		if c != nil {
			c = topPOfSorted(c, s.topP)
		} else {
			c = s.topPOf(w, s.topP)
		}
	}
	if s.minP {
		if c != nil {
			c = minPOfCandidates(c, s.logMinP)
		} else {
			c = s.minPOf(w, s.logMinP)
		}
	}
	return c
}

// argmax is the first index of the largest value; NaNs never win, and an
// all-NaN row gives 0.
func argmax(w []float32) int {
	m := maxOf(w)
	for i, v := range w {
		if v == m {
			return i
		}
	}
	return 0
}

// maxOf is the largest value of w ignoring NaNs, -Inf if there is none. Four
// running maxima keep the comparisons independent, which roughly halves the
// time of one pass over a large vocabulary.
func maxOf(w []float32) float32 {
	m0 := float32(math.Inf(-1))
	m1, m2, m3 := m0, m0, m0
	i := 0
	for ; i+4 <= len(w); i += 4 {
		x := w[i : i+4 : i+4]
		if x[0] > m0 {
			m0 = x[0]
		}
		if x[1] > m1 {
			m1 = x[1]
		}
		if x[2] > m2 {
			m2 = x[2]
		}
		if x[3] > m3 {
			m3 = x[3]
		}
	}
	for ; i < len(w); i++ {
		if w[i] > m0 {
			m0 = w[i]
		}
	}
	return max(m0, m1, m2, m3)
}

// ranksBelow orders candidates: a lower logit, or an equal logit and a
// higher id, ranks below. Ties therefore go to the lower id, as in argmax.
func ranksBelow(a, b candidate) bool {
	return a.logit < b.logit || (a.logit == b.logit && a.id > b.id)
}

func compareDesc(a, b candidate) int {
	if ranksBelow(b, a) {
		return -1
	}
	if ranksBelow(a, b) {
		return 1
	}
	return 0
}

// siftDown restores the min-heap (by ranksBelow) below h[i].
func siftDown(h []candidate, i int) {
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && ranksBelow(h[r], h[l]) {
			m = r
		}
		if !ranksBelow(h[m], h[i]) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// topKOf selects the k best tokens of w (0 < k <= len(w)) with a min-heap of
// size k, O(vocab + k log k · log(vocab/k)) for typical logits, and returns
// them sorted by decreasing logit.
func (s *Sampler) topKOf(w []float32, k int) []candidate {
	h := s.cand[:k]
	for i := range h {
		v := w[i]
		if v != v {
			v = float32(math.Inf(-1))
		}
		h[i] = candidate{int32(i), v}
	}
	for i := k/2 - 1; i >= 0; i-- {
		siftDown(h, i)
	}
	// A later token with the same logit as the root ranks below it (higher
	// id), so only a strictly larger logit enters; NaN never does.
	thr := h[0].logit
	for i := k; i < len(w); i++ {
		if v := w[i]; v > thr {
			h[0] = candidate{int32(i), v}
			siftDown(h, 0)
			thr = h[0].logit
		}
	}
	// Heapsort: moving the minimum to the end leaves the best first.
	for end := k - 1; end > 0; end-- {
		h[0], h[end] = h[end], h[0]
		siftDown(h[:end], 0)
	}
	return h
}

// topPOfSorted keeps the shortest prefix of c (sorted by decreasing logit)
// whose softmax mass reaches p.
func topPOfSorted(c []candidate, p float64) []candidate {
	m := c[0].logit
	var sum float64
	for _, x := range c {
		sum += float64(expNeg(x.logit - m))
	}
	target, cum := p*sum, 0.0
	for i, x := range c {
		cum += float64(expNeg(x.logit - m))
		if cum >= target {
			return c[:i+1]
		}
	}
	return c
}

// topPOf is top-p over the whole vocabulary without sorting it. One pass
// histograms the probability mass by distance from the maximum logit; the
// histogram gives the bucket where the cumulative mass reaches p. Every token
// of the nearer buckets is kept, and only the tokens of that bucket are
// sorted to find the exact cut. The result is not sorted.
func (s *Sampler) topPOf(w []float32, p float64) []candidate {
	m := maxOf(w)
	if math.IsInf(float64(m), 0) {
		// All -Inf/NaN, or an +Inf logit that takes all the mass.
		i := argmax(w)
		s.cand[0] = candidate{int32(i), w[i]}
		return s.cand[:1]
	}
	mass := &s.bucketMass
	clear(mass[:])
	var sum float64
	for _, v := range w {
		b := pBuckets - 1
		// d >= 0 as m is the maximum; NaN fails the test and lands last.
		if d := (m - v) * bucketsPerNat; d < pBuckets-1 {
			b = int(d)
		}
		e := float64(expNeg(v - m))
		mass[b] += e
		sum += e
	}
	target, cum, last := p*sum, 0.0, pBuckets-1
	for b, x := range mass {
		if cum+x >= target {
			last = b
			break
		}
		cum += x
	}

	// One pass splits the tokens: those of nearer buckets fill s.cand from
	// the front, those of bucket last fill it from the back. The bucket test
	// is the expression above, so the same tokens fall in.
	front, back := 0, len(s.cand)
	lo, hi := float32(last), float32(last+1)
	overflow := last == pBuckets-1
	for i, v := range w {
		d := (m - v) * bucketsPerNat
		switch {
		case d < lo:
			s.cand[front] = candidate{int32(i), v}
			front++
		case d < hi || (overflow && v == v):
			back--
			s.cand[back] = candidate{int32(i), v}
		}
	}
	n := copy(s.cand[front:], s.cand[back:])
	edge := s.cand[front : front+n]
	slices.SortFunc(edge, compareDesc)
	// cum is the mass before bucket last, which is below the target.
	for i, x := range edge {
		cum += float64(expNeg(x.logit - m))
		if cum >= target {
			return s.cand[:front+i+1]
		}
	}
	// Summing in another order fell short by a rounding error: keep all.
	return s.cand[:front+n]
}

// minPOfCandidates keeps, in place and in order, the candidates whose
// probability is at least p_min times the largest: logit >= max + ln(p_min).
func minPOfCandidates(c []candidate, logMinP float32) []candidate {
	m := float32(math.Inf(-1))
	for _, x := range c {
		if x.logit > m {
			m = x.logit
		}
	}
	thr := m + logMinP
	kept := c[:0]
	for _, x := range c {
		if x.logit >= thr {
			kept = append(kept, x)
		}
	}
	return kept
}

// minPOf is min-p over the whole vocabulary; the kept tokens stay in id
// order.
func (s *Sampler) minPOf(w []float32, logMinP float32) []candidate {
	m := maxOf(w)
	c := s.cand[:0]
	if math.IsInf(float64(m), 0) {
		i := argmax(w)
		return append(c, candidate{int32(i), w[i]})
	}
	thr := m + logMinP
	for i, v := range w {
		if v >= thr {
			c = append(c, candidate{int32(i), v})
		}
	}
	return c
}

// uniform is a draw from [0, 1) with 53 random bits.
func (s *Sampler) uniform() float64 {
	return float64(s.rng.Uint64()>>11) * 0x1p-53
}

// draw samples from softmax(logit/T) over the candidates; it overwrites
// their logits with the unnormalised probabilities.
func (s *Sampler) draw(c []candidate) int {
	m := float32(math.Inf(-1))
	best := 0
	for i, x := range c {
		if x.logit > m {
			m, best = x.logit, i
		}
	}
	if math.IsInf(float64(m), 0) {
		return int(c[best].id)
	}
	var sum float64
	for i := range c {
		e := expNeg((c[i].logit - m) * s.invTemp)
		c[i].logit = e
		sum += float64(e)
	}
	if !(sum > 0) || math.IsInf(sum, 0) {
		return int(c[best].id)
	}
	u := s.uniform() * sum
	var cum float64
	for _, x := range c {
		cum += float64(x.logit)
		if cum > u {
			return int(x.id)
		}
	}
	// u fell past the total by rounding: take the last token with mass.
	for i := len(c) - 1; i >= 0; i-- {
		if c[i].logit > 0 {
			return int(c[i].id)
		}
	}
	return int(c[best].id)
}

// drawAll samples from softmax(w/T) over the whole vocabulary; it
// overwrites w with the unnormalised probabilities.
func (s *Sampler) drawAll(w []float32) int {
	best := argmax(w)
	m := w[best]
	if math.IsInf(float64(m), 0) || m != m {
		return best
	}
	var sum float64
	for i, v := range w {
		e := expNeg((v - m) * s.invTemp)
		w[i] = e
		sum += float64(e)
	}
	if !(sum > 0) || math.IsInf(sum, 0) {
		return best
	}
	u := s.uniform() * sum
	var cum float64
	for i, e := range w {
		cum += float64(e)
		if cum > u {
			return i
		}
	}
	for i := len(w) - 1; i >= 0; i-- {
		if w[i] > 0 {
			return i
		}
	}
	return best
}

// Logprobs reports log-probabilities for a step: of token id (-Inf if id is
// outside the vocabulary) and of the n most likely tokens (n is clamped to
// [0, MaxTopLogprobs]), most likely first, appended to dst[:0]; pass a dst
// with capacity n to allocate nothing.
//
// The distribution is log-softmax of the logits after logit bias and
// penalties, at temperature 1 and before top-k, top-p and min-p: the model's
// distribution as the sampler's state shapes it, which is what OpenAI
// reports. Call it after Sample and before Accept so that the penalties are
// those the draw saw.
func (s *Sampler) Logprobs(logits []float32, id tokenizer.ID, n int, dst []TokenLogprob) (float32, []TokenLogprob) {
	w := s.prepare(logits)
	m := maxOf(w)
	lse := float64(m)
	if !math.IsInf(lse, 0) {
		var sum float64
		for _, v := range w {
			sum += float64(expNeg(v - m))
		}
		lse += math.Log(sum)
	}
	logprob := func(v float32) float32 {
		lp := float64(v) - lse
		if lp != lp {
			// NaN logit, or an +Inf logit among others: report it as impossible
			// unless it is the +Inf one.
			if math.IsInf(float64(v), 1) {
				return 0
			}
			return float32(math.Inf(-1))
		}
		return float32(min(lp, 0))
	}
	chosen := float32(math.Inf(-1))
	if id >= 0 && int(id) < s.vocab {
		chosen = logprob(w[id])
	}
	n = min(max(n, 0), MaxTopLogprobs, s.vocab)
	dst = dst[:0]
	if n > 0 {
		for _, c := range s.topKOf(w, n) {
			dst = append(dst, TokenLogprob{ID: c.id, Logprob: logprob(c.logit)})
		}
	}
	return chosen, dst
}

// TopLogprobs is Logprobs without a chosen token: the n most likely tokens
// and their log-probabilities, appended to dst[:0].
func (s *Sampler) TopLogprobs(logits []float32, n int, dst []TokenLogprob) []TokenLogprob {
	_, dst = s.Logprobs(logits, -1, n, dst)
	return dst
}

// expNeg is exp(x) for x <= 0 in float32 precision (relative error below
// 1e-7), about twice as fast as math.Exp: the softmax over a 150k vocabulary
// is the sampler's main cost. It returns 0 below the float32 normal range
// and for NaN.
func expNeg(x float32) float32 {
	if !(x > -87.33) {
		return 0
	}
	if x >= 0 {
		return 1
	}
	// exp(x) = 2^k · exp(f·ln2) with k = round(x·log2 e), |f| <= 1/2.
	y := float64(x) * math.Log2E
	// Adding 1.5·2^52 rounds y to an integer held in the low mantissa bits.
	const roundMagic = 0x1.8p52
	kf := y + roundMagic
	kbits := math.Float64bits(kf)
	r := (y - (kf - roundMagic)) * math.Ln2
	// Taylor to degree 7: the remainder on |r| <= ln2/2 is below 1e-8.
	p := 1 + r*(1+r*(1.0/2+r*(1.0/6+r*(1.0/24+r*(1.0/120+r*(1.0/720+r*(1.0/5040)))))))
	// k is in [-126, 0]: its bits plus the bias form the exponent of 2^k.
	return float32(p * math.Float64frombits((kbits+1023)<<52))
}

// PostLogprobs is Logprobs of the distribution the sampler draws from
// rather than the model's: the logits after bias and penalties, filtered
// by top-k, top-p and min-p, at the temperature (llama-server's
// post_sampling_probs). Tokens the filters drop are impossible (-Inf); a
// greedy sampler gives the most likely token all the mass. The
// alternatives are the most likely tokens of that distribution, at most as
// many as it keeps, most likely first. Call it after Sample and before
// Accept, as Logprobs.
func (s *Sampler) PostLogprobs(logits []float32, id tokenizer.ID, n int, dst []TokenLogprob) (float32, []TokenLogprob) {
	w := s.prepare(logits)
	n = min(max(n, 0), MaxTopLogprobs, s.vocab)
	negInf := float32(math.Inf(-1))
	dst = dst[:0]
	if s.greedy {
		best := tokenizer.ID(argmax(w))
		chosen := negInf
		if id == best {
			chosen = 0
		}
		if n > 0 {
			dst = append(dst, TokenLogprob{ID: best, Logprob: 0})
			for _, c := range s.topKOf(w, n) {
				if c.id != best && len(dst) < n {
					dst = append(dst, TokenLogprob{ID: c.id, Logprob: negInf})
				}
			}
		}
		return chosen, dst
	}
	c := s.filter(w)
	if c == nil {
		// Every token stays: the softmax of all the logits at the
		// temperature.
		c = s.topKOf(w, s.vocab)
	}
	slices.SortFunc(c, compareDesc)
	m := c[0].logit
	if math.IsInf(float64(m), 0) || m != m {
		return negInf, dst
	}
	var sum float64
	for _, x := range c {
		sum += float64(expNeg((x.logit - m) * s.invTemp))
	}
	lse := math.Log(sum)
	logprob := func(l float32) float32 {
		return float32(min(float64((l-m)*s.invTemp)-lse, 0))
	}
	chosen := negInf
	for _, x := range c {
		if x.id == id {
			chosen = logprob(x.logit)
			break
		}
	}
	for _, x := range c[:min(n, len(c))] {
		dst = append(dst, TokenLogprob{ID: x.id, Logprob: logprob(x.logit)})
	}
	return chosen, dst
}
