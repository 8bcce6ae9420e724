package anthropic

import (
	"net/http"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/ruvllm/ruvllm/api/jsonhttp"
	"github.com/ruvllm/ruvllm/session"
)

// pingEvery is how long a stream stays silent before a ping keeps it
// alive: a long prompt takes a while to read on a CPU, and proxies and
// clients drop connections that say nothing.
const pingEvery = 5 * time.Second

// messages serves POST /v1/messages.
func (a *API) messages(w http.ResponseWriter, r *http.Request) error {
	f, err := jsonhttp.Read(r)
	if err != nil {
		return err
	}
	mr, err := a.parseRequest(f, false)
	if err != nil {
		return err
	}
	mr.req.Received = jsonhttp.Received(r)
	if mr.maxTokens == 0 {
		return a.generateNothing(w, r, mr)
	}
	ctx := r.Context()
	gen, err := a.Models.Start(ctx, &mr.req)
	if err != nil {
		return err
	}
	defer gen.Close()
	if rh := gen.RouteHeader(); rh != "" {
		w.Header().Set("X-Route", rh)
	}
	_, prompt := gen.Prompt(0)
	head := message{ID: gen.ID(), Type: "message", Role: "assistant", Model: gen.ModelID(), Content: []contentBlock{},
		Usage: usage{InputTokens: len(prompt)}}
	if !mr.stream {
		b := &blocks{omitThinking: mr.omitThinking}
		if err := gen.Run(ctx, b); err != nil {
			return err
		}
		msg := head
		msg.Content = b.content()
		msg.StopReason, msg.StopSequence = stopOf(gen.Results()[0], mr.maxTokens)
		msg.Usage = usageOf(gen.Usage())
		jsonhttp.WriteJSON(w, http.StatusOK, msg)
		return nil
	}
	ev := newEvents(w)
	if err := ev.start(head); err != nil {
		return nil // the client is gone: no one to tell
	}
	stopPings := ev.keepAlive(pingEvery)
	b := &blocks{emit: ev.send, omitThinking: mr.omitThinking}
	err = gen.Run(ctx, b)
	stopPings()
	if err != nil {
		if err != session.ErrClientGone {
			// The status line is long gone: the error travels as an
			// event, which the SDKs raise as an API error.
			_, body := errorBodyOf(w, session.AsError(err))
			ev.send("error", body)
		}
		return nil
	}
	reason, seq := stopOf(gen.Results()[0], mr.maxTokens)
	ev.end(reason, seq, usageOf(gen.Usage()))
	return nil
}

// stopOf is a result's stop_reason and stop_sequence (set only when a stop
// sequence ended it).
func stopOf(r session.Result, maxTokens int) (*string, *string) {
	reason := stopReason(r, maxTokens)
	var seq *string
	if reason == stopSequence {
		s := r.StopSequence
		seq = &s
	}
	return &reason, seq
}

// generateNothing answers max_tokens 0, which Anthropic takes to fill its
// prompt cache without generating: an empty message that reached its
// max_tokens, whose usage counts the prompt.
func (a *API) generateNothing(w http.ResponseWriter, r *http.Request, mr *request) error {
	rendered, err := a.Models.Render(&mr.req)
	if err != nil {
		return err
	}
	n := len(rendered.Tokens)
	if maxLen := rendered.Model.Engine.MaxLen(); n >= maxLen {
		e := session.Invalid("messages", session.CodeContextLength, "the prompt has %d tokens; the model's context is %d", n, maxLen)
		e.Context = &session.ContextLimit{Prompt: n, Context: maxLen}
		return e
	}
	if a.OnTokens != nil {
		a.OnTokens(r, n)
	}
	reason := stopMaxTokens
	msg := message{ID: "msg_" + uuid.NewString(), Type: "message", Role: "assistant", Model: mr.req.Model, Content: []contentBlock{},
		StopReason: &reason, Usage: usage{InputTokens: n, ServiceTier: "standard"}}
	if !mr.stream {
		jsonhttp.WriteJSON(w, http.StatusOK, msg)
		return nil
	}
	ev := newEvents(w)
	head := msg
	head.StopReason = nil
	if ev.start(head) == nil {
		ev.end(&reason, nil, msg.Usage)
	}
	return nil
}

// events writes a message's server-sent events. Pings come from a
// goroutine of their own, so writes are serialised.
type events struct {
	mu   sync.Mutex
	st   *jsonhttp.Stream
	last time.Time
	err  error
}

func newEvents(w http.ResponseWriter) *events { return &events{st: jsonhttp.NewSSE(w)} }

// send writes one event; after a failed write every send fails.
func (e *events) send(name string, v any) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err != nil {
		return e.err
	}
	e.err = e.st.Event(name, v)
	e.last = time.Now()
	return e.err
}

// start sends message_start, with the message's head (no content, no stop
// reason, the prompt's tokens), and a ping, as Anthropic does.
func (e *events) start(head message) error {
	if err := e.send("message_start", messageStart{Type: "message_start", Message: head}); err != nil {
		return err
	}
	return e.send("ping", typeOnly{Type: "ping"})
}

// end sends message_delta, with the stop reason and the final usage, and
// message_stop.
func (e *events) end(reason, seq *string, u usage) error {
	if err := e.send("message_delta", messageDelta{Type: "message_delta", Delta: messageDeltaStop{StopReason: reason, StopSequence: seq},
		Usage: messageDeltaUsage{InputTokens: u.InputTokens, CacheCreationInputTokens: u.CacheCreationInputTokens,
			CacheReadInputTokens: u.CacheReadInputTokens, OutputTokens: u.OutputTokens}}); err != nil {
		return err
	}
	return e.send("message_stop", typeOnly{Type: "message_stop"})
}

// keepAlive sends a ping whenever the stream has been silent for every;
// the returned function stops it, and returns once no ping is being sent.
func (e *events) keepAlive(every time.Duration) func() {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every / 2)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				e.mu.Lock()
				quiet := time.Since(e.last) >= every
				e.mu.Unlock()
				if quiet && e.send("ping", typeOnly{Type: "ping"}) != nil {
					return
				}
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}

// countTokens serves POST /v1/messages/count_tokens: the tokens of the
// prompt a message request would have, as its template renders it.
func (a *API) countTokens(w http.ResponseWriter, r *http.Request) error {
	f, err := jsonhttp.Read(r)
	if err != nil {
		return err
	}
	mr, err := a.parseRequest(f, true)
	if err != nil {
		return err
	}
	rendered, err := a.Models.Render(&mr.req)
	if err != nil {
		return err
	}
	if a.OnTokens != nil {
		a.OnTokens(r, len(rendered.Tokens))
	}
	jsonhttp.WriteJSON(w, http.StatusOK, tokenCount{InputTokens: len(rendered.Tokens)})
	return nil
}

type tokenCount struct {
	InputTokens int `json:"input_tokens"`
}
