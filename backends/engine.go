package backends

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ruvllm/ruvllm/kvcache"
	"github.com/ruvllm/ruvllm/lora"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// Defaults and limits of the engine.
const (
	// DefaultParallel is EngineOptions.Parallel when it is 0.
	DefaultParallel = 4
	// DefaultQueueSize is EngineOptions.QueueSize when it is 0.
	DefaultQueueSize = 64
	// DefaultBatch is EngineOptions.Batch when it is 0, llama.cpp's default
	// batch.
	DefaultBatch = 512
	// MaxChoices bounds Request.N, as OpenAI bounds n.
	MaxChoices = 128
)

const (
	// maxEventBuffer bounds the events a stream buffers beyond one final
	// event per choice, so that a huge max_tokens cannot make the channel
	// huge; a choice whose consumer falls this far behind waits (without
	// holding up the others) until it catches up.
	maxEventBuffer = 4096
	// tokenBlock is how many Tokens the loop allocates at once for a choice:
	// receivers may keep *Token, so Tokens are never reused, but allocating
	// them in blocks keeps the decode step free of allocations.
	tokenBlock = 256
	// pausePoll is how often the loop looks again at choices waiting for
	// their consumer when nothing else can run.
	pausePoll = time.Millisecond
)

// Errors of Submit and Embed, to tell apart with errors.Is.
var (
	// ErrQueueFull means the engine already has QueueSize requests waiting;
	// the client should retry later (HTTP 429).
	ErrQueueFull = errors.New("backends: request queue is full")
	// ErrContextLength means the prompt plus max tokens (or the input of an
	// embedding) does not fit in a sequence; it is wrapped with the numbers.
	ErrContextLength = errors.New("backends: context length exceeded")
	// ErrInvalidRequest wraps every other problem with a request (no prompt,
	// a token outside the vocabulary, a sampling parameter out of range,
	// which is also a *ParamError).
	ErrInvalidRequest = errors.New("backends: invalid request")
)

// EngineOptions configure an Engine; the zero value is ready to use.
type EngineOptions struct {
	// Parallel is the number of sequences (slots) that run at once; 0 means
	// DefaultParallel. Every choice of a request takes a slot.
	Parallel int
	// QueueSize is the number of requests that may wait beyond those the
	// free slots take; 0 means DefaultQueueSize. A full queue makes Submit
	// and Embed fail with ErrQueueFull.
	QueueSize int
	// MaxLen is each sequence's context in tokens; 0 means the model's
	// trained context length.
	MaxLen int
	// Batch is the most prompt tokens one forward step prefills, summed
	// over the sequences it prefills; 0 means DefaultBatch.
	Batch int
	// KV is the precision of the KV caches (the zero value is F16).
	KV kvcache.Precision
	// NoPrefixReuse makes every request prefill its whole prompt, ignoring
	// what a slot has cached (for measurements).
	NoPrefixReuse bool
	// IsEOG reports the end-of-generation tokens; nil means there are none.
	IsEOG func(id tokenizer.ID) bool
}

// Request is one completion: a prompt and how to continue it.
type Request struct {
	// Prompt is the tokens to continue; at least one.
	Prompt []tokenizer.ID
	// MaxTokens is the most tokens each choice generates (> 0). The engine
	// clamps nothing: Submit fails with ErrContextLength when
	// len(Prompt)+MaxTokens > MaxLen.
	MaxTokens int
	// Sampling configures the sampler of every choice. With a seed, choice
	// i draws from Seed+i, so that choices differ and each is reproducible.
	Sampling Params
	// N is the number of choices; 0 means 1. Each choice is its own
	// sequence with id 0 … N-1; choices start as slots free up.
	N int
	// TopLogprobs is the number of alternatives reported for each generated
	// token (at most MaxTopLogprobs); 0 reports the chosen token's logprob
	// only, -1 no logprobs at all.
	TopLogprobs int
	// Adapter is the LoRA adapter every choice runs with; nil runs the base
	// model. The backend's sequences must be AdapterSequences, and the
	// caller keeps the adapter alive (a registry lease) until the stream
	// closes.
	Adapter *lora.Adapter
	// AdapterScale multiplies the adapter's updates; it must be finite, and
	// 0 means 1 (the adapter as trained). It is ignored without an Adapter.
	AdapterScale float32
}

// Token is a generated token.
type Token struct {
	ID tokenizer.ID
	// Logprob is the chosen token's log-probability when logprobs were
	// asked (Request.TopLogprobs >= 0), else 0.
	Logprob float32
	// Top are the Request.TopLogprobs most likely tokens, most likely first;
	// a fresh slice the receiver may keep.
	Top []TokenLogprob
}

// Event is one step of one choice of a stream.
type Event struct {
	Choice int
	// Token is the generated token; nil on the final event of a choice.
	Token *Token
	// Finish is "" while the choice runs; on its final event "stop" (an
	// end-of-generation token, which is not sent) or "length" (MaxTokens
	// reached), or "" when Err is set.
	Finish string
	// Err is set on the final event of a choice that failed: the request's
	// context was done (its ctx.Err()), the engine closed (ErrClosed), or
	// the backend failed.
	Err error
}

// Stream is the output of a submitted request.
type Stream struct {
	// Events receives the events of every choice, interleaved, each choice
	// in order. It is buffered and closed after the final event of every
	// choice, so a receiver can range over it.
	Events <-chan Event
	// PromptTokens is len(Request.Prompt).
	PromptTokens int
	// CachedTokens is the number of prompt tokens of choice 0 whose prefill
	// prefix reuse skipped. The engine sets it when choice 0 starts, before
	// any event of the stream is sent: read it after receiving from Events.
	CachedTokens int
}

// EngineStats is a snapshot of an engine's load and counters.
type EngineStats struct {
	Queued  int   // requests waiting for a slot
	Running int   // slots busy with a choice or an embedding
	KVBytes int64 // memory of the slots' KV caches
	// Counters since the engine started: prompt tokens of every started
	// choice and embedding, tokens generated, and prompt tokens whose
	// prefill prefix reuse skipped.
	PromptTokens, GeneratedTokens, CachedTokens uint64
	// Preemptions counts choices whose KV cache was dropped, for lack of
	// room, to be recomputed later.
	Preemptions uint64
	// KV is the state of the backend's KV block pools; zero when the
	// backend has none (its sequences have caches of their own).
	KV kvcache.Stats
}

// Engine schedules requests onto one Backend with continuous batching: one
// goroutine owns the backend and, each iteration, makes one Forward call
// from the next prompt chunks of the starting sequences and one decode token
// of every running sequence, then samples and streams each sequence's token.
// Its methods are safe for concurrent use.
type Engine struct {
	b     Backend
	info  ModelInfo
	opt   EngineOptions // with defaults filled in
	steps []Step        // the current Forward call; reused
	owner []*slot       // owner[i] is the slot of steps[i]
	slots []slot
	tick  uint64 // loop iterations, for least-recently-used slots
	timer *time.Timer
	// adapters says the sequences are AdapterSequences, so requests may
	// carry a LoRA adapter.
	adapters bool
	// prefill says which prefilling slots may run: all, or after a
	// Forward found no room in the KV cache, until a choice ends, only the
	// oldest, or none while there are decode steps.
	prefill prefillMode

	mu      sync.Mutex
	queue   []*request // waiting for slots, in arrival order
	idle    int        // free slots
	closed  bool
	wake    chan struct{} // capacity 1: something may have changed
	done    chan struct{} // closed by Close
	exited  chan struct{} // closed when the loop has returned
	kvBytes atomic.Int64
	// kvMu guards kvStats, a copy of the pools' state for Stats (a value,
	// so that publishing it each step allocates nothing).
	kvMu    sync.Mutex
	kvStats kvcache.Stats
	preempt atomic.Uint64
	prompt  atomic.Uint64
	gen     atomic.Uint64
	cached  atomic.Uint64
}

// slotState is what a slot does in the next iteration.
type slotState int

const (
	slotFree slotState = iota
	slotPrefill
	slotDecode
	slotEmbed
	// slotShare waits for the slot prefilling the same prompt (waitFor)
	// to share its cache and first logits.
	slotShare
)

// prefillMode is which prefilling slots an iteration runs.
type prefillMode int

const (
	prefillAll prefillMode = iota
	prefillOldest
	prefillNone
)

// slot is one sequence with its sampler and buffers, and the choice or
// embedding it runs.
type slot struct {
	seq     Sequence
	sampler *Sampler
	logits  []float32 // (vocab)
	hidden  []float32 // (batch, dim), made for the first embedding
	pool    []float64 // (dim): sum of the hidden states of an embedding

	state    slotState
	req      *request
	choice   int
	started  uint64         // iteration the choice started, to prefill oldest first
	passed   uint64         // iteration whose prefill already took or skipped the slot
	lastUsed uint64         // iteration the slot became free
	prompt   []tokenizer.ID // the prompt or embedding input; fed[0:fed] are cached
	failed   error          // set by start when the choice cannot run in the slot
	fed      int            // prompt tokens in the sequence
	// match is set while the prefix of prompt to reuse is still to be
	// looked up, when the slot first prefills: by then other choices, or
	// this one before it was preempted, may have cached more of it.
	match bool
	// resume is set on a decoding choice that lost its cache: prompt is
	// then every token it held, which it prefills without sampling before
	// it decodes next again.
	resume bool
	// leads is set while the slot prefills a prompt that choices started
	// after it may share (slotShare, waitFor pointing here) rather than
	// prefill again: the other choices of its request, or the same prompt
	// from another request (the API submits each choice apart).
	leads   bool
	waitFor *slot
	next    [1]tokenizer.ID // the decode step's token
	made    int             // tokens generated
	block   []Token         // Tokens not yet handed out
}

// request is a submitted completion or embedding.
type request struct {
	ctx       context.Context
	stopWake  func() bool
	prompt    []tokenizer.ID
	maxTokens int
	params    Params
	n         int
	top       int
	events    chan Event
	stream    *Stream
	embed     chan embedResult // non-nil for an embedding
	adapter   *lora.Adapter    // nil: the base model
	scale     float32          // the adapter's scale; 0 without one

	// Owned by the loop.
	admitted   int // choices that have started (or ended while queued)
	unfinished int // choices whose final event is not sent
	reserved   int // channel room taken by this iteration's decode steps
}

type embedResult struct {
	vec []float32
	err error
}

// NewEngine makes the slots' sequences and starts the scheduler goroutine,
// which drives b until Close. The caller keeps b and closes it after the
// engine.
func NewEngine(b Backend, o EngineOptions) (*Engine, error) {
	info := b.Model()
	if info.VocabSize <= 0 || info.Dim <= 0 {
		return nil, fmt.Errorf("backends: model with vocabulary %d and dimension %d", info.VocabSize, info.Dim)
	}
	if o.Parallel < 0 || o.QueueSize < 0 || o.MaxLen < 0 || o.Batch < 0 {
		return nil, fmt.Errorf("backends: engine options parallel %d, queue %d, max length %d and batch %d must not be negative",
			o.Parallel, o.QueueSize, o.MaxLen, o.Batch)
	}
	if o.Parallel == 0 {
		o.Parallel = DefaultParallel
	}
	if o.QueueSize == 0 {
		o.QueueSize = DefaultQueueSize
	}
	if o.MaxLen == 0 {
		o.MaxLen = info.ContextLength
	}
	if o.Batch == 0 {
		o.Batch = DefaultBatch
	}
	e := &Engine{
		b:     b,
		info:  info,
		opt:   o,
		steps: make([]Step, 0, o.Parallel),
		owner: make([]*slot, 0, o.Parallel),
		slots: make([]slot, o.Parallel),
		idle:  o.Parallel,
		wake:  make(chan struct{}, 1),
		done:  make(chan struct{}),
	}
	for i := range e.slots {
		seq, err := b.NewSequence(SequenceOptions{MaxLen: o.MaxLen, KV: o.KV})
		if err != nil {
			e.closeSequences()
			return nil, fmt.Errorf("backends: engine slot %d: %w", i, err)
		}
		s := &e.slots[i]
		s.seq = seq
		s.sampler = NewSampler(Params{}, info.VocabSize)
		s.logits = make([]float32, info.VocabSize)
	}
	// The backend may cap MaxLen below what was asked.
	e.opt.MaxLen = e.slots[0].seq.MaxLen()
	_, e.adapters = e.slots[0].seq.(AdapterSequence)
	e.updateKVBytes()
	e.timer = time.NewTimer(time.Hour)
	e.timer.Stop()
	e.exited = make(chan struct{})
	go e.run()
	return e, nil
}

// MaxLen is the context of each sequence in tokens.
func (e *Engine) MaxLen() int { return e.opt.MaxLen }

// Stats reports the engine's load and counters.
func (e *Engine) Stats() EngineStats {
	e.mu.Lock()
	queued, running := len(e.queue), e.opt.Parallel-e.idle
	e.mu.Unlock()
	st := EngineStats{
		Queued:          queued,
		Running:         running,
		KVBytes:         e.kvBytes.Load(),
		PromptTokens:    e.prompt.Load(),
		GeneratedTokens: e.gen.Load(),
		CachedTokens:    e.cached.Load(),
		Preemptions:     e.preempt.Load(),
	}
	e.kvMu.Lock()
	st.KV = e.kvStats
	e.kvMu.Unlock()
	return st
}

// Close ends every request in flight or waiting (their final events carry
// ErrClosed), waits for the scheduler to return and closes the slots'
// sequences. It does not close the backend.
func (e *Engine) Close() error {
	e.mu.Lock()
	first := !e.closed
	e.closed = true
	e.mu.Unlock()
	if first {
		close(e.done)
	}
	<-e.exited
	return nil
}

// Submit queues a request and returns its stream at once; the events follow
// as the scheduler runs it. Cancelling ctx (the client left, or the caller
// found a stop string) ends every choice within one step, with ctx.Err() on
// its final event, and frees its slot.
func (e *Engine) Submit(ctx context.Context, r Request) (*Stream, error) {
	if err := e.validate(&r); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n := max(r.N, 1)
	// Room for every token, or for maxEventBuffer of them, plus the final
	// event of each choice, which the loop always keeps free.
	buf := n + min(n*r.MaxTokens, maxEventBuffer)
	req := &request{
		ctx:        ctx,
		prompt:     slices.Clone(r.Prompt),
		maxTokens:  r.MaxTokens,
		params:     r.Sampling,
		n:          n,
		top:        r.TopLogprobs,
		events:     make(chan Event, buf),
		unfinished: n,
		adapter:    r.Adapter,
	}
	if r.Adapter != nil {
		req.scale = r.AdapterScale
		if req.scale == 0 {
			req.scale = 1
		}
	}
	// The loop reads the map while the caller may reuse it.
	req.params.LogitBias = maps.Clone(r.Sampling.LogitBias)
	req.stream = &Stream{Events: req.events, PromptTokens: len(r.Prompt)}
	if err := e.enqueue(req); err != nil {
		return nil, err
	}
	return req.stream, nil
}

// Embed returns the mean of the final hidden states of tokens, normalised to
// unit length. It runs through the scheduler like a prompt, so it waits in
// the same queue.
func (e *Engine) Embed(ctx context.Context, tokens []tokenizer.ID) ([]float32, error) {
	if len(tokens) == 0 {
		return nil, fmt.Errorf("%w: no tokens to embed", ErrInvalidRequest)
	}
	if len(tokens) > e.opt.MaxLen {
		return nil, fmt.Errorf("%w: %d tokens to embed, more than the context of %d", ErrContextLength, len(tokens), e.opt.MaxLen)
	}
	if err := e.checkTokens(tokens); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	req := &request{
		ctx:        ctx,
		prompt:     slices.Clone(tokens),
		n:          1,
		unfinished: 1,
		embed:      make(chan embedResult, 1),
	}
	if err := e.enqueue(req); err != nil {
		return nil, err
	}
	res := <-req.embed
	return res.vec, res.err
}

// validate checks a request before it takes room in the queue.
func (e *Engine) validate(r *Request) error {
	switch {
	case len(r.Prompt) == 0:
		return fmt.Errorf("%w: the prompt has no tokens", ErrInvalidRequest)
	case r.MaxTokens <= 0:
		return fmt.Errorf("%w: max tokens %d must be positive", ErrInvalidRequest, r.MaxTokens)
	case r.N < 0 || r.N > MaxChoices:
		return fmt.Errorf("%w: %d choices is outside 1 … %d", ErrInvalidRequest, r.N, MaxChoices)
	case r.TopLogprobs < -1 || r.TopLogprobs > MaxTopLogprobs:
		return fmt.Errorf("%w: top logprobs %d is outside 0 … %d", ErrInvalidRequest, r.TopLogprobs, MaxTopLogprobs)
	case r.Adapter != nil && !e.adapters:
		return fmt.Errorf("%w: adapter %q: this backend does not run LoRA adapters", ErrInvalidRequest, r.Adapter.Name)
	case r.Adapter != nil && (math.IsNaN(float64(r.AdapterScale)) || math.IsInf(float64(r.AdapterScale), 0)):
		return fmt.Errorf("%w: adapter scale %v is not finite", ErrInvalidRequest, r.AdapterScale)
	}
	if len(r.Prompt) > e.opt.MaxLen || r.MaxTokens > e.opt.MaxLen-len(r.Prompt) {
		return fmt.Errorf("%w: %d prompt tokens + %d max tokens > %d, the context length",
			ErrContextLength, len(r.Prompt), r.MaxTokens, e.opt.MaxLen)
	}
	if err := r.Sampling.ValidateVocab(e.info.VocabSize); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRequest, err)
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
	for len(e.queue) > 0 && e.idle > 0 {
		r := e.queue[0]
		s := e.pickSlot(r)
		e.start(r, s)
		failed = failed || s.failed != nil
		e.idle--
		if r.admitted == r.n {
			// Shift rather than reslice, so that the array is reused.
			n := copy(e.queue, e.queue[1:])
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

// endQueued sends the final event of every choice of r that has not
// started and, when none runs any more, closes its stream.
func (e *Engine) endQueued(r *request, err error) {
	for c := r.admitted; c < r.n; c++ {
		r.admitted++
		r.end(c, "", err)
	}
}

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

// start runs the next choice of r in s.
func (e *Engine) start(r *request, s *slot) {
	c := r.admitted
	r.admitted++
	s.req, s.choice, s.started = r, c, e.tick
	s.prompt = append(s.prompt[:0], r.prompt...)
	s.made = 0
	e.prompt.Add(uint64(len(r.prompt)))
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
	s.leads, s.waitFor = true, nil
	if l := e.leaderFor(s); l != nil {
		s.state, s.leads, s.waitFor = slotShare, false, l
	}
	p := r.params
	if c > 0 && p.Seed != nil {
		seed := *p.Seed + int64(c)
		p.Seed = &seed
	}
	s.sampler.SetParams(p)
}

// step builds one Forward call from the decode tokens of the running
// choices and up to Batch prompt tokens of the starting ones, oldest
// first, runs it and handles its outputs. It reports false when there was
// nothing to run.
func (e *Engine) step() bool {
	e.steps, e.owner = e.steps[:0], e.owner[:0]
	for i := range e.slots {
		s := &e.slots[i]
		if s.state != slotDecode || !s.req.roomForToken() {
			continue
		}
		s.req.reserved++
		e.add(s, Step{Seq: s.seq, Tokens: s.next[:], Logits: s.logits})
	}
	budget := e.opt.Batch
	decodes := len(e.steps)
	if e.prefill == prefillNone && decodes > 0 {
		budget = 0
	}
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
		st := Step{Seq: s.seq, Tokens: s.prompt[s.fed : s.fed+n]}
		switch {
		case s.state == slotEmbed:
			st.Outputs, st.Hidden = AllTokens, s.hidden[:n*e.info.Dim]
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
	if len(e.steps) == 0 {
		return false
	}
	err := e.b.Forward(e.steps)
	full := errors.Is(err, ErrNoRoom)
	if err != nil && !full {
		for i := range e.steps {
			e.owner[i].seq.Reset()
		}
	}
	gaveUp := full && !e.makeRoom(len(e.steps) > decodes, decodes > 0)
	if gaveUp {
		for i := range e.slots {
			if s := &e.slots[i]; s.state != slotFree && s.state != slotShare {
				s.seq.Reset()
			}
		}
	}
	// Published before any stream of this step ends, so that whoever saw
	// the end reads figures that count it.
	e.updateKVBytes()
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
	if gaveUp {
		for i := range e.slots {
			if s := &e.slots[i]; s.state != slotFree && s.state != slotShare {
				e.finish(s, "", fmt.Errorf("backends: forward: %w", err))
			}
		}
	}
	return true
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
		s.fed += len(st.Tokens)
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
		e.sample(s)
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

// sample draws the next token of the slot's choice from its logits and
// streams it, or ends the choice.
func (e *Engine) sample(s *slot) {
	r := s.req
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
		tok.Logprob, top = s.sampler.Logprobs(s.logits, id, r.top, top)
		if len(top) > 0 {
			tok.Top = top
		}
	}
	s.sampler.Accept(id)
	s.made++
	e.gen.Add(1)
	r.send(Event{Choice: s.choice, Token: tok})
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
	// Free the slot before the receiver can see the end, so that Stats
	// read after the end does not count it.
	e.mu.Lock()
	e.idle++
	e.mu.Unlock()
	if state == slotEmbed && err == nil {
		r.embed <- embedResult{vec: s.embedding()}
		r.unfinished = 0
		r.stopWake()
		return
	}
	r.end(choice, reason, err)
}

// embedding is the mean of the pooled hidden states, L2-normalised.
func (s *slot) embedding() []float32 {
	var sum float64
	for _, v := range s.pool {
		sum += v * v
	}
	// The mean's length is the sum's length over the count: normalising
	// the sum gives the same unit vector.
	scale := 0.0
	if sum > 0 {
		scale = 1 / math.Sqrt(sum)
	}
	vec := make([]float32, len(s.pool))
	for j, v := range s.pool {
		vec[j] = float32(v * scale)
	}
	return vec
}

// roomForToken reports whether the stream can take one more token event
// while keeping room for the final event of every unfinished choice. Only
// the loop sends, so the room can only grow meanwhile.
func (r *request) roomForToken() bool {
	return cap(r.events)-len(r.events)-r.unfinished-r.reserved >= 1
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

// shutdown ends everything with ErrClosed and closes the sequences.
func (e *Engine) shutdown() {
	for i := range e.slots {
		if s := &e.slots[i]; s.state != slotFree {
			e.finish(s, "", ErrClosed)
		}
	}
	e.mu.Lock()
	for _, r := range e.queue {
		e.endQueued(r, ErrClosed)
	}
	e.queue = nil
	e.mu.Unlock()
	e.closeSequences()
}

func (e *Engine) closeSequences() {
	for i := range e.slots {
		if s := &e.slots[i]; s.seq != nil {
			s.seq.Close()
			s.seq = nil
		}
	}
}

// updateKVBytes publishes the memory of the KV caches for Stats: the pools'
// when the backend has them, else the sum over the slots' sequences.
func (e *Engine) updateKVBytes() {
	if kp, ok := e.b.(KVPools); ok {
		st := kp.KVStats()
		e.kvMu.Lock()
		e.kvStats = st
		e.kvMu.Unlock()
		e.kvBytes.Store(st.TotalBytes)
		return
	}
	var n int64
	for i := range e.slots {
		if s := &e.slots[i]; s.seq != nil {
			n += s.seq.CacheBytes()
		}
	}
	e.kvBytes.Store(n)
}
