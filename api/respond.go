package api

import (
	"context"
	"net/http"

	"github.com/ruvllm/ruvllm/models/tokenizer"
)

// format is what differs between chat and text completions: ids, the
// response object, and the chunks of a stream.
type format interface {
	idPrefix() string
	response(h responseHead, gen *generation, t *tokenizer.Tokenizer, u usage) any
	stream(sse *sseWriter, h responseHead, t *tokenizer.Tokenizer, includeUsage bool) streamSink
}

// streamSink is a sink that writes a streaming response.
type streamSink interface {
	sink
	// begin writes what precedes the first token (the role chunks).
	begin(gen *generation) error
	// end writes the usage chunk (when u is not nil) and [DONE].
	end(u *usage) error
}

// discard is the sink of a non-streaming response: the choices keep their
// own text, which is formatted at the end.
type discard struct{}

func (discard) text(*choice, string, []tokenEntry) error { return nil }
func (discard) finish(*choice, string) error             { return nil }

// generate runs prompts through the engine and answers in f's shape,
// streamed or whole.
func (s *Server) generate(w http.ResponseWriter, r *http.Request, m *Model, route string, prompts []prompt, g *genRequest, f format) error {
	ctx := r.Context()
	gen, err := s.startGeneration(ctx, m, route, prompts, g)
	if err != nil {
		return err
	}
	defer s.account(ctx, gen)
	h := s.head(f.idPrefix(), g.modelID)
	if g.route != nil {
		// The router knows the completion by this id, which feedback names.
		h.id = g.route.id
		w.Header().Set("X-Route", g.route.header())
	}
	if !g.stream {
		err := gen.run(ctx, discard{})
		s.observeRoute(g.route, gen, err)
		if err != nil {
			return err
		}
		s.remember(h.id, m, g, gen)
		writeJSON(w, http.StatusOK, f.response(h, gen, m.Tokenizer, gen.usage()))
		return nil
	}
	sse := newSSE(w)
	ss := f.stream(sse, h, m.Tokenizer, g.includeUsage)
	if err := ss.begin(gen); err != nil {
		return nil // the client is gone: no one to tell
	}
	err = gen.run(ctx, ss)
	s.observeRoute(g.route, gen, err)
	if err != nil {
		if err != errClientGone {
			// The status line is long gone: the error travels as an event,
			// which the SDKs raise as an APIError.
			sse.send(err.body())
		}
		return nil
	}
	s.remember(h.id, m, g, gen)
	var up *usage
	if g.includeUsage {
		u := gen.usage()
		up = &u
	}
	ss.end(up)
	return nil
}

// account ends a generation (cancelling what still runs) and records its
// tokens and time to first token for the access log and the metrics,
// however it ended.
func (s *Server) account(ctx context.Context, gen *generation) {
	gen.close()
	u := gen.usage()
	ri := info(ctx)
	ri.promptTokens, ri.completionTokens, ri.ttft = u.PromptTokens, u.CompletionTokens, gen.ttft
	s.metrics.observeUsage(u)
	if gen.ttft > 0 {
		s.metrics.observeTTFT(gen.route, gen.ttft)
	}
}
