package session

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/sona"
)

// Defaults of Options.
const (
	DefaultMaxN = 16
	// DefaultRouterName is Options.RouterName when it is "": the model
	// name that asks the router to choose.
	DefaultRouterName = "auto"
	// DefaultFeedbackWindow is how long completions are kept for feedback.
	DefaultFeedbackWindow = time.Hour
)

// Options configure the served models; the zero value serves with
// llama.cpp's default sampling, without a router.
type Options struct {
	// MaxN caps a request's choices (n, times the prompts of a text
	// completion); 0 means DefaultMaxN.
	MaxN int
	// MaxTokens, when > 0, is the most tokens a choice generates whatever
	// its request asks (llama-server's --n-predict): the limit of requests
	// that give none, and the cap of those that give more.
	MaxTokens int
	// Sampling holds the sampling settings used for the fields a request
	// leaves out; nil means backends.DefaultParams() (llama-server's).
	Sampling *backends.Params
	// FeedbackWindow is how long a completion is kept for feedback on it
	// by its id; 0 means DefaultFeedbackWindow.
	FeedbackWindow time.Duration
	// MaxLoaded is the most models on demand loaded at once (0: no
	// limit): loading another first unloads the least recently used idle
	// one, or waits for one to become idle.
	MaxLoaded int
	// KeepAlive is how long a model on demand stays loaded after its last
	// request, unless the request says otherwise; 0 means
	// DefaultKeepAlive, negative until it must make room.
	KeepAlive time.Duration
	// Router, when not nil, chooses the model of the generations that
	// name RouterName and learns from how they turn out and from ratings;
	// the session does not close it.
	Router *sona.Router
	// RouterName is the model name that asks for the router; "" means
	// DefaultRouterName.
	RouterName string
	// RouteAdapters lets the router choose the models' adapters too.
	RouteAdapters bool
	// AnyModelName serves any model name a request gives with the one
	// model served, when it is one without adapters, and repeats the name
	// in responses, as llama-server does; otherwise a name that is not
	// served is a 404.
	AnyModelName bool
	// Reasoning is how the reasoning of thinking models reaches clients
	// when a request does not say: ReasoningAuto (the zero value) and
	// ReasoningDeepSeek separate it, ReasoningNone leaves it in the text.
	Reasoning ReasoningFormat
	// NoThinking turns thinking off for the requests that do not turn it
	// on (llama-server's --reasoning-budget 0): templates see
	// enable_thinking false, and a think block a template opens anyway is
	// closed.
	NoThinking bool
	// OnModelLoad and OnModelUnload, when set, are told of every load and
	// unload of a model on demand (the reason: idle, room, request,
	// shutdown); OnGeneration of every generation as it ends, however it
	// ended (metrics, the access log).
	OnModelLoad   func()
	OnModelUnload func(reason string)
	OnGeneration  func(ctx context.Context, g *Generation)
}

// Models are the models a server serves and the sessions that run on them.
type Models struct {
	opt      Options
	sampling backends.Params
	// set is the published set (see modelSet); addMu serialises the
	// AddModel calls that replace it.
	set      atomic.Pointer[modelSet]
	starting atomic.Bool
	addMu    sync.Mutex
	// recent are the completions kept for feedback.
	recent completionStore
	// residency loads and unloads the models on demand.
	residency *residency
}

// New returns Models with no model yet.
func New(o Options) *Models {
	if o.MaxN <= 0 {
		o.MaxN = DefaultMaxN
	}
	if o.FeedbackWindow <= 0 {
		o.FeedbackWindow = DefaultFeedbackWindow
	}
	ms := &Models{opt: o, sampling: backends.DefaultParams(), residency: newResidency(o.MaxLoaded, o.KeepAlive)}
	ms.residency.onLoad, ms.residency.onUnload = o.OnModelLoad, o.OnModelUnload
	ms.recent.window = o.FeedbackWindow
	ms.set.Store(&modelSet{})
	if o.Sampling != nil {
		ms.sampling = *o.Sampling
	}
	return ms
}

// Sampling is the sampling a request starts from: the server's defaults,
// which its fields then override.
func (ms *Models) Sampling() backends.Params { return ms.sampling }

// MaxTokens is the server's limit of tokens per choice (Options.MaxTokens),
// 0 for none.
func (ms *Models) MaxTokens() int { return ms.opt.MaxTokens }

// MaxN is the most choices one request may ask for.
func (ms *Models) MaxN() int { return ms.opt.MaxN }

// Close unloads the models loaded on demand, waiting for the requests that
// use them; requests that would load one after it get ShuttingDown. Models
// loaded for good are their owner's to close.
func (ms *Models) Close() { ms.residency.close() }

// modelSet is the models served, in the order they were added; the first
// is the default. A published set is never changed (AddModel publishes a
// new one), so requests read it without a lock.
type modelSet struct {
	list []*Model
	byID map[string]*Model
	// failed are the models that could not be opened, with why: listed,
	// and answered 503, rather than unknown.
	failed []FailedModel
}

// FailedModel is a model the server was to serve but could not open.
type FailedModel struct {
	ID, Reason string
}

// AddModel serves m from now on, beside the models already served; the
// first model added is the default, which requests without a model get.
// An ID already served is refused: requests could not tell the two apart.
func (ms *Models) AddModel(m *Model) error {
	if m == nil || m.ID == "" || m.Tokenizer == nil || (m.Engine == nil) == (m.Load == nil) {
		return errors.New("session: a model needs an ID, a tokenizer, and an engine or a loader (one of them)")
	}
	if m.ID == ms.RouterName() {
		return fmt.Errorf("session: the model name %q is the router's", m.ID)
	}
	if m.vocabs == nil {
		m.vocabs = &vocabCache{}
	}
	src := m.templateSource()
	m.tools = detectToolStyle(m.Chat != nil, src)
	m.thinking = detectThinking(src)
	ms.addMu.Lock()
	defer ms.addMu.Unlock()
	old := ms.set.Load()
	if _, dup := old.byID[m.ID]; dup {
		return fmt.Errorf("session: a model named %q is already served", m.ID)
	}
	if m.Created.IsZero() {
		m.Created = time.Now()
	}
	if ms.opt.Router != nil {
		// Its weights laid out now rather than in the first request's
		// decision; an arm beyond sona.MaxArms is left to that decision.
		_ = ms.opt.Router.Register(m.ID)
	}
	if m.Load != nil {
		ms.residency.add(m)
	}
	next := &modelSet{list: append(slices.Clip(old.list), m), byID: maps.Clone(old.byID), failed: old.failed}
	if next.byID == nil {
		next.byID = map[string]*Model{}
	}
	next.byID[m.ID] = m
	ms.set.Store(next)
	return nil
}

// AddFailed records a model that could not be opened, so that listings
// show it with the reason and requests for it get a 503 that says why,
// while the other models are served.
func (ms *Models) AddFailed(id, reason string) {
	ms.addMu.Lock()
	defer ms.addMu.Unlock()
	old := ms.set.Load()
	next := &modelSet{list: old.list, byID: old.byID, failed: append(slices.Clip(old.failed), FailedModel{ID: id, Reason: reason})}
	ms.set.Store(next)
}

// Failed are the models that could not be opened.
func (ms *Models) Failed() []FailedModel { return ms.set.Load().failed }

// Ready reports whether at least one model is served.
func (ms *Models) Ready() bool { return len(ms.set.Load().list) > 0 }

// SetStarting marks the models the server starts with as loading (true) or
// loaded (false).
func (ms *Models) SetStarting(v bool) { ms.starting.Store(v) }

// Healthy reports whether a model is served and the models the server
// starts with are loaded.
func (ms *Models) Healthy() bool { return ms.Ready() && !ms.starting.Load() }

// List is the served models, the default first.
func (ms *Models) List() []*Model { return ms.set.Load().list }

// Get is the served model of the id.
func (ms *Models) Get(id string) (*Model, bool) {
	m, ok := ms.set.Load().byID[id]
	return m, ok
}

// Loaded reports whether m's engine is loaded: a model loaded for good
// always is.
func (ms *Models) Loaded(m *Model) bool {
	return m.resident == nil || ms.residency.status(m.resident) == stateLoaded
}

// State is m's state for listings: "loaded" for a model loaded for good,
// else unloaded, loading, loaded or unloading.
func (ms *Models) State(m *Model) string {
	if m.resident == nil {
		return stateLoaded.String()
	}
	return ms.residency.status(m.resident).String()
}

// OnDemand reports whether m is loaded on demand.
func (m *Model) OnDemand() bool { return m.resident != nil }

// Target is what a request's "model" names: a served model, and one of
// its adapters or none.
type Target struct {
	Model *Model
	// Adapter is the adapter's name in Model.Adapters; "" for the model
	// itself.
	Adapter string
	// Name is the model as the request spelled it; responses repeat it
	// for an adapter.
	Name string
	// route is the router's decision when the request named the router;
	// nil otherwise.
	route *routing
	// anyName is set when Name is no name of the model's, which serves it
	// under Options.AnyModelName: responses repeat Name.
	anyName bool
}

// RouterName is the model name that asks for the router; "" when the
// server has none.
func (ms *Models) RouterName() string {
	if ms.opt.Router == nil {
		return ""
	}
	if ms.opt.RouterName == "" {
		return DefaultRouterName
	}
	return ms.opt.RouterName
}

// Router is the router, nil without one.
func (ms *Models) Router() *sona.Router { return ms.opt.Router }

// RouteAdapters reports whether the router may choose adapters.
func (ms *Models) RouteAdapters() bool { return ms.opt.RouteAdapters }

// Resolve is where a request's "model" becomes what serves it, before
// anything of the request is templated or tokenized, since the model
// decides both. param is the request field that holds the name.
//
// "" is the default model; a served model's ID is that model, even when an
// adapter has the same name; "ID:ADAPTER" is that model's adapter;
// "ADAPTER" alone is looked for among every model's adapters and must
// belong to one model only. The router's name is refused: only
// generations (Start) are routed.
func (ms *Models) Resolve(name, param string) (Target, error) {
	set := ms.set.Load()
	if len(set.list) == 0 {
		return Target{}, Loading()
	}
	if name == "" {
		return Target{Model: set.list[0], Name: name}, nil
	}
	if name == ms.RouterName() {
		return Target{}, Unsupported(param, "%s asks the router to choose the model, which it does for generations only; name a model (GET /v1/models lists them)", Quote(name))
	}
	if m, ok := set.byID[name]; ok {
		return Target{Model: m, Name: name}, nil
	}
	for _, f := range set.failed {
		if f.ID == name {
			return Target{}, &Error{Status: 503, Type: TypeUnavailable, Param: param, Code: CodeModelLoad, RetryAfter: 60,
				Message: "the model " + Quote(name) + " could not be opened: " + f.Reason}
		}
	}
	found := set.findAdapter(name)
	switch len(found) {
	case 0:
		if ms.opt.AnyModelName && len(set.list) == 1 && set.list[0].Adapters == nil {
			return Target{Model: set.list[0], Name: name, anyName: true}, nil
		}
		return Target{}, set.notFound(name, param)
	case 1:
		return found[0], nil
	}
	return Target{}, AmbiguousAdapter(found, param)
}

// Lookup finds the model a request names, refusing adapters: the routes
// that call it (embeddings) run the base model only.
func (ms *Models) Lookup(name, param string) (*Model, error) {
	t, err := ms.Resolve(name, param)
	if err != nil {
		return nil, err
	}
	if t.Adapter != "" {
		return nil, Unsupported(param, "%s names the LoRA adapter %s; adapters apply to generations only, this endpoint runs the base model %s",
			Quote(name), Quote(t.Adapter), Quote(t.Model.ID))
	}
	return t.Model, nil
}

// findAdapter lists what name can mean as an adapter: when the part before
// its last colon is a served model's ID, that model's adapter of the rest;
// otherwise every model whose registry resolves name ("ADAPTER", or
// "BASE:ADAPTER" with BASE as the registry knows its base model).
func (set *modelSet) findAdapter(name string) []Target {
	if i := strings.LastIndexByte(name, ':'); i >= 0 {
		if m, ok := set.byID[name[:i]]; ok {
			if m.Adapters != nil {
				if a, ok := m.Adapters.Resolve(name[i+1:]); ok {
					return []Target{{Model: m, Adapter: a, Name: name}}
				}
			}
			return nil
		}
	}
	var found []Target
	for _, m := range set.list {
		if m.Adapters == nil {
			continue
		}
		if a, ok := m.Adapters.Resolve(name); ok {
			found = append(found, Target{Model: m, Adapter: a, Name: name})
		}
	}
	return found
}

// HasAdapters reports whether any served model has an adapter registry.
func (ms *Models) HasAdapters() bool {
	return slices.ContainsFunc(ms.set.Load().list, func(m *Model) bool { return m.Adapters != nil })
}

// notFound is the 404 of a name that is no served model or adapter; it
// says what is served, so that the client can correct the name.
func (set *modelSet) notFound(name, param string) *Error {
	msg := "the model " + Quote(name) + " does not exist; this server serves " + ModelIDs(set.list)
	if slices.ContainsFunc(set.list, func(m *Model) bool { return m.Adapters != nil }) {
		msg += " and their adapters (GET /v1/models lists them; name an adapter as \"MODEL:ADAPTER\" or \"ADAPTER\")"
	} else {
		msg += " (GET /v1/models lists them)"
	}
	return NotFound(param, CodeModelNotFound, "%s", msg)
}

// AmbiguousAdapter is the 400 of an adapter name that several models
// have, given in the field param.
func AmbiguousAdapter(found []Target, param string) *Error {
	ms := make([]*Model, len(found))
	for i, t := range found {
		ms[i] = t.Model
	}
	a := found[0].Adapter
	return Invalid(param, CodeAmbiguousModel, "the adapter %s belongs to several models, %s; name one as %s", Quote(a), ModelIDs(ms), Quote(found[0].Model.ID+":"+a))
}

// maxListedIDs bounds the model ids an error message lists.
const maxListedIDs = 8

// ModelIDs lists the models' ids for a message: "a", "b" and "c".
func ModelIDs(ms []*Model) string {
	var ids []string
	for _, m := range ms[:min(len(ms), maxListedIDs)] {
		ids = append(ids, Quote(m.ID))
	}
	if more := len(ms) - len(ids); more > 0 {
		ids = append(ids, fmt.Sprintf("%d more", more))
	}
	if len(ids) == 1 {
		return ids[0]
	}
	return strings.Join(ids[:len(ids)-1], ", ") + " and " + ids[len(ids)-1]
}

// LoadModel loads the model named id, if it is loaded on demand and not
// loaded yet, and returns once it is (or once ctx ends); it then stays
// loaded for its keep-alive. A server preloads its models with it.
func (ms *Models) LoadModel(ctx context.Context, id string) error {
	m, ok := ms.Get(id)
	if !ok {
		return fmt.Errorf("session: no model %q is served", id)
	}
	release, err := ms.Hold(ctx, m)
	if err != nil {
		return errors.New(AsError(err).Message)
	}
	release(nil)
	return nil
}

// UnloadModel unloads m when no request uses it; it reports whether m was
// loaded. A model loaded for good cannot be unloaded.
func (ms *Models) UnloadModel(m *Model) (bool, error) {
	if m.resident == nil {
		return true, errors.New("it is loaded for good, not on demand")
	}
	return ms.residency.unloadNow(m.resident)
}

// Expire unloads m, a model loaded on demand, as soon as no request uses
// it (now, when none does), as ollama's empty request with keep_alive 0
// asks; it reports whether m was loaded. A model loaded for good stays.
func (ms *Models) Expire(m *Model) bool {
	if m.resident == nil {
		return false
	}
	return ms.residency.expireSoon(m.resident)
}

// Expiry is when m will be unloaded if no request comes: its last
// request's end plus its keep-alive (now plus its keep-alive while
// requests use it). forever is true for a model kept until another needs
// its place (a negative keep-alive) and for one loaded for good; ok is
// false when m is not loaded.
func (ms *Models) Expiry(m *Model) (at time.Time, forever, ok bool) {
	if m.resident == nil {
		return time.Time{}, true, true
	}
	return ms.residency.expiry(m.resident)
}

// Hold leases m's engine for a request, loading it when needed; the
// returned release (never nil on success) ends the lease, with the
// request's keep-alive if it gave one. A model loaded for good needs no
// lease.
func (ms *Models) Hold(ctx context.Context, m *Model) (func(keepAlive *time.Duration), error) {
	if m.resident == nil {
		return func(*time.Duration) {}, nil
	}
	_, release, err := ms.residency.hold(ctx, m.resident)
	switch {
	case err == nil:
		return release, nil
	case errors.Is(err, backends.ErrClosed):
		return nil, ShuttingDown()
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return nil, ErrClientGone
	}
	return nil, &Error{Status: 503, Type: TypeUnavailable, Code: CodeModelLoad, RetryAfter: 5, Message: err.Error()}
}

// FindAdapter lists the adapters name can mean: "MODEL:ADAPTER", or
// "ADAPTER" among every model's adapters.
func (ms *Models) FindAdapter(name string) []Target { return ms.set.Load().findAdapter(name) }

// Leases counts the requests holding the engine of the model on demand of
// the id; -1 for a model not on demand.
func (ms *Models) Leases(id string) int {
	rs := ms.residency
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for _, r := range rs.list {
		if r.m.ID == id {
			return r.leases
		}
	}
	return -1
}
