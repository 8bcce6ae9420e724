package api

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/ruvllm/ruvllm/sona"
)

// DefaultRouterName is Options.RouterName when it is "": the model name
// that asks the router to choose.
const DefaultRouterName = "auto"

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
}

// header is the X-Route response header: the decision (the model, its
// score, expected quality and cost, whether it explored) and how long it
// took, in microseconds.
func (rt *routing) header() string {
	return rt.decision.Header() + "; decide_us=" + strconv.FormatInt(rt.took.Microseconds(), 10)
}

// routerName is the model name that asks for the router; "" when the
// server has none.
func (s *Server) routerName() string {
	if s.opt.Router == nil {
		return ""
	}
	if s.opt.RouterName == "" {
		return DefaultRouterName
	}
	return s.opt.RouterName
}

// route asks the router which served model (or adapter, with
// Options.RouteAdapters) answers the chat or text completion f, whose ids
// start with idPrefix. The router sees the prompt's text, max tokens, the
// user and route_cost_weight; each model's cost is scaled by the requests
// queued on its engine and raised by its load time when it is not loaded.
func (s *Server) route(f *fields, idPrefix string) (target, *apiError) {
	start := time.Now()
	set := s.models.Load()
	q := sona.Request{ID: idPrefix + uuid.NewString(), Text: routeText(f), MaxTokens: routeMaxTokens(f)}
	if u, ok := f.m["user"]; ok {
		_ = json.Unmarshal(u, &q.User)
	}
	if w, ok, err := f.number("route_cost_weight"); err != nil {
		return target{}, err
	} else if ok {
		if w < 0 || math.IsInf(w, 0) {
			return target{}, invalid("route_cost_weight", codeInvalidValue, "route_cost_weight must be a finite number ≥ 0, got %g", w)
		}
		q.CostWeight = &w
	}
	arms, targets := s.routeArms(set, idPrefix == chatFormat{}.idPrefix())
	if len(arms) == 0 {
		return target{}, unsupported("model", "no served model has a chat template for the router to choose; use /v1/completions")
	}
	d, err := s.opt.Router.Decide(q, arms)
	if err != nil {
		return target{}, internalError("routing: %v", err)
	}
	for i, a := range arms {
		if a.Name == d.Arm {
			t := targets[i]
			now := time.Now()
			t.route = &routing{decision: d, id: q.ID, start: now, took: now.Sub(start)}
			return t, nil
		}
	}
	return target{}, internalError("routing: the router chose %q, which is not offered", d.Arm)
}

// routeArms lists what the router may choose: every served model (that
// renders chats, for a chat), then (with RouteAdapters) their adapters, at most
// sona.MaxArms in all.
func (s *Server) routeArms(set *modelSet, chat bool) ([]sona.Arm, []target) {
	arms := make([]sona.Arm, 0, len(set.list))
	targets := make([]target, 0, len(set.list))
	add := func(m *Model, adapter, name string, a sona.Arm) {
		if len(arms) < sona.MaxArms {
			a.Name = name
			arms, targets = append(arms, a), append(targets, target{model: m, adapter: adapter, name: name})
		}
	}
	base := make([]sona.Arm, len(set.list))
	for i, m := range set.list {
		if chat && m.Chat == nil {
			continue
		}
		base[i] = s.armState(m)
		add(m, "", m.ID, base[i])
	}
	if s.opt.RouteAdapters {
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

// armState is what m's engine adds to the cost of a request now: queued
// requests scale it (each waits for about one running request to finish
// per busy slot), and a model on demand that is not loaded adds the time
// its last load took.
func (s *Server) armState(m *Model) sona.Arm {
	a := sona.Arm{CostScale: 1}
	if m.resident != nil {
		s.residency.mu.Lock()
		r := m.resident
		loaded := r.state == stateLoaded
		load := r.loadTime
		s.residency.mu.Unlock()
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
// message contents (and text parts) joined by newlines, or a text
// completion's prompt(s). It reads the fields without marking them, since
// the handler parses and checks them afterwards.
func routeText(f *fields) string {
	var b strings.Builder
	add := func(s string) {
		if s != "" && b.Len() < maxRouteText {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(s[:min(len(s), maxRouteText-b.Len())])
		}
	}
	if raw, ok := f.m["messages"]; ok {
		var msgs []struct {
			Content json.RawMessage `json:"content"`
		}
		_ = json.Unmarshal(raw, &msgs)
		for _, m := range msgs {
			var text string
			if json.Unmarshal(m.Content, &text) == nil {
				add(text)
				continue
			}
			var parts []struct {
				Text string `json:"text"`
			}
			_ = json.Unmarshal(m.Content, &parts)
			for _, p := range parts {
				add(p.Text)
			}
		}
		return strings.ToValidUTF8(b.String(), "")
	}
	if raw, ok := f.m["prompt"]; ok {
		var text string
		if json.Unmarshal(raw, &text) == nil {
			add(text)
		} else {
			var texts []string
			_ = json.Unmarshal(raw, &texts)
			for _, t := range texts {
				add(t)
			}
		}
	}
	return strings.ToValidUTF8(b.String(), "")
}

// routeMaxTokens is the request's cap on generated tokens, 0 for none.
func routeMaxTokens(f *fields) int {
	for _, name := range []string{"max_completion_tokens", "max_tokens"} {
		var n int
		if raw, ok := f.m[name]; ok && json.Unmarshal(raw, &n) == nil && n > 0 {
			return n
		}
	}
	return 0
}

// observeRoute tells the router how a routed generation turned out: its
// cost in seconds, failed, or its finish (length when any choice was cut,
// stop otherwise). A client that left says nothing of the model: the
// decision is dropped.
func (s *Server) observeRoute(rt *routing, gen *generation, err *apiError) {
	if rt == nil {
		return
	}
	if err == errClientGone {
		s.opt.Router.Abandon(rt.id)
		return
	}
	o := sona.Outcome{Cost: time.Since(rt.start).Seconds(), Finish: "stop", Failed: err != nil}
	if gen != nil {
		for _, c := range gen.choices {
			if c.finish == "length" {
				o.Finish = "length"
			}
		}
	}
	s.opt.Router.Observe(rt.id, o)
}

// abandonRoute drops a routed request's decision unless its outcome was
// observed: a request refused after routing (a bad parameter, a prompt too
// long) says nothing of the model chosen.
func (s *Server) abandonRoute(t target) {
	if t.route != nil {
		s.opt.Router.Abandon(t.route.id)
	}
}

// routerFeedback passes ratings of completions to the router: a server
// feedback sink beside the models' own (MicroLoRA training). A correction
// says the answer was wrong: a rating of −1. Feedback on completions the
// router did not route is not its business.
type routerFeedback struct{ r *sona.Router }

func (rf routerFeedback) Feedback(_ context.Context, fb *Feedback) error {
	rating := float64(fb.Rating)
	switch fb.Kind {
	case FeedbackRating:
	case FeedbackCorrection:
		rating = -1
	default:
		return nil
	}
	err := rf.r.Feedback(fb.CompletionID, rating)
	if errors.Is(err, sona.ErrUnknownCompletion) {
		return nil
	}
	return err
}
