package backends

import (
	"context"
	"errors"
	"fmt"
	"maps"
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
	// promptLogitsChunk is the most prompt tokens one step prefills for a
	// request that wants its prompt's logprobs, whose logits the slot
	// keeps for every token of the step.
	promptLogitsChunk = 32
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
	// Spec configures speculative decoding (spec.go); the zero value
	// drafts nothing. A backend that is not a DraftVerifier drafts
	// nothing whatever it says.
	Spec SpecOptions
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
	// PromptLogprobs asks for the log-probability of every prompt token
	// after the first under the model (with TopLogprobs alternatives, 0 when
	// TopLogprobs is -1), in Stream.PromptLogprobs: what scoring a text
	// needs (OpenAI's legacy echo with logprobs). The prompt is then
	// prefilled whole, without prefix reuse, and MaxTokens may be 0 to
	// generate nothing.
	PromptLogprobs bool
	// Constraint makes the constraint of each choice (a grammar the output
	// must follow); nil generates freely. The engine calls it once per
	// choice, from its loop.
	Constraint func() Constraint
	// MinTokens are generated before an end-of-generation token may be
	// drawn: until then those tokens are banned (vLLM's min_tokens).
	MinTokens int
	// IgnoreEOS bans the end-of-generation tokens for the whole choice, so
	// that it runs to MaxTokens (llama-server's and vLLM's ignore_eos).
	IgnoreEOS bool
	// Slot, when not nil, runs the request's choices in that slot (0 …
	// Parallel-1), one after the other, as llama-server's id_slot asks;
	// the request waits while the slot is busy, letting later requests
	// take the other slots.
	Slot *int
	// NoCache prefills the whole prompt, whatever the slot or the prefix
	// index holds of it (llama-server's cache_prompt false).
	NoCache bool
	// Progress asks for an event after each chunk of the prompt is
	// prefilled (Event.Prefilled), as llama-server's return_progress:
	// best effort, dropped when the consumer lags.
	Progress bool
	// PostSampling makes Token.Logprob and Top the distribution the
	// sampler drew from (after top-k, top-p, min-p and the temperature;
	// a greedy draw gives the chosen token all the mass) rather than the
	// model's (llama-server's post_sampling_probs).
	PostSampling bool
	// Speculative overrides the engine's speculative decoding for this
	// request (its source, or SpecOff, and its draft lengths); the zero
	// value keeps the engine's. Drafts never change what is generated.
	Speculative SpecParams
}

// Constraint limits what one choice may generate, a token at a time: a
// grammar.Matcher is one. The sampler draws only among the tokens it
// allows. The engine calls it from its loop only, so it needs no locking;
// it runs on the decode step, so once warm it should allocate nothing.
type Constraint interface {
	// Mask sets in allowed (one bit per token id, (vocab+63)/64 words,
	// cleared first) the tokens that may come next when at most budget
	// tokens, this one included, may still be generated, and reports
	// whether there is any.
	Mask(allowed []uint64, budget int) bool
	// Accept advances past the token the sampler chose.
	Accept(id tokenizer.ID) bool
	// Complete reports that the output is whole and nothing may follow
	// it: the choice ends with "stop" without another step.
	Complete() bool
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
	// Drafted and Accepted count, up to this token, the tokens
	// speculative decoding drafted for the choice and those of them it
	// generated (this one included), so that a consumer that stops
	// reading (at a stop string) knows what its tokens cost.
	Drafted, Accepted int
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
	// Prefilled, on a progress event (Request.Progress; no Token, Finish
	// or Err), is how many prompt tokens the choice's sequence holds now,
	// those reused (Stream.CachedTokens) included.
	Prefilled int
	// Drafted and Accepted, on the final event of a choice, count the
	// tokens speculative decoding drafted for it and those of them it
	// generated.
	Drafted, Accepted int
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
	// Slot is the slot choice 0 runs in; like CachedTokens it is set
	// before choice 0's first event.
	Slot int
	// PromptLogprobs, when Request.PromptLogprobs asked for them, holds the
	// log-probability of each prompt token from the second on (entry i is
	// prompt token i+1) under the raw model: log-softmax of its logits,
	// without the request's logit bias or penalties. Like CachedTokens it
	// is set before choice 0's first event.
	PromptLogprobs []Token
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
	// RunningAdapters are the names of the LoRA adapters of the running
	// choices, WaitingAdapters those of the queued requests; each sorted,
	// every name once, nil when none. A scheduler in front of several
	// servers (the Gateway API Inference Extension's endpoint picker) sends
	// an adapter's requests where it is already in use.
	RunningAdapters, WaitingAdapters []string
	// SpecDrafted counts the tokens speculative decoding drafted since the
	// engine started, SpecAccepted those of them generated.
	SpecDrafted, SpecAccepted uint64
	// RunningKVBytes is the memory of the KV caches of the running choices
	// (blocks that several of them share count once for each, up to
	// KV.UsedBytes). Idle slots keep their caches for prefix reuse until
	// room is needed, so KVBytes less this is what new requests can have.
	RunningKVBytes int64
}

// Engine schedules requests onto one Backend with continuous batching: one
// goroutine owns the backend and, each iteration, makes one Forward call
// from the next prompt chunks of the starting sequences and one decode token
// of every running sequence, then samples and streams each sequence's token.
// Its methods are safe for concurrent use.
type Engine struct {
	// plain scores prompt tokens: a sampler without bias or penalties.
	plain *Sampler
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
	// eog are the end-of-generation tokens, which a choice that has not
	// made its MinTokens may not draw.
	eog []tokenizer.ID
	// prefill says which prefilling slots may run: all, or after a
	// Forward found no room in the KV cache, until a choice ends, only the
	// oldest, or none while there are decode steps.
	prefill prefillMode

	// verifier says the backend verifies drafts; suffix is SpecSuffix's
	// cache of recent outputs (nil until a request uses it) and drafter
	// SpecDraft's model. draftHold is the iteration before which nothing
	// is drafted, after a call found no room for its drafts. dslots, dwant
	// and dgot are the draft model's work of an iteration.
	verifier  bool
	suffix    *suffixCache
	drafter   *modelDrafter
	draftHold uint64
	dslots    []*slot
	dwant     []int
	dgot      []int

	mu    sync.Mutex
	queue []*request // waiting for slots, in arrival order
	idle  int        // free slots
	// adapterChoices counts the running choices by adapter name, for
	// Stats; changed only when a choice starts or ends.
	adapterChoices map[string]int
	closed         bool
	// slotInfo is what Slots reports of each slot, kept by start and
	// finish; tasks are the slot tasks waiting for their slot.
	slotInfo []SlotInfo
	tasks    []*slotTask
	wake     chan struct{} // capacity 1: something may have changed
	done     chan struct{} // closed by Close
	exited   chan struct{} // closed when the loop has returned
	kvBytes  atomic.Int64
	// runningKV is RunningKVBytes as the loop last summed it.
	runningKV atomic.Int64
	// kvMu guards kvStats, a copy of the pools' state for Stats (a value,
	// so that publishing it each step allocates nothing).
	kvMu    sync.Mutex
	kvStats kvcache.Stats
	preempt atomic.Uint64
	prompt  atomic.Uint64
	gen     atomic.Uint64
	cached  atomic.Uint64
	// drafted and accepted are EngineStats' SpecDrafted and SpecAccepted.
	drafted, accepted atomic.Uint64
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
	id      int // index in Engine.slots
	seq     Sequence
	sampler *Sampler
	logits  []float32 // (vocab)
	// plogits (promptLogitsChunk, vocab) receives a prompt chunk's logits
	// when its request asks for prompt logprobs; made at the first such
	// request. plp are the prompt's logprobs so far.
	plogits []float32
	plp     []Token
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
	// constraint is the choice's, nil when it generates freely; mask
	// holds its allowed tokens for the sampler, made at its first use.
	constraint Constraint
	mask       []uint64
	// promptLen is the length of the choice's prompt as submitted (prompt
	// grows when a preempted choice resumes); spec its speculative
	// decoding.
	promptLen int
	spec      specState
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
	promptLP  bool             // Request.PromptLogprobs
	// minTokens are generated before an end-of-generation token may be
	// drawn; IgnoreEOS makes it maxTokens.
	minTokens int
	// constraint makes each choice's Constraint; nil for none.
	constraint func() Constraint
	// slot is the slot the choices must run in, -1 for any; noCache and
	// postSampling are Request's NoCache and PostSampling.
	slot         int
	noCache      bool
	postSampling bool
	progress     bool
	spec         SpecParams

	// Owned by the loop.
	admitted   int // choices that have started (or ended while queued)
	unfinished int // choices whose final event is not sent
	reserved   int // channel room taken by this iteration's decode steps
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
	if err := checkSpecOptions(&o.Spec, b, info); err != nil {
		return nil, err
	}
	e := &Engine{
		plain:    NewSampler(Params{}, info.VocabSize),
		b:        b,
		info:     info,
		opt:      o,
		steps:    make([]Step, 0, o.Parallel),
		owner:    make([]*slot, 0, o.Parallel),
		slots:    make([]slot, o.Parallel),
		slotInfo: make([]SlotInfo, o.Parallel),
		idle:     o.Parallel,
		wake:     make(chan struct{}, 1),
		done:     make(chan struct{}),
	}
	if o.IsEOG != nil {
		for id := range tokenizer.ID(info.VocabSize) {
			if o.IsEOG(id) {
				e.eog = append(e.eog, id)
			}
		}
	}
	for i := range e.slots {
		seq, err := b.NewSequence(SequenceOptions{MaxLen: o.MaxLen, KV: o.KV})
		if err != nil {
			e.closeSequences()
			return nil, fmt.Errorf("backends: engine slot %d: %w", i, err)
		}
		s := &e.slots[i]
		s.id, s.seq = i, seq
		s.sampler = NewSampler(Params{}, info.VocabSize)
		s.logits = make([]float32, info.VocabSize)
		e.slotInfo[i] = SlotInfo{ID: i, MaxLen: seq.MaxLen()}
	}
	// The backend may cap MaxLen below what was asked.
	e.opt.MaxLen = e.slots[0].seq.MaxLen()
	if v, ok := b.(DraftVerifier); ok && v.VerifiesDrafts() {
		e.verifier = true
	}
	if e.verifier && o.Spec.Draft != nil {
		d, err := newModelDrafter(o.Spec.Draft, o.Parallel, SequenceOptions{MaxLen: e.opt.MaxLen, KV: o.KV})
		if err != nil {
			e.closeSequences()
			return nil, fmt.Errorf("backends: draft model: %w", err)
		}
		e.drafter = d
		e.dslots = make([]*slot, 0, o.Parallel)
		e.dwant = make([]int, o.Parallel)
		e.dgot = make([]int, o.Parallel)
	}
	if e.verifier && o.Spec.Source == SpecSuffix {
		e.suffix = newSuffixCache(o.Spec.SuffixTokens)
	}
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
	var runningAdapters, waitingAdapters []string
	for name := range e.adapterChoices {
		runningAdapters = append(runningAdapters, name)
	}
	for _, r := range e.queue {
		if r.adapter != nil && !slices.Contains(waitingAdapters, r.adapter.Name) {
			waitingAdapters = append(waitingAdapters, r.adapter.Name)
		}
	}
	e.mu.Unlock()
	slices.Sort(runningAdapters)
	slices.Sort(waitingAdapters)
	st := EngineStats{
		Queued:          queued,
		Running:         running,
		RunningAdapters: runningAdapters,
		WaitingAdapters: waitingAdapters,
		KVBytes:         e.kvBytes.Load(),
		PromptTokens:    e.prompt.Load(),
		GeneratedTokens: e.gen.Load(),
		CachedTokens:    e.cached.Load(),
		Preemptions:     e.preempt.Load(),
		SpecDrafted:     e.drafted.Load(),
		SpecAccepted:    e.accepted.Load(),
	}
	e.kvMu.Lock()
	st.KV = e.kvStats
	e.kvMu.Unlock()
	// Summed apart from the pools' state: never more than what is held.
	st.RunningKVBytes = e.runningKV.Load()
	if st.KV.Blocks > 0 {
		st.RunningKVBytes = min(st.RunningKVBytes, st.KV.UsedBytes)
	}
	st.RunningKVBytes = min(st.RunningKVBytes, st.KVBytes)
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
	if r.Progress {
		// A progress event per chunk of a prompt prefilled alone.
		buf += n * min((len(r.Prompt)+e.opt.Batch-1)/e.opt.Batch+1, maxEventBuffer)
	}
	req := &request{
		ctx:          ctx,
		prompt:       slices.Clone(r.Prompt),
		maxTokens:    r.MaxTokens,
		params:       r.Sampling,
		n:            n,
		top:          r.TopLogprobs,
		events:       make(chan Event, buf),
		unfinished:   n,
		adapter:      r.Adapter,
		promptLP:     r.PromptLogprobs,
		constraint:   r.Constraint,
		minTokens:    r.MinTokens,
		slot:         -1,
		noCache:      r.NoCache,
		postSampling: r.PostSampling,
		progress:     r.Progress,
		spec:         r.Speculative,
	}
	if r.Slot != nil {
		req.slot = *r.Slot
	}
	if r.IgnoreEOS {
		req.minTokens = r.MaxTokens
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
	for _, t := range e.tasks {
		t.done <- ErrClosed
	}
	e.tasks = nil
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
	if e.drafter != nil {
		e.drafter.close()
		e.drafter = nil
	}
}

// updateKVBytes publishes the memory of the KV caches for Stats: the pools'
// when the backend has them, else the sum over the slots' sequences; and
// the running choices' share of it.
func (e *Engine) updateKVBytes() {
	e.updateRunningKV()
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

// updateRunningKV publishes the memory of the running choices' caches for
// Stats; the loop calls it after every step and when a choice ends.
func (e *Engine) updateRunningKV() {
	var n int64
	for i := range e.slots {
		if s := &e.slots[i]; s.state != slotFree && s.seq != nil {
			n += s.seq.CacheBytes()
		}
	}
	e.runningKV.Store(n)
}
