package api

import (
	"bytes"
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
