package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"time"
)

// writeTimeout bounds one write of a stream: a client that stops reading
// without closing the connection must not hold a handler forever.
const writeTimeout = time.Minute

// sseWriter writes server-sent events: one "data: {json}\n\n" per chunk,
// flushed at once, and "data: [DONE]\n\n" at the end, as OpenAI streams.
type sseWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool
	buf     []byte
}

func newSSE(w http.ResponseWriter) *sseWriter {
	return &sseWriter{w: w, rc: http.NewResponseController(w)}
}

func (s *sseWriter) begin() error {
	if s.started {
		return nil
	}
	s.started = true
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	// Proxies such as nginx buffer responses unless told not to.
	h.Set("X-Accel-Buffering", "no")
	s.w.WriteHeader(http.StatusOK)
	return s.flush()
}

// send writes v as one event.
func (s *sseWriter) send(v any) error {
	b, err := marshal(v)
	if err != nil {
		return err
	}
	return s.write(bytes.TrimSuffix(b, []byte("\n")))
}

// done writes the terminating [DONE] event.
func (s *sseWriter) done() error { return s.write([]byte("[DONE]")) }

func (s *sseWriter) write(data []byte) error {
	if err := s.begin(); err != nil {
		return err
	}
	s.buf = append(s.buf[:0], "data: "...)
	s.buf = append(s.buf, data...)
	s.buf = append(s.buf, '\n', '\n')
	// Not every ResponseWriter supports deadlines (httptest's recorder
	// does not); the write itself still works there.
	_ = s.rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := s.w.Write(s.buf); err != nil {
		return err
	}
	return s.flush()
}

func (s *sseWriter) flush() error {
	if err := s.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// chunkShape is what differs between the streams of chat and text
// completions: the object the chunks name and the shape C of their choices.
// Everything else about a stream is sseSink's.
type chunkShape[C any] interface {
	object() string
	// opening are the choices sent before the first token, each in a
	// chunk of its own: chat's role deltas, text's echoed prompts.
	opening(gen *generation) []C
	// text is a choice carrying new text of c and the entries released
	// with it; false when there is nothing to send yet (text held back).
	text(c *choice, text string, entries []tokenEntry) (C, bool)
	// finish is the choice that ends c.
	finish(c *choice, reason string) C
}

// streamChunk is one event of a stream: the head every chunk of a request
// repeats, and its choices.
type streamChunk[C any] struct {
	ID                string `json:"id"`
	Object            string `json:"object"`
	Created           int64  `json:"created"`
	Model             string `json:"model"`
	SystemFingerprint string `json:"system_fingerprint"`
	Choices           []C    `json:"choices"`
	// Usage is null on every chunk but the last when the client asked for
	// usage, and absent otherwise.
	Usage any `json:"usage,omitempty"`
}

// sseSink writes a generation as SSE chunks whose choices shape makes; it is
// the streamSink of chat and text completions alike.
type sseSink[C any] struct {
	sse       *sseWriter
	head      responseHead
	shape     chunkShape[C]
	usageNull any
}

func newSSESink[C any](sse *sseWriter, h responseHead, shape chunkShape[C], includeUsage bool) *sseSink[C] {
	s := &sseSink[C]{sse: sse, head: h, shape: shape}
	if includeUsage {
		// OpenAI sends "usage": null on every chunk before the last.
		s.usageNull = json.RawMessage("null")
	}
	return s
}

func (s *sseSink[C]) chunk(choices []C) streamChunk[C] {
	return streamChunk[C]{ID: s.head.id, Object: s.shape.object(), Created: s.head.created, Model: s.head.model,
		SystemFingerprint: s.head.fingerprint, Choices: choices, Usage: s.usageNull}
}

func (s *sseSink[C]) send(c C) error { return s.sse.send(s.chunk([]C{c})) }

func (s *sseSink[C]) begin(gen *generation) error {
	for _, c := range s.shape.opening(gen) {
		if err := s.send(c); err != nil {
			return err
		}
	}
	// With nothing to open with, the headers still go out now, so that
	// the client knows the request was accepted.
	return s.sse.begin()
}

func (s *sseSink[C]) text(c *choice, text string, entries []tokenEntry) error {
	ch, ok := s.shape.text(c, text, entries)
	if !ok {
		return nil
	}
	return s.send(ch)
}

func (s *sseSink[C]) finish(c *choice, reason string) error {
	return s.send(s.shape.finish(c, reason))
}

func (s *sseSink[C]) end(u *usage) error {
	if u != nil {
		ch := s.chunk([]C{})
		ch.Usage = u
		if err := s.sse.send(ch); err != nil {
			return err
		}
	}
	return s.sse.done()
}
