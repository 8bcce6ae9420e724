package session

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/ruvllm/ruvllm/sona"
)

// maxRouteText bounds the prompt text handed to the router; its features
// read the head and tail of a text anyway.
const maxRouteText = 64 << 10

// routing is a request the router chose a model for: the decision, the
// completion id under which its outcome and later ratings reach the
// router, and when its answer started, once the model was loaded (its
// cost is the seconds it takes).
type routing struct {
	decision sona.Decision
	id       string
	start    time.Time
	// took is how long routing took: reading the prompt, the engines'
	// state and the decision.
	took time.Duration
	// observed says the outcome reached the router; an unobserved
	// decision is abandoned when the request ends.
	observed bool
}

// header is the X-Route response header: the decision (the model, its
// score, expected quality and cost, whether it explored) and how long it
// took, in microseconds.
func (rt *routing) header() string {
	return rt.decision.Header() + "; decide_us=" + strconv.FormatInt(rt.took.Microseconds(), 10)
}

// route asks the router which served model (or adapter, with
// Options.RouteAdapters) answers req, whose completion id is id. The
// router sees the prompt's text, max tokens, the user and the cost weight;
// each model's cost is scaled by the requests queued on its engine and
// raised by its load time when it is not loaded.
func (ms *Models) route(req *Request, id string) (Target, error) {
	start := time.Now()
	set := ms.set.Load()
	q := sona.Request{ID: id, Text: req.routeText(), MaxTokens: req.MaxTokens, User: req.User, CostWeight: req.RouteCostWeight}
	chat := req.Messages != nil
	arms, targets := ms.routeArms(set, chat)
	if len(arms) == 0 {
		return Target{}, Unsupported(req.names().Model, "no served model has a chat template for the router to choose; send a text prompt")
	}
	d, err := ms.opt.Router.Decide(q, arms)
	if err != nil {
		return Target{}, Internal("routing: %v", err)
	}
	for i, a := range arms {
		if a.Name == d.Arm {
			t := targets[i]
			now := time.Now()
			t.route = &routing{decision: d, id: q.ID, start: now, took: now.Sub(start)}
			return t, nil
		}
	}
	return Target{}, Internal("routing: the router chose %q, which is not offered", d.Arm)
}

// routeArms lists what the router may choose: every served model (that
// renders chats, for a chat), then (with RouteAdapters) their adapters, at most
// sona.MaxArms in all.
func (ms *Models) routeArms(set *modelSet, chat bool) ([]sona.Arm, []Target) {
	arms := make([]sona.Arm, 0, len(set.list))
	targets := make([]Target, 0, len(set.list))
	add := func(m *Model, adapter, name string, a sona.Arm) {
		if len(arms) < sona.MaxArms {
			a.Name = name
			arms, targets = append(arms, a), append(targets, Target{Model: m, Adapter: adapter, Name: name})
		}
	}
	base := make([]sona.Arm, len(set.list))
	for i, m := range set.list {
		if chat && m.Chat == nil {
			continue
		}
		base[i] = ms.armState(m)
		add(m, "", m.ID, base[i])
	}
	if ms.opt.RouteAdapters {
		for i, m := range set.list {
			if m.Adapters == nil || (chat && m.Chat == nil) {
				continue
			}
			for _, in := range m.Adapters.List() {
				add(m, in.Name, m.ID+":"+in.Name, base[i])
			}
		}
	}
	return arms, targets
}

// RouteArms lists what the router may choose for a chat (or a text
// prompt), as /v1/models describes the router.
func (ms *Models) RouteArms(chat bool) []string {
	arms, _ := ms.routeArms(ms.set.Load(), chat)
	names := make([]string, len(arms))
	for i, a := range arms {
		names[i] = a.Name
	}
	return names
}

// armState is what m's engine adds to the cost of a request now: queued
// requests scale it (each waits for about one running request to finish
// per busy slot), and a model on demand that is not loaded adds the time
// its last load took.
func (ms *Models) armState(m *Model) sona.Arm {
	a := sona.Arm{CostScale: 1}
	if m.resident != nil {
		ms.residency.mu.Lock()
		r := m.resident
		loaded := r.state == stateLoaded
		load := r.loadTime
		ms.residency.mu.Unlock()
		if !loaded {
			a.ExtraCost = load.Seconds()
			return a
		}
	}
	st := m.Engine.Stats()
	if st.Queued > 0 {
		a.CostScale += float64(st.Queued) / float64(max(st.Running, 1))
	}
	return a
}

// routeText is the prompt's text for the router's features: a chat's
// message contents joined by newlines, or a text completion's prompts.
func (req *Request) routeText() string {
	var b strings.Builder
	add := func(s string) {
		if s != "" && b.Len() < maxRouteText {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(s[:min(len(s), maxRouteText-b.Len())])
		}
	}
	for _, m := range req.Messages {
		if s, ok := m["content"].(string); ok {
			add(s)
		}
	}
	for _, p := range req.Prompts {
		add(p.Text)
	}
	return strings.ToValidUTF8(b.String(), "")
}

// observeRoute tells the router how a routed generation turned out: its
// cost in seconds, failed, or its finish (length when any choice was cut,
// stop otherwise). A client that left says nothing of the model: the
// decision is dropped.
func (ms *Models) observeRoute(rt *routing, gen *Generation, err error) {
	if rt == nil || rt.observed {
		return
	}
	rt.observed = true
	if err == ErrClientGone {
		ms.opt.Router.Abandon(rt.id)
		return
	}
	o := sona.Outcome{Cost: time.Since(rt.start).Seconds(), Finish: "stop", Failed: err != nil}
	if gen != nil {
		for _, c := range gen.choices {
			if c.finish == FinishLength {
				o.Finish = "length"
			}
		}
	}
	ms.opt.Router.Observe(rt.id, o)
}

// abandonRoute drops a routed request's decision unless its outcome was
// observed: a request refused after routing (a bad parameter, a prompt too
// long) says nothing of the model chosen.
func (ms *Models) abandonRoute(rt *routing) {
	if rt != nil && !rt.observed {
		rt.observed = true
		ms.opt.Router.Abandon(rt.id)
	}
}

// RouterFeedback passes ratings of completions to the router: a feedback
// sink beside the models' own (MicroLoRA training). A correction says the
// answer was wrong: a rating of −1. Feedback on completions the router did
// not route is not its business.
type RouterFeedback struct{ Router *sona.Router }

// Feedback passes a rating or correction to the router.
func (rf RouterFeedback) Feedback(_ context.Context, fb *Feedback) error {
	rating := float64(fb.Rating)
	switch fb.Kind {
	case FeedbackRating:
	case FeedbackCorrection:
		rating = -1
	default:
		return nil
	}
	err := rf.Router.Feedback(fb.CompletionID, rating)
	if errors.Is(err, sona.ErrUnknownCompletion) {
		return nil
	}
	return err
}
