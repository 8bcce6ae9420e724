package openai

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/ruvllm/ruvllm/api/jsonhttp"
	"github.com/ruvllm/ruvllm/models/tokenizer"
	"github.com/ruvllm/ruvllm/session"
)

// format is what differs between chat and text completions: the response
// object, and the stream.
type format interface {
	response(h responseHead, gen *session.Generation, logprobs bool) any
	stream(st *jsonhttp.Stream, h responseHead, gen *session.Generation, includeUsage bool, t *tokenizer.Tokenizer) streamWriter
}

// streamWriter writes a streaming response: a session.Sink, with what goes
// before the first event and after the last.
type streamWriter interface {
	session.Sink
	begin() error
	// end writes the usage chunk (when u is not nil) and [DONE].
	end(u *usage) error
}

// responseHead is what every response and chunk of a request repeats.
type responseHead struct {
	id          string
	created     int64
	model       string
	fingerprint string
}

// generate runs g and answers in f's shape, streamed or whole.
func (a *API) generate(w http.ResponseWriter, r *http.Request, g *genRequest, f format) error {
	ctx := r.Context()
	g.req.Received = jsonhttp.Received(r)
	gen, err := a.Models.Start(ctx, &g.req)
	if err != nil {
		return err
	}
	defer gen.Close()
	h := responseHead{id: gen.ID(), created: time.Now().Unix(), model: gen.ModelID(), fingerprint: a.Version}
	if rh := gen.RouteHeader(); rh != "" {
		w.Header().Set("X-Route", rh)
	}
	if !g.stream {
		if err := gen.Run(ctx, session.Discard{}); err != nil {
			return err
		}
		jsonhttp.WriteJSON(w, http.StatusOK, f.response(h, gen, g.req.Logprobs))
		return nil
	}
	st := jsonhttp.NewSSE(w)
	sw := f.stream(st, h, gen, g.includeUsage, gen.Tokenizer())
	if err := sw.begin(); err != nil {
		return nil // the client is gone: no one to tell
	}
	if err := gen.Run(ctx, sw); err != nil {
		if err != session.ErrClientGone {
			// The status line is long gone: the error travels as an event,
			// which the SDKs raise as an APIError.
			st.Send(ErrorBody(session.AsError(err)))
		}
		return nil
	}
	var up *usage
	if g.includeUsage {
		u := usageOf(gen.Usage())
		up = &u
	}
	sw.end(up)
	return nil
}

// usageOf is OpenAI's usage object.
func usageOf(u session.Usage) usage {
	return usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.TotalTokens(),
		PromptTokensDetails: &promptTokensDetails{CachedTokens: u.CachedTokens}}
}

// chunks writes the chunks of a stream whose choices have the shape C.
type chunks[C any] struct {
	st        *jsonhttp.Stream
	head      responseHead
	object    string
	usageNull any
}

func newChunks[C any](st *jsonhttp.Stream, h responseHead, object string, includeUsage bool) *chunks[C] {
	c := &chunks[C]{st: st, head: h, object: object}
	if includeUsage {
		// OpenAI sends "usage": null on every chunk before the last.
		c.usageNull = json.RawMessage("null")
	}
	return c
}

func (c *chunks[C]) chunk(choices []C) streamChunk[C] {
	return streamChunk[C]{ID: c.head.id, Object: c.object, Created: c.head.created, Model: c.head.model,
		SystemFingerprint: c.head.fingerprint, Choices: choices, Usage: c.usageNull}
}

func (c *chunks[C]) send(ch C) error { return c.st.Send(c.chunk([]C{ch})) }

func (c *chunks[C]) end(u *usage) error {
	if u != nil {
		ch := c.chunk([]C{})
		ch.Usage = u
		if err := c.st.Send(ch); err != nil {
			return err
		}
	}
	return c.st.Done()
}
