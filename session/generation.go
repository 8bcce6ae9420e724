package session

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/lora"
	"github.com/ruvllm/ruvllm/models/tokenizer"
	"github.com/ruvllm/ruvllm/reasoning"
)

// Limits on request fields that would otherwise let one request allocate
// without bound.
const (
	MaxStops     = 16
	MaxStopBytes = 512
	// MaxLoRAScale bounds lora_scale: past a few times the trained
	// strength an adapter only degrades the model.
	MaxLoRAScale = 4
	// MaxMessages bounds a conversation's length in messages; MaxPrompts
	// the prompts of one request.
	MaxMessages = 4096
	MaxPrompts  = 256
)

// Generation is one request's run on a model: one engine request per
// choice, their events merged, parsed and handed to a Sink.
type Generation struct {
	ms      *Models
	req     *Request
	model   *Model
	id      string
	modelID string
	adapter string
	route   *routing

	lease        *lora.Lease
	releaseModel func(keepAlive *time.Duration)

	prompts []prompt
	choices []*choice
	events  chan choiceEvent
	done    chan struct{}
	wg      sync.WaitGroup
	closed  sync.Once

	// output is the constraint on the text, nil for none; outputField the
	// request field that asked for it.
	output      *Output
	outputField string
	// ctx is the request's, which Options.OnGeneration is given.
	ctx                                          context.Context
	received, loaded, started, firstToken, ended time.Time
	err                                          error
}

// prompt is one tokenized prompt of a request.
type prompt struct {
	ids []tokenizer.ID
	// text is the prompt as the model saw it: the rendered chat, or the
	// client's text.
	text string
}

type choiceEvent struct {
	c      *choice
	ev     backends.Event
	closed bool // c's channel was closed
	// at is when the event came from the engine, which the generation's
	// timings count from: the sink may take its events later.
	at time.Time
}

// Start begins req: it resolves the model (asking the router when req
// names it), leases the adapter and the model's engine (loading a model on
// demand), renders the chat, tokenizes, compiles the output's constraint
// and submits one engine request per choice. Every refusal comes before
// any output, so that it can still be a plain HTTP error; the caller runs
// the generation and must Close it.
func (ms *Models) Start(ctx context.Context, req *Request) (*Generation, error) {
	g := &Generation{ms: ms, req: req, ctx: ctx, received: req.Received}
	if g.received.IsZero() {
		g.received = time.Now()
	}
	if err := g.start(ctx); err != nil {
		g.Close()
		return nil, err
	}
	return g, nil
}

func (g *Generation) start(ctx context.Context) error {
	ms, req := g.ms, g.req
	n := req.names()
	if (req.Messages == nil) == (req.Prompts == nil) {
		return Internal("session: a request needs messages or prompts, not both")
	}
	if len(req.Messages) > MaxMessages {
		return Invalid(n.Messages, CodeInvalidValue, "%s holds %d messages; at most %d are allowed", n.Messages, len(req.Messages), MaxMessages)
	}
	if len(req.Prompts) > MaxPrompts {
		return Invalid(n.Prompt, CodeInvalidValue, "%s holds %d prompts; at most %d are allowed", n.Prompt, len(req.Prompts), MaxPrompts)
	}
	if err := checkStops(req.Stop, n.Stop); err != nil {
		return err
	}
	if err := checkTools(req); err != nil {
		return err
	}
	if req.N <= 0 {
		req.N = 1
	}
	if choices := max(len(req.Prompts), 1) * req.N; choices > ms.opt.MaxN {
		return Invalid("n", CodeInvalidValue, "%d prompts times n=%d make %d choices; at most %d are allowed", max(len(req.Prompts), 1), req.N, choices, ms.opt.MaxN)
	}
	prefix := req.IDPrefix
	if prefix == "" {
		prefix = "gen-"
	}
	g.id = prefix + uuid.NewString()

	// The model.
	var t Target
	var err error
	if name := ms.RouterName(); name != "" && req.Model == name && ms.Ready() {
		t, err = ms.route(req, g.id)
	} else {
		t, err = ms.Resolve(req.Model, n.Model)
	}
	if err != nil {
		return err
	}
	if req.RouteCostWeight != nil && t.route == nil {
		return Invalid("route_cost_weight", CodeInvalidValue, "route_cost_weight applies to the router: set model to %s", Quote(ms.RouterName()))
	}
	g.model, g.route, g.modelID = t.Model, t.route, t.Model.ID
	if t.anyName {
		g.modelID = t.Name
	}
	m := t.Model
	if req.Messages != nil && m.Chat == nil {
		return Unsupported(n.Model, "the model %s has no chat template; send a text prompt", Quote(m.ID))
	}
	if err := g.leaseAdapter(t); err != nil {
		return err
	}
	release, err := ms.Hold(ctx, m)
	if err != nil {
		if e := AsError(err); e.Code == CodeModelLoad {
			// The model the router chose cannot be loaded: a failure of
			// that choice, which it must learn to avoid.
			ms.observeRoute(g.route, nil, err)
		}
		return err
	}
	g.releaseModel = release
	g.loaded = time.Now()
	if g.route != nil {
		// The cost of the answer starts now: loading the model is the
		// router's ExtraCost, not the request's.
		g.route.start = time.Now()
	}

	tu := &toolUse{tools: req.Tools, style: m.tools, choice: req.ToolChoice}
	// The output's constraint, and what the choices' decoders write out.
	out := req.Output
	if o, err := tu.output(m, n.Tools); err != nil {
		return err
	} else if o != nil {
		if out != nil {
			return Unsupported(n.Output, "%s together with %s %s is not supported: the output is a tool call", n.Output, n.ToolChoice, req.ToolChoice.Mode)
		}
		out = o
	}
	g.outputField = n.Output
	if req.Output == nil && out != nil {
		g.outputField = n.ToolChoice
	}
	// The prompts.
	isChat := req.Messages != nil
	maxLen := m.Engine.MaxLen()
	encode := func(text string) ([]tokenizer.ID, error) {
		// The prompt needs room for a token after it.
		ids, n, ok := EncodePromptWithin(m.Tokenizer, text, maxLen-1)
		if !ok {
			e := Invalid(req.promptParam(), CodeContextLength,
				"this model's maximum context length is %d tokens, and the prompt has %d tokens or more, leaving no room for a completion", maxLen, n)
			e.Context = &ContextLimit{Prompt: n, Context: maxLen}
			return nil, e
		}
		return ids, nil
	}
	if isChat {
		text, err := renderChat(m, req, tu, ms.opt.NoThinking)
		if err != nil {
			return err
		}
		ids, err := encode(text)
		if err != nil {
			return err
		}
		g.prompts = []prompt{{ids: ids, text: text}}
	} else {
		vocab := len(m.Tokenizer.Vocab().Tokens)
		for i, p := range req.Prompts {
			if p.Tokens == nil {
				ids, err := encode(p.Text)
				if err != nil {
					return err
				}
				g.prompts = append(g.prompts, prompt{ids: ids, text: p.Text})
				continue
			}
			for _, id := range p.Tokens {
				if id < 0 || int(id) >= vocab {
					param := n.Prompt
					if len(req.Prompts) > 1 {
						param = fmt.Sprintf("%s[%d]", n.Prompt, i)
					}
					return Invalid(param, CodeInvalidValue, "token id %d is outside the vocabulary [0, %d)", id, vocab)
				}
			}
			text := p.Text
			if text == "" {
				text = m.Tokenizer.Decode(p.Tokens)
			}
			g.prompts = append(g.prompts, prompt{ids: p.Tokens, text: text})
		}
	}
	if err := g.addPrefix(); err != nil {
		return err
	}

	var markers []string
	if out != nil {
		markers = append(markers, out.render...)
	}
	if isChat && tu.active() {
		markers = append(markers, tu.style.format.Markers()...)
	}
	think := isChat && g.thinks()
	if think {
		markers = append(markers, m.thinking.markers()...)
	}
	dopt := decodeOptions(out != nil, req.KeepSpecial, markerIDs(m.Tokenizer, markers))
	if err := ms.checkSampling(req, m); err != nil {
		return err
	}
	g.output = out
	return g.submit(ctx, out.constraint(m, dopt), dopt, tu, think)
}

// addPrefix puts the request's Prefix before its one prompt, whose leading
// BOS goes: the prefix began with its own.
func (g *Generation) addPrefix() error {
	req, m := g.req, g.model
	if len(req.Prefix) == 0 {
		return nil
	}
	n := req.names()
	if len(g.prompts) != 1 {
		return Invalid(n.Prefix, CodeInvalidValue, "%s needs a single prompt", n.Prefix)
	}
	v := m.Tokenizer.Vocab()
	for _, id := range req.Prefix {
		if id < 0 || int(id) >= len(v.Tokens) {
			return Invalid(n.Prefix, CodeInvalidValue, "token id %d is outside the vocabulary [0, %d)", id, len(v.Tokens))
		}
	}
	p := &g.prompts[0]
	ids := p.ids
	if len(ids) > 0 && v.AddBOS && ids[0] == v.BOS {
		ids = ids[1:]
	}
	p.ids = append(slices.Clone(req.Prefix), ids...)
	p.text = m.Tokenizer.Decode(req.Prefix) + p.text
	return nil
}

// thinks reports whether the generation's reasoning is separated from its
// answer: the model's template thinks, and neither the server nor the
// request keeps the text raw.
func (g *Generation) thinks() bool {
	f := g.ms.opt.Reasoning
	if g.req.Reasoning.Format != nil {
		f = *g.req.Reasoning.Format
	}
	return f != ReasoningNone && g.model.thinking.thinks()
}

// leaseAdapter leases the adapter t names, if any.
func (g *Generation) leaseAdapter(t Target) error {
	req := g.req
	if t.Adapter == "" {
		if req.LoRAScale != nil && req.Adapter == nil && t.Model.Adapter == nil {
			return Invalid("lora_scale", CodeInvalidValue, "lora_scale applies to an adapter; set model to %s", Quote(t.Model.ID+":ADAPTER"))
		}
		return nil
	}
	if s := req.LoRAScale; s != nil && (*s < 0 || *s > MaxLoRAScale) {
		return Invalid("lora_scale", CodeInvalidValue, "lora_scale must be in [0, %d], got %g", MaxLoRAScale, *s)
	}
	lease, err := t.Model.Adapters.Acquire(t.Adapter)
	if errors.Is(err, lora.ErrNotFound) {
		// Deleted since it was resolved.
		return NotFound(req.names().Model, CodeModelNotFound, "the adapter %s does not exist any more", Quote(t.Adapter))
	}
	if err != nil {
		// The adapter was accepted when registered: failing to read it back
		// is the server's problem (its file changed or went away).
		return &Error{Status: http.StatusInternalServerError, Type: TypeServer, Param: req.names().Model, Code: CodeAdapterLoad,
			Message: "loading the adapter " + Quote(t.Adapter) + ": " + err.Error()}
	}
	g.lease = lease
	g.modelID = t.Name
	g.adapter = t.Adapter
	return nil
}

// adapter is the adapter the engine runs the request with: nil for the
// base model, and for lora_scale 0, which is the base model exactly.
func (g *Generation) engineAdapter() (*lora.Adapter, float32) {
	adapter := g.req.Adapter
	if adapter == nil {
		adapter = g.model.Adapter
	}
	if g.lease != nil {
		adapter = g.lease.Adapter()
	}
	if adapter == nil {
		return nil, 0
	}
	scale := float32(1)
	if g.req.LoRAScale != nil {
		scale = *g.req.LoRAScale
	}
	if scale == 0 {
		return nil, 0
	}
	return adapter, scale
}

// checkStops refuses stop strings that would let one request allocate
// without bound, or that are empty.
func checkStops(stops []string, param string) error {
	if len(stops) > MaxStops {
		return Invalid(param, CodeInvalidValue, "%s holds %d strings; at most %d are allowed", param, len(stops), MaxStops)
	}
	for _, s := range stops {
		if s == "" {
			return Invalid(param, CodeInvalidValue, "stop strings must not be empty")
		}
		if len(s) > MaxStopBytes {
			return Invalid(param, CodeInvalidValue, "stop strings must be at most %d bytes", MaxStopBytes)
		}
	}
	return nil
}

// checkSampling checks the sampling against the model's vocabulary.
func (ms *Models) checkSampling(req *Request, m *Model) error {
	if err := req.Sampling.ValidateVocab(len(m.Tokenizer.Vocab().Tokens)); err != nil {
		param := ""
		var pe *backends.ParamError
		if errors.As(err, &pe) {
			param = pe.Param
		}
		return Invalid(param, CodeInvalidValue, "%v", err)
	}
	return nil
}

// contextCheck refuses a prompt that leaves no room, or not the room asked
// for, in the context.
func (g *Generation) contextCheck(promptLen, maxTokens, maxLen int) error {
	n := g.req.names()
	var e *Error
	if promptLen >= maxLen {
		e = Invalid(g.req.promptParam(), CodeContextLength,
			"this model's maximum context length is %d tokens, and the prompt has %d tokens, leaving no room for a completion", maxLen, promptLen)
		e.Context = &ContextLimit{Prompt: promptLen, Context: maxLen}
	} else if maxTokens > 0 && promptLen+maxTokens > maxLen && !g.req.FitMaxTokens {
		e = Invalid(n.MaxTokens, CodeContextLength,
			"this model's maximum context length is %d tokens; you requested %d tokens (%d in the prompt, %d for the completion)",
			maxLen, promptLen+maxTokens, promptLen, maxTokens)
		e.Context = &ContextLimit{Prompt: promptLen, MaxTokens: maxTokens, Context: maxLen}
	}
	if e != nil {
		return e
	}
	return nil
}

// choiceLimit is the most tokens a choice of a prompt of promptLen tokens
// generates: the request's limit, clamped to the context when it asks so;
// without one, the context left, and, for a prompt within the model's
// trained context, no further than its end (llama-server's guard against
// a generation that never ends).
func (g *Generation) choiceLimit(promptLen, maxLen int) int {
	req, m := g.req, g.model
	if req.MaxTokens > 0 {
		if req.FitMaxTokens {
			return max(min(req.MaxTokens, maxLen-promptLen), 1)
		}
		return req.MaxTokens
	}
	limit := maxLen - promptLen
	if t := m.TrainedContext; t > promptLen && t < maxLen {
		limit = t - promptLen
	}
	return limit
}

// submit checks the prompts against the context and submits one engine
// request per choice (rather than one with N choices), so that a stop
// string found in one choice cancels that choice alone.
func (g *Generation) submit(ctx context.Context, constraint func() backends.Constraint, dopt tokenizer.DecodeOptions, tu *toolUse, think bool) error {
	req, m := g.req, g.model
	maxLen := m.Engine.MaxLen()
	if c := g.ms.opt.MaxTokens; c > 0 && (req.MaxTokens == 0 || req.MaxTokens > c) && !req.ScoreOnly {
		req.MaxTokens = c
	}
	for _, p := range g.prompts {
		if len(p.ids) == 0 {
			return Invalid(req.promptParam(), CodeInvalidValue, "the prompt is empty")
		}
		if req.ScoreOnly {
			if len(p.ids) > maxLen {
				e := Invalid(req.promptParam(), CodeContextLength, "this model's maximum context length is %d tokens, and the prompt has %d tokens", maxLen, len(p.ids))
				e.Context = &ContextLimit{Prompt: len(p.ids), Context: maxLen}
				return e
			}
			continue
		}
		if err := g.contextCheck(len(p.ids), g.choiceLimit(len(p.ids), maxLen), maxLen); err != nil {
			return err
		}
		if g.output != nil {
			// An output the budget cannot hold is refused before any of it
			// is generated, rather than cut off unfinished.
			budget := g.choiceLimit(len(p.ids), maxLen)
			if budget == 0 {
				budget = maxLen - len(p.ids)
			}
			if need := g.output.minTokens(m.grammarVocab(dopt)); need > budget {
				n := req.names()
				return Invalid(n.MaxTokens, CodeInvalidValue, "the output must follow %s, which takes at least %d tokens; %s allows %d",
					g.outputField, need, n.MaxTokens, budget)
			}
		}
	}
	g.events = make(chan choiceEvent, 16)
	g.done = make(chan struct{})
	g.started = time.Now()
	top := -1
	if req.Logprobs {
		top = req.TopLogprobs
	}
	adapter, scale := g.engineAdapter()
	callPrefix := "call_"
	if req.CallIDPrefix != "" {
		callPrefix = req.CallIDPrefix
	}
	for pi, p := range g.prompts {
		maxTokens := req.MaxTokens
		if !req.ScoreOnly {
			maxTokens = g.choiceLimit(len(p.ids), maxLen)
		}
		for j := range req.N {
			sp := req.Sampling
			if sp.Seed != nil && j > 0 {
				// Choices of one request must differ; each is still
				// reproducible from the request's seed.
				seed := *sp.Seed + int64(j)
				sp.Seed = &seed
			}
			cctx, cancel := context.WithCancel(ctx)
			st, err := m.Engine.Submit(cctx, backends.Request{Prompt: p.ids, MaxTokens: maxTokens, Sampling: sp, N: 1, TopLogprobs: top,
				Adapter: adapter, AdapterScale: scale, PromptLogprobs: req.PromptLogprobs, Constraint: constraint,
				MinTokens: req.MinTokens, IgnoreEOS: req.IgnoreEOS, Slot: req.Slot, NoCache: req.NoCache, PostSampling: req.PostSampling,
				Progress: req.Progress, Speculative: req.Speculative})
			if err != nil {
				cancel()
				if errors.Is(err, backends.ErrContextLength) {
					if e := g.contextCheck(len(p.ids), maxTokens, maxLen); e != nil {
						return e
					}
				}
				return engineError(err, req.names().MaxTokens)
			}
			c := &choice{
				index:       pi*req.N + j,
				prompt:      pi,
				cancel:      cancel,
				stream:      st,
				tok:         m.Tokenizer,
				dec:         m.Tokenizer.NewDecoderWith(dopt),
				stops:       req.Stop,
				includeStop: req.IncludeStop,
				minTokens:   req.MinTokens,
				logprobs:    req.Logprobs,
				callPrefix:  callPrefix,
				toolFormat:  tu.style.format,
			}
			if think {
				c.think = m.thinking.parser(p.text)
			}
			if req.Messages != nil && tu.active() && !(think && m.thinking.format == reasoning.Harmony) {
				// Harmony's calls come from its channels, which the
				// reasoning parser reads.
				c.tools = tu.style.format.NewParser()
				c.trimContent = true
			}
			g.choices = append(g.choices, c)
			g.forward(c)
		}
	}
	return nil
}

// forward copies c's events into the merged channel until c's channel is
// closed; once the generation is done it only drains, so that the engine
// never waits on a reader that has left.
func (g *Generation) forward(c *choice) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		for ev := range c.stream.Events {
			select {
			case g.events <- choiceEvent{c: c, ev: ev, at: time.Now()}:
			case <-g.done:
			}
		}
		select {
		case g.events <- choiceEvent{c: c, closed: true}:
		case <-g.done:
		}
	}()
}

// Run feeds the engine's events, parsed, to sink until every choice has
// finished; the error is an *Error (ErrClientGone when ctx ended or the
// sink failed). A generation that ends well is kept for feedback under
// its ID, and its outcome reaches the router, before Run returns.
func (g *Generation) Run(ctx context.Context, sink Sink) error {
	err := g.run(ctx, sink)
	g.ended = time.Now()
	if err != nil {
		g.err = err
	}
	g.ms.observeRoute(g.route, g, err)
	if err == nil {
		g.ms.remember(g)
	}
	return err
}

func (g *Generation) run(ctx context.Context, sink Sink) error {
	left := len(g.choices)
	send := func(evs []Event) error {
		if len(evs) == 0 {
			return nil
		}
		if err := sink.Send(evs); err != nil {
			return ErrClientGone
		}
		return nil
	}
	for left > 0 {
		var ce choiceEvent
		select {
		case <-ctx.Done():
			return ErrClientGone
		case ce = <-g.events:
		}
		c := ce.c
		if c.finish != "" {
			continue
		}
		if ce.closed {
			return &Error{Status: http.StatusInternalServerError, Type: TypeServer, Code: CodeGenerationFail,
				Message: fmt.Sprintf("generation of choice %d ended without a finish reason", c.index)}
		}
		ev := ce.ev
		if ev.Prefilled > 0 {
			p := Progress{Total: len(g.prompts[c.prompt].ids), Cache: c.stream.CachedTokens, Processed: ev.Prefilled, Elapsed: time.Since(g.started)}
			if err := send([]Event{{Choice: c.index, Kind: EventProgress, Progress: p}}); err != nil {
				return err
			}
			continue
		}
		if ev.Token != nil {
			if g.firstToken.IsZero() {
				g.firstToken = ce.at
			}
			if c.firstToken.IsZero() {
				c.firstToken = time.Now()
			}
			text, entries, stopped := c.addToken(ev.Token)
			if stopped {
				// The stop string was found by us: the engine may still be
				// generating, so cancel it now, and drop the tokens held
				// back.
				c.cancel()
				c.pending = nil
				if err := send(g.finish(c, text, entries, FinishStopSequence)); err != nil {
					return err
				}
				left--
				continue
			}
			if err := send(c.events(text, entries, false)); err != nil {
				return err
			}
		}
		if ev.Err != nil {
			if ctx.Err() != nil {
				return ErrClientGone
			}
			if errors.Is(ev.Err, backends.ErrClosed) {
				return ShuttingDown()
			}
			if errors.Is(ev.Err, backends.ErrContextLength) {
				return Invalid(g.req.names().MaxTokens, CodeContextLength, "%v", ev.Err)
			}
			return &Error{Status: http.StatusInternalServerError, Type: TypeServer, Code: CodeGenerationFail,
				Message: "generation failed: " + ev.Err.Error()}
		}
		if ev.Finish != "" {
			text, entries, stopped := c.flush()
			reason := FinishReason(ev.Finish)
			if stopped {
				reason = FinishStopSequence
			}
			if err := send(g.finish(c, text, entries, reason)); err != nil {
				return err
			}
			left--
		}
	}
	return nil
}

// finish ends choice c with its last text: the parsers are flushed, and a
// choice that called tools and stopped finishes with tool_calls.
func (g *Generation) finish(c *choice, text string, entries []tokenEntry, reason FinishReason) []Event {
	evs := c.events(text, entries, true)
	if len(c.calls) > 0 && (reason == FinishStop || reason == FinishStopSequence) {
		reason = FinishToolCalls
	}
	if reason != FinishStopSequence && reason != FinishToolCalls {
		c.stopSeq = ""
	}
	c.finish = reason
	c.ended = time.Now()
	return append(evs, Event{Choice: c.index, Kind: EventFinish, Finish: reason, StopSequence: c.stopSeq})
}

// Close ends the generation: it cancels every engine request still
// running and waits until their channels are closed, so that nothing of
// the request outlives it; it releases the adapter and the model (with
// the request's keep-alive), and reports the generation to
// Options.OnGeneration. It may be called more than once.
func (g *Generation) Close() {
	g.closed.Do(func() {
		for _, c := range g.choices {
			c.cancel()
		}
		if g.done != nil {
			close(g.done)
		}
		g.wg.Wait()
		if g.ended.IsZero() {
			g.ended = time.Now()
		}
		if g.route != nil {
			g.ms.abandonRoute(g.route)
		}
		if g.lease != nil {
			g.lease.Release()
		}
		if g.releaseModel != nil {
			g.releaseModel(g.req.KeepAlive)
		}
		if g.ms.opt.OnGeneration != nil && g.choices != nil {
			g.ms.opt.OnGeneration(g.ctx, g)
		}
	})
}

// ID is the generation's id: the request's prefix and a UUID. Feedback
// and the router know the completion by it.
func (g *Generation) ID() string { return g.id }

// ModelID is the model as responses name it: the served model's id, or
// the adapter as the request named it.
func (g *Generation) ModelID() string { return g.modelID }

// Model is the served model that runs the generation.
func (g *Generation) Model() *Model { return g.model }

// Adapter is the adapter's name in its model's registry, "" for none.
func (g *Generation) Adapter() string { return g.adapter }

// RouteHeader is the router's decision for the X-Route header, "" when
// the router did not choose the model.
func (g *Generation) RouteHeader() string {
	if g.route == nil {
		return ""
	}
	return g.route.header()
}

// Route is the label of the generation in metrics.
func (g *Generation) Route() string { return g.req.Route }

// Prompt is the text and the tokens of prompt i as the model saw them.
func (g *Generation) Prompt(i int) (string, []tokenizer.ID) {
	return g.prompts[i].text, g.prompts[i].ids
}

// ChoicePrompt is the index of choice i's prompt.
func (g *Generation) ChoicePrompt(i int) int { return g.choices[i].prompt }

// Prompts is the number of prompts.
func (g *Generation) Prompts() int { return len(g.prompts) }

// Choices is the number of choices: prompts times n.
func (g *Generation) Choices() int { return len(g.choices) }

// Tokenizer is the model's tokenizer, for protocols that show tokens.
func (g *Generation) Tokenizer() *tokenizer.Tokenizer { return g.model.Tokenizer }

// Results are the choices' outputs; complete once Run has returned.
func (g *Generation) Results() []Result {
	out := make([]Result, len(g.choices))
	for i, c := range g.choices {
		out[i] = c.result()
	}
	return out
}

// Usage counts the generation's tokens so far.
func (g *Generation) Usage() Usage {
	var u Usage
	for _, p := range g.prompts {
		u.PromptTokens += len(p.ids)
	}
	for _, c := range g.choices {
		u.CompletionTokens += c.tokens
		u.DraftedTokens += c.drafted
		u.AcceptedTokens += c.accepted
		if c.index%g.req.N == 0 {
			// The engine sets CachedTokens before the first event, which
			// run has received for a finished choice.
			u.CachedTokens += c.stream.CachedTokens
		}
	}
	return u
}

// Timings are when a generation's phases happened.
type Timings struct {
	// Received is when the request arrived; Loaded when the model's
	// engine was held (loaded first, if it was not); Started when its
	// prompts were submitted (after rendering and tokenizing);
	// FirstToken when the first token came (the prompt was processed);
	// Ended when the last choice finished.
	Received, Loaded, Started, FirstToken, Ended time.Time
}

// TTFT is the time from the request's arrival to its first token; 0 when
// no token came.
func (t Timings) TTFT() time.Duration {
	if t.FirstToken.IsZero() {
		return 0
	}
	return t.FirstToken.Sub(t.Received)
}

// Timings are the generation's times so far.
func (g *Generation) Timings() Timings {
	return Timings{Received: g.received, Loaded: g.loaded, Started: g.started, FirstToken: g.firstToken, Ended: g.ended}
}

// Err is how the generation failed, nil while it runs or when it ended
// well.
func (g *Generation) Err() error { return g.err }
