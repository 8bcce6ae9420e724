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
	stream(st *jsonhttp.Stream, h responseHead, gen *session.Generation, opt streamOptions, t *tokenizer.Tokenizer) streamWriter
}

// streamOptions are what a request asks of its stream: the usage chunk,
// and timings on every content chunk (llama-server's timings_per_token).
type streamOptions struct {
	includeUsage, perToken bool
}

// streamWriter writes a streaming response: a session.Sink, with what goes
// before the first event and after the last.
type streamWriter interface {
	session.Sink
	begin() error
	// end writes the usage chunk (when u is not nil) and [DONE].
	end(u *Usage) error
}

// responseHead is what every response and chunk of a request repeats.
type responseHead struct {
	id          string
	created     int64
	model       string
	fingerprint string
	// verbose adds llama-server's __verbose object (API.Verbose).
	verbose bool
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
	h := responseHead{id: gen.ID(), created: time.Now().Unix(), model: gen.ModelID(), fingerprint: a.Version, verbose: a.Verbose}
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
	sw := f.stream(st, h, gen, streamOptions{includeUsage: g.includeUsage, perToken: g.perToken}, gen.Tokenizer())
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
	var up *Usage
	if g.includeUsage {
		u := usageOf(gen.Usage())
		up = &u
	}
	sw.end(up)
	return nil
}

// verboseOf is llama-server's __verbose object of a whole response: what
// its native /completion answers, for the first choice, with the prompt
// as the model read it (its tokens detokenized, special ones written).
func verboseOf(h responseHead, gen *session.Generation) *Verbose {
	if !h.verbose {
		return nil
	}
	results := gen.Results()
	if len(results) == 0 {
		return nil
	}
	res := results[0]
	_, ids := gen.Prompt(res.Prompt)
	prompt := gen.Tokenizer().DecodeWith(ids, tokenizer.DecodeOptions{RenderSpecial: true})
	return &Verbose{Prompt: prompt, Content: res.Text, Model: h.model, TokensEvaluated: len(ids),
		TokensPredicted: res.Generated, Stop: true, StoppingWord: res.StopSequence}
}

// usageOf is OpenAI's usage object.
func usageOf(u session.Usage) Usage {
	out := Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.TotalTokens(),
		PromptTokensDetails: &PromptTokensDetails{CachedTokens: u.CachedTokens}}
	if u.DraftedTokens > 0 {
		out.Speculative = &SpeculativeUsage{DraftedTokens: u.DraftedTokens, AcceptedTokens: u.AcceptedTokens}
	}
	return out
}

// chunks writes the chunks of a stream whose choices have the shape C.
type chunks[C any] struct {
	st        *jsonhttp.Stream
	head      responseHead
	object    string
	usageNull any
	gen       *session.Generation
	opt       streamOptions
	// finished counts the choices whose finish chunk is sent.
	finished int
}

func newChunks[C any](st *jsonhttp.Stream, h responseHead, object string, gen *session.Generation, opt streamOptions) *chunks[C] {
	c := &chunks[C]{st: st, head: h, object: object, gen: gen, opt: opt}
	if opt.includeUsage {
		// OpenAI sends "usage": null on every chunk before the last.
		c.usageNull = json.RawMessage("null")
	}
	return c
}

func (c *chunks[C]) chunk(choices []C) streamChunk[C] {
	return streamChunk[C]{ID: c.head.id, Object: c.object, Created: c.head.created, Model: c.head.model,
		SystemFingerprint: c.head.fingerprint, Choices: choices, Usage: c.usageNull}
}

// timings are the generation's timings so far.
func (c *chunks[C]) timings() *session.TimingsJSON {
	t := c.gen.Throughput(time.Now()).TimingsJSON()
	return &t
}

// send sends a chunk of ch that opens the stream (no timings).
func (c *chunks[C]) send(ch C) error { return c.st.Send(c.chunk([]C{ch})) }

// sendContent sends a chunk of generated content, with the timings so far
// when the request asked for them on every token.
func (c *chunks[C]) sendContent(ch C) error {
	k := c.chunk([]C{ch})
	if c.opt.perToken {
		k.Timings = c.timings()
	}
	return c.st.Send(k)
}

// sendProgress sends a progress chunk of ch: no content, the prompt's
// progress beside it.
func (c *chunks[C]) sendProgress(ch C, p session.Progress) error {
	k := c.chunk([]C{ch})
	k.PromptProgress = ProgressOf(p)
	return c.st.Send(k)
}

// sendFinish sends a choice's finish chunk; the last one carries the
// timings when no usage chunk follows.
func (c *chunks[C]) sendFinish(ch C) error {
	c.finished++
	k := c.chunk([]C{ch})
	if c.opt.perToken || !c.opt.includeUsage && c.finished == c.gen.Choices() {
		k.Timings = c.timings()
	}
	return c.st.Send(k)
}

func (c *chunks[C]) end(u *Usage) error {
	if u != nil {
		ch := c.chunk([]C{})
		ch.Usage = u
		ch.Timings = c.timings()
		if err := c.st.Send(ch); err != nil {
			return err
		}
	}
	return c.st.Done()
}
