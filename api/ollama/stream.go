package ollama

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/ruvllm/ruvllm/api/jsonhttp"
	"github.com/ruvllm/ruvllm/models/tokenizer"
	"github.com/ruvllm/ruvllm/session"
)

// frame is the shape of a generation's answer: /api/chat's messages or
// /api/generate's response text.
type frame struct {
	// name is the model as the client named it.
	name string
	// generate gives /api/generate's shape; context puts the
	// conversation's token ids in its final chunk.
	generate, context bool
}

// part is what a chunk carries.
type part struct {
	content, thinking string
	calls             []toolCall
	logprobs          []logprob
	// done, reason, metrics and context are the final chunk's.
	done    bool
	reason  string
	metrics *metrics
	context []tokenizer.ID
}

func (fm frame) chunk(p part) any {
	now := time.Now().UTC()
	if fm.generate {
		return generateChunk{Model: fm.name, CreatedAt: now, Response: p.content, Thinking: p.thinking, ToolCalls: p.calls,
			Logprobs: p.logprobs, Done: p.done, DoneReason: p.reason, Context: p.context, metrics: p.metrics}
	}
	return chatChunk{Model: fm.name, CreatedAt: now, Message: message{Role: "assistant", Content: p.content, Thinking: p.thinking, ToolCalls: p.calls},
		Logprobs: p.logprobs, Done: p.done, DoneReason: p.reason, metrics: p.metrics}
}

// doneReason is ollama's name of a finish reason: "stop" (the model ended
// its turn, called tools, or wrote a stop string) or "length".
func doneReason(r session.FinishReason) string {
	if r == session.FinishLength {
		return "length"
	}
	return "stop"
}

// run starts g's generation and answers in fm's shape: a stream of NDJSON
// chunks (the last with done true and the metrics), or one object.
func (a *API) run(w http.ResponseWriter, r *http.Request, g *genRequest, fm frame) error {
	ctx := r.Context()
	gen, err := a.Models.Start(ctx, &g.req)
	if err != nil {
		return err
	}
	defer gen.Close()
	if rh := gen.RouteHeader(); rh != "" {
		w.Header().Set("X-Route", rh)
	}
	if !g.stream {
		if err := gen.Run(ctx, session.Discard{}); err != nil {
			return err
		}
		res := gen.Results()[0]
		calls := newCallSet()
		p := a.final(gen, res, fm)
		p.content, p.thinking = res.Content, res.Reasoning
		p.calls = calls.add(res.Calls...)
		if g.req.Logprobs {
			p.logprobs = logprobsOf(res.Tokens)
		}
		jsonhttp.WriteJSON(w, http.StatusOK, fm.chunk(p))
		return nil
	}
	st := jsonhttp.NewNDJSON(w)
	fr := &framer{st: st, fm: fm, calls: newCallSet()}
	if err := st.Begin(); err != nil {
		return nil // the client is gone
	}
	if err := gen.Run(ctx, fr); err != nil {
		if err != session.ErrClientGone {
			// The status line is long gone: the error is a line of the
			// stream, as ollama sends it.
			st.Send(errorBody{Error: session.AsError(err).Message})
		}
		return nil
	}
	st.Send(fm.chunk(a.final(gen, gen.Results()[0], fm)))
	return nil
}

// final is the final chunk's part: done, its reason, the metrics and,
// for /api/generate, the context.
func (a *API) final(gen *session.Generation, res session.Result, fm frame) part {
	p := part{done: true, reason: doneReason(res.Finish), metrics: metricsOf(gen)}
	if fm.context {
		_, ids := gen.Prompt(res.Prompt)
		out := gen.Tokenizer().Encode(res.Text, tokenizer.EncodeOptions{ParseSpecial: true})
		p.context = append(slices.Clone(ids), out...)
	}
	return p
}

// metricsOf measures a finished generation: the total from the request's
// arrival, the model's load (waiting for it to be held), the prompt's
// evaluation (from submitting it to the first token) and the generation
// (from the first token to the last), with the prompt's and the
// generated tokens.
func metricsOf(gen *session.Generation) *metrics {
	t, u := gen.Timings(), gen.Usage()
	end := t.Ended
	if end.IsZero() {
		end = time.Now()
	}
	m := &metrics{PromptEvalCount: u.PromptTokens, EvalCount: u.CompletionTokens, TotalDuration: int64(end.Sub(t.Received))}
	if !t.Loaded.IsZero() {
		m.LoadDuration = int64(t.Loaded.Sub(t.Received))
	}
	first := t.FirstToken
	if first.IsZero() {
		first = end
	}
	if !t.Started.IsZero() {
		m.PromptEvalDuration = int64(first.Sub(t.Started))
	}
	m.EvalDuration = int64(end.Sub(first))
	return m
}

// framer writes a generation's events as chunks: one per step of the
// generation that has something to show. A tool call is sent whole (its
// arguments are an object) once it is complete: when the next one starts,
// or the generation ends.
type framer struct {
	st    *jsonhttp.Stream
	fm    frame
	calls *callSet
	// pending is the call being written, nil when none is.
	pending *session.Call
}

func (fr *framer) Send(evs []session.Event) error {
	var p part
	var content, thinking strings.Builder
	for i := range evs {
		e := &evs[i]
		switch e.Kind {
		case session.EventText:
			content.WriteString(e.Text)
		case session.EventReasoning:
			thinking.WriteString(e.Text)
		case session.EventCallStart:
			p.calls = append(p.calls, fr.flush()...)
			fr.pending = &session.Call{ID: e.ID, Name: e.Name}
		case session.EventCallArguments:
			if fr.pending != nil {
				fr.pending.Arguments += e.Text
			}
		case session.EventFinish:
			p.calls = append(p.calls, fr.flush()...)
		}
		p.logprobs = append(p.logprobs, logprobsOf(e.Tokens)...)
	}
	p.content, p.thinking = content.String(), thinking.String()
	if p.content == "" && p.thinking == "" && len(p.calls) == 0 && len(p.logprobs) == 0 {
		return nil
	}
	return fr.st.Send(fr.fm.chunk(p))
}

// flush takes the pending call out, as a call to send.
func (fr *framer) flush() []toolCall {
	if fr.pending == nil {
		return nil
	}
	c := *fr.pending
	fr.pending = nil
	return fr.calls.add(c)
}

// callSet numbers a response's calls.
type callSet struct{ n int }

func newCallSet() *callSet { return &callSet{} }

// add turns calls into ollama's, their arguments an object. A call whose
// arguments are not a JSON object (one cut off by num_predict) is left
// out: ollama's clients decode arguments as an object.
func (cs *callSet) add(calls ...session.Call) []toolCall {
	var out []toolCall
	for _, c := range calls {
		args, ok := argumentObject(c.Arguments)
		if !ok {
			continue
		}
		out = append(out, toolCall{ID: c.ID, Function: toolFunction{Index: cs.n, Name: c.Name, Arguments: args}})
		cs.n++
	}
	return out
}

// argumentObject is a call's arguments as the JSON object they are (kept
// in the model's order), or that a JSON string holds; "" is no arguments.
func argumentObject(s string) (json.RawMessage, bool) {
	t := strings.TrimSpace(s)
	if t == "" {
		return json.RawMessage("{}"), true
	}
	var str string
	if json.Unmarshal([]byte(t), &str) == nil {
		t = strings.TrimSpace(str)
	}
	if !strings.HasPrefix(t, "{") || !json.Valid([]byte(t)) {
		return nil, false
	}
	var buf bytes.Buffer
	if json.Compact(&buf, []byte(t)) != nil {
		return nil, false
	}
	return buf.Bytes(), true
}

// logprobsOf renders tokens' log-probabilities in ollama's shape.
func logprobsOf(tokens []session.TokenLogprob) []logprob {
	if len(tokens) == 0 {
		return nil
	}
	out := make([]logprob, len(tokens))
	for i, t := range tokens {
		out[i] = logprob{tokenLogprob: tokenLogprob{Token: t.Piece, Logprob: finiteLogprob(t.Logprob), Bytes: byteList(t.Piece)}}
		for _, alt := range t.Top {
			out[i].TopLogprobs = append(out[i].TopLogprobs, tokenLogprob{Token: alt.Piece, Logprob: finiteLogprob(alt.Logprob), Bytes: byteList(alt.Piece)})
		}
	}
	return out
}

// finiteLogprob is lp as JSON can carry it: -Inf (and NaN) become -9999.
func finiteLogprob(lp float32) float64 {
	v := float64(lp)
	if math.IsNaN(v) || v < -9999 {
		return -9999
	}
	return v
}

func byteList(s string) []int {
	b := make([]int, len(s))
	for i := range len(s) {
		b[i] = int(s[i])
	}
	return b
}
