package session

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// Models loaded on demand: a Model with a Load function is served from the
// start (its tokenizer, template and adapters are there), but its engine —
// what holds memory: the KV pool, the backend's buffers, the weights' pages
// — is loaded when a request needs it and unloaded when it has been idle
// for its keep-alive, or when another model needs its place under
// Options.MaxLoaded (the least recently used idle model goes first), as
// ollama and llama-server's router do.

// Keep-alive values, as ollama's keep_alive: how long a model stays loaded
// after its last request. The default keeps it until another model needs
// its place, as llama-server's router does; ollama unloads after 5 minutes.
const (
	// KeepForever, or any negative duration, keeps a model loaded until
	// it must make room (llama-server's router unloads only then).
	KeepForever time.Duration = -1
	// DefaultKeepAlive is Options.KeepAlive when it is 0.
	DefaultKeepAlive = KeepForever
)

// residentState is where a model on demand is in its life.
type residentState int

const (
	stateUnloaded residentState = iota
	stateLoading
	stateLoaded
	stateUnloading
)

func (st residentState) String() string {
	return [...]string{"unloaded", "loading", "loaded", "unloading"}[st]
}

// resident is the engine of a model on demand and its bookkeeping, guarded
// by the residency's mutex.
type resident struct {
	m    *Model
	load Loader

	state  residentState
	engine LoadedEngine
	// leases counts the requests using the engine; it is never unloaded
	// while they run.
	leases   int
	lastUsed time.Time
	// keepAlive is how long the model stays loaded once idle: the last
	// request's keep_alive, or the server's.
	keepAlive time.Duration
	timer     *time.Timer
	// maxLen is the context the engine has (or, before the first load,
	// the one it will have).
	maxLen int
	// attempt is the load under way or the last one.
	attempt *loadAttempt
	// loadTime is how long the last load took, which the router counts
	// as the cost of choosing the model while it is not loaded.
	loadTime time.Duration
	// closeErr is the last unload's error.
	closeErr error
	// expire unloads the model when its last lease ends (Expire).
	expire bool
}

// residency keeps the models on demand and the limit on how many are
// loaded at once.
type residency struct {
	mu        sync.Mutex
	max       int // 0: no limit
	keepAlive time.Duration
	list      []*resident
	// changed is closed (and replaced) at every change of state, which
	// requests waiting for a load or for room watch.
	changed chan struct{}
	closed  bool
	// onLoad and onUnload, when set, are told of loads and unloads.
	onLoad   func()
	onUnload func(reason string)
}

func newResidency(max int, keepAlive time.Duration) *residency {
	if keepAlive == 0 {
		keepAlive = DefaultKeepAlive
	}
	return &residency{max: max, keepAlive: keepAlive, changed: make(chan struct{})}
}

// add makes m a model on demand: its Engine becomes a stand-in that runs on
// whatever engine is loaded.
func (rs *residency) add(m *Model) {
	r := &resident{m: m, load: m.Load, maxLen: m.MaxLen, keepAlive: rs.keepAlive}
	rs.mu.Lock()
	rs.list = append(rs.list, r)
	rs.mu.Unlock()
	m.resident = r
	m.Engine = residentEngine{rs: rs, r: r}
}

// notify wakes everyone waiting for a change. The caller holds mu.
func (rs *residency) notify() {
	close(rs.changed)
	rs.changed = make(chan struct{})
}

// loaded counts the models loaded or being loaded or unloaded: those that
// hold or are about to hold memory. The caller holds mu.
func (rs *residency) loaded() int {
	n := 0
	for _, r := range rs.list {
		if r.state != stateUnloaded {
			n++
		}
	}
	return n
}

// victim is the least recently used loaded model no request uses; nil when
// every loaded model is busy. The caller holds mu.
func (rs *residency) victim() *resident {
	var v *resident
	for _, r := range rs.list {
		if r.state == stateLoaded && r.leases == 0 && (v == nil || r.lastUsed.Before(v.lastUsed)) {
			v = r
		}
	}
	return v
}

// errLoadFailed wraps a failed load.
var errLoadFailed = errors.New("loading the model failed")

// loadAttempt is one load of a model: done is closed when it ends, with
// err set when it failed.
type loadAttempt struct {
	done chan struct{}
	err  error
	// claimed says the request that started the load still waits for
	// it: the loaded model's first lease is then that request's.
	claimed bool
}

// hold returns r's engine, loaded, with a lease that keeps it loaded until
// the returned release runs. It loads the model if needed, first unloading
// the least recently used idle model when MaxLoaded are loaded, or waits
// for one to become idle (or for ctx to end).
func (rs *residency) hold(ctx context.Context, r *resident) (Engine, func(keepAlive *time.Duration), error) {
	// wait waits for a change of state, or for ctx.
	wait := func(ch <-chan struct{}) error {
		rs.mu.Unlock()
		defer rs.mu.Lock()
		select {
		case <-ch:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	// mine is the load this request started: its first lease is this
	// request's, taken when the load ended, so that no other request
	// can unload the model before this one runs on it.
	var mine *loadAttempt
	for {
		if rs.closed {
			if mine != nil && r.state == stateLoaded {
				r.leases--
			}
			return nil, nil, backends.ErrClosed
		}
		switch r.state {
		case stateLoaded:
			if mine == nil {
				r.leases++
			}
			r.lastUsed = time.Now()
			if r.timer != nil {
				r.timer.Stop()
				r.timer = nil
			}
			var once sync.Once
			return r.engine, func(keepAlive *time.Duration) { once.Do(func() { rs.release(r, keepAlive) }) }, nil
		case stateLoading:
			a := r.attempt
			if err := wait(a.done); err != nil {
				if a == mine {
					select {
					case <-a.done:
						if a.err == nil {
							rs.releaseLocked(r, nil)
						}
					default:
						a.claimed = false
					}
				}
				return nil, nil, err
			}
			if a.err != nil {
				return nil, nil, a.err
			}
			continue
		case stateUnloaded:
			if rs.max == 0 || rs.loaded() < rs.max {
				mine = rs.startLoad(r)
				continue
			}
			// Full: make room by unloading the least recently used idle
			// model, unless one is already being unloaded.
			if !rs.unloading() {
				if v := rs.victim(); v != nil {
					rs.unload(v, "room")
				}
			}
		}
		if err := wait(rs.changed); err != nil {
			return nil, nil, err
		}
	}
}

// unloading reports whether a model is being unloaded. The caller holds
// mu.
func (rs *residency) unloading() bool {
	for _, r := range rs.list {
		if r.state == stateUnloading {
			return true
		}
	}
	return false
}

// startLoad loads r in the background and returns the attempt; when it
// succeeds the model starts with one lease, the starter's. The caller
// holds mu.
func (rs *residency) startLoad(r *resident) *loadAttempt {
	a := &loadAttempt{done: make(chan struct{}), claimed: true}
	r.state, r.attempt = stateLoading, a
	rs.notify()
	go func() {
		start := time.Now()
		eng, err := r.load()
		rs.mu.Lock()
		defer rs.mu.Unlock()
		defer close(a.done)
		defer rs.notify()
		switch {
		case err != nil:
			r.state = stateUnloaded
			a.err = fmt.Errorf("%w: %s: %v", errLoadFailed, r.m.ID, err)
			return
		case rs.closed:
			r.state = stateUnloaded
			a.err = backends.ErrClosed
			go eng.Close()
			return
		}
		r.state, r.engine = stateLoaded, eng
		r.maxLen = eng.MaxLen()
		r.loadTime = time.Since(start)
		r.lastUsed = time.Now()
		if rs.onLoad != nil {
			rs.onLoad()
		}
		if a.claimed {
			r.leases++
		} else {
			rs.arm(r)
		}
	}()
	return a
}

// unload closes r's engine in the background. The caller holds mu; r is
// loaded and unused.
func (rs *residency) unload(r *resident, why string) {
	r.state, r.expire = stateUnloading, false
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
	eng := r.engine
	r.engine = nil
	rs.notify()
	if rs.onUnload != nil {
		rs.onUnload(why)
	}
	go func() {
		err := eng.Close()
		rs.mu.Lock()
		defer rs.mu.Unlock()
		r.state = stateUnloaded
		r.closeErr = err
		rs.notify()
	}()
}

// release ends a lease; keepAlive, when the request gave one, becomes the
// model's keep-alive, as ollama's last request's keep_alive does.
func (rs *residency) release(r *resident, keepAlive *time.Duration) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.releaseLocked(r, keepAlive)
}

// releaseLocked is release with mu held.
func (rs *residency) releaseLocked(r *resident, keepAlive *time.Duration) {
	r.leases--
	r.lastUsed = time.Now()
	if keepAlive != nil {
		r.keepAlive = *keepAlive
	}
	if r.expire && r.leases == 0 && r.state == stateLoaded && !rs.closed {
		r.expire = false
		rs.unload(r, "request")
	} else {
		rs.arm(r)
	}
	rs.notify()
}

// arm starts the keep-alive timer of an idle loaded model. The caller holds
// mu.
func (rs *residency) arm(r *resident) {
	if r.leases > 0 || r.state != stateLoaded || r.keepAlive < 0 || rs.closed {
		return
	}
	if r.timer != nil {
		r.timer.Stop()
	}
	var t *time.Timer
	t = time.AfterFunc(r.keepAlive, func() {
		rs.mu.Lock()
		defer rs.mu.Unlock()
		if r.timer == t && r.leases == 0 && r.state == stateLoaded {
			r.timer = nil
			rs.unload(r, "idle")
		}
	})
	r.timer = t
}

// unloadNow unloads r when no request uses it, as POST /models/unload asks;
// it reports whether r was loaded.
func (rs *residency) unloadNow(r *resident) (bool, error) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	switch {
	case r.state != stateLoaded:
		return false, nil
	case r.leases > 0:
		return true, fmt.Errorf("%d requests are using it", r.leases)
	}
	rs.unload(r, "request")
	return true, nil
}

// expireSoon unloads r now when no request uses it, else when the last one
// ends; it reports whether r was loaded.
func (rs *residency) expireSoon(r *resident) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if r.state != stateLoaded {
		return false
	}
	if r.leases == 0 {
		rs.unload(r, "request")
	} else {
		r.expire = true
	}
	return true
}

// expiry is when r will be unloaded if no request comes; see
// Models.Expiry.
func (rs *residency) expiry(r *resident) (at time.Time, forever, ok bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if r.state != stateLoaded {
		return time.Time{}, false, false
	}
	if r.keepAlive < 0 && !r.expire {
		return time.Time{}, true, true
	}
	from := r.lastUsed
	if r.leases > 0 {
		from = time.Now()
	}
	if r.expire {
		return from, false, true
	}
	return from.Add(r.keepAlive), false, true
}

// status is r's state for listings.
func (rs *residency) status(r *resident) residentState {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return r.state
}

// close unloads every model, waiting for the requests that use them.
func (rs *residency) close() {
	rs.mu.Lock()
	rs.closed = true
	rs.notify()
	for {
		busy := false
		for _, r := range rs.list {
			switch {
			case r.state == stateLoaded && r.leases == 0:
				rs.unload(r, "shutdown")
				busy = true
			case r.state != stateUnloaded:
				busy = true
			}
		}
		if !busy {
			rs.mu.Unlock()
			return
		}
		changed := rs.changed
		rs.mu.Unlock()
		<-changed
		rs.mu.Lock()
	}
}

// errNotLoaded is a stand-in engine used without a lease: a bug, reported
// as a 503 rather than a crash.
var errNotLoaded = errors.New("session: the model is not loaded")

// residentEngine is the Engine of a model on demand: it runs on the loaded
// engine, which a request holds a lease on before it calls Submit or
// Embed.
type residentEngine struct {
	rs *residency
	r  *resident
}

func (e residentEngine) current() Engine {
	e.rs.mu.Lock()
	defer e.rs.mu.Unlock()
	if e.r.engine == nil {
		return nil
	}
	return e.r.engine
}

func (e residentEngine) Submit(ctx context.Context, r backends.Request) (*backends.Stream, error) {
	if eng := e.current(); eng != nil {
		return eng.Submit(ctx, r)
	}
	return nil, errNotLoaded
}

func (e residentEngine) Embed(ctx context.Context, tokens []tokenizer.ID) ([]float32, error) {
	if eng := e.current(); eng != nil {
		return eng.Embed(ctx, tokens)
	}
	return nil, errNotLoaded
}

// Stats are the loaded engine's, or zero (nothing queued, no memory) while
// the model is not loaded.
func (e residentEngine) Stats() backends.EngineStats {
	if eng := e.current(); eng != nil {
		return eng.Stats()
	}
	return backends.EngineStats{}
}

// MaxLen is the loaded engine's, or what it will be.
func (e residentEngine) MaxLen() int {
	e.rs.mu.Lock()
	defer e.rs.mu.Unlock()
	return e.r.maxLen
}

// maxKeepAlive bounds a keep_alive that is not "forever" (a century).
const maxKeepAlive = 100 * 365 * 24 * time.Hour

// ParseKeepAlive reads keep_alive as ollama takes it: a duration ("5m",
// "1h30m", "0"), or a number of seconds (as a JSON number or a string); 0
// unloads the model as soon as the request ends, a negative value keeps it
// loaded until it must make room. param is the field's name for errors.
func ParseKeepAlive(v json.RawMessage, param string) (*time.Duration, error) {
	bad := Invalid(param, CodeInvalidValue, "%s must be a duration such as \"5m\" or \"1h\", or a number of seconds; 0 unloads the model after the request, a negative value keeps it loaded", param)
	seconds := func(secs float64) time.Duration {
		return time.Duration(max(-1, min(secs, maxKeepAlive.Seconds())) * float64(time.Second))
	}
	var d time.Duration
	var n json.Number
	var str string
	t := bytes.TrimSpace(v)
	switch {
	case len(t) > 0 && (t[0] == '-' || (t[0] >= '0' && t[0] <= '9')) && json.Unmarshal(t, &n) == nil:
		secs, err := n.Float64()
		if err != nil || math.IsNaN(secs) || math.IsInf(secs, 0) {
			return nil, bad
		}
		d = seconds(secs)
	case json.Unmarshal(t, &str) == nil:
		var err error
		if d, err = time.ParseDuration(strings.TrimSpace(str)); err != nil {
			secs, perr := strconv.ParseFloat(strings.TrimSpace(str), 64)
			if perr != nil || math.IsNaN(secs) || math.IsInf(secs, 0) {
				return nil, bad
			}
			d = seconds(secs)
		}
	default:
		return nil, bad
	}
	if d < 0 {
		d = KeepForever
	}
	return &d, nil
}
