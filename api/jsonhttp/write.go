package jsonhttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/ruvllm/ruvllm/session"
)

// WriteJSON sends v with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"message":"encoding the response failed","type":"server_error","param":null,"code":"internal_error"}}` + "\n")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
}

// Marshal is json.Marshal without the escaping of <, > and &, which only
// matters inside HTML and would mangle special tokens such as <|im_end|>;
// the result ends with a newline.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ErrorWriter writes an error in a protocol's shape.
type ErrorWriter func(w http.ResponseWriter, e *session.Error)

// SetRetryAfter sets the Retry-After header of an error that has one.
func SetRetryAfter(w http.ResponseWriter, e *session.Error) {
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
}

// Handler adapts a handler that returns its refusal, instead of writing
// it, to net/http: the error becomes the response in write's shape. An
// error that is not a *session.Error is a failure of the server, given to
// logFailure and sent as a 500. A handler returns nil once it has begun
// its response (a stream reports its errors as events).
func Handler(h func(w http.ResponseWriter, r *http.Request) error, write ErrorWriter, logFailure func(r *http.Request, err error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		err := h(w, r)
		if err == nil {
			return
		}
		var e *session.Error
		if !errors.As(err, &e) || e == nil {
			if logFailure != nil {
				logFailure(r, err)
			}
			e = session.Internal("%v", err)
		}
		write(w, e)
	}
}

// writeTimeout bounds one write of a stream: a client that stops reading
// without closing the connection must not hold a handler forever.
const writeTimeout = time.Minute

// Stream writes a streamed response: server-sent events ("data: {json}"
// and, optionally, an "event:" line), or newline-delimited JSON, each item
// flushed at once.
type Stream struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	ndjson  bool
	started bool
	buf     []byte
}

// NewSSE starts a stream of server-sent events.
func NewSSE(w http.ResponseWriter) *Stream {
	return &Stream{w: w, rc: http.NewResponseController(w)}
}

// NewNDJSON starts a stream of newline-delimited JSON objects, as ollama
// streams.
func NewNDJSON(w http.ResponseWriter) *Stream {
	return &Stream{w: w, rc: http.NewResponseController(w), ndjson: true}
}

// Begin sends the status line and headers, if not sent yet.
func (s *Stream) Begin() error {
	if s.started {
		return nil
	}
	s.started = true
	h := s.w.Header()
	if s.ndjson {
		h.Set("Content-Type", "application/x-ndjson")
	} else {
		h.Set("Content-Type", "text/event-stream; charset=utf-8")
		h.Set("Cache-Control", "no-cache")
		h.Set("Connection", "keep-alive")
	}
	// Proxies such as nginx buffer responses unless told not to.
	h.Set("X-Accel-Buffering", "no")
	s.w.WriteHeader(http.StatusOK)
	return s.flush()
}

// Started reports whether the response has begun.
func (s *Stream) Started() bool { return s.started }

// Send writes v as one item: a "data:" event, or a line.
func (s *Stream) Send(v any) error { return s.Event("", v) }

// Event writes v as an event with the name (an "event:" line before its
// data); on an NDJSON stream the name is left out.
func (s *Stream) Event(name string, v any) error {
	b, err := Marshal(v)
	if err != nil {
		return err
	}
	return s.write(name, bytes.TrimSuffix(b, []byte("\n")))
}

// Done writes OpenAI's terminating "data: [DONE]" event.
func (s *Stream) Done() error { return s.write("", []byte("[DONE]")) }

func (s *Stream) write(name string, data []byte) error {
	if err := s.Begin(); err != nil {
		return err
	}
	s.buf = s.buf[:0]
	if s.ndjson {
		s.buf = append(s.buf, data...)
		s.buf = append(s.buf, '\n')
	} else {
		if name != "" {
			s.buf = append(s.buf, "event: "...)
			s.buf = append(s.buf, name...)
			s.buf = append(s.buf, '\n')
		}
		s.buf = append(s.buf, "data: "...)
		s.buf = append(s.buf, data...)
		s.buf = append(s.buf, '\n', '\n')
	}
	// Not every ResponseWriter supports deadlines (httptest's recorder
	// does not); the write itself still works there.
	_ = s.rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := s.w.Write(s.buf); err != nil {
		return err
	}
	return s.flush()
}

func (s *Stream) flush() error {
	if err := s.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

type receivedKey struct{}

// WithReceived records in ctx when the request arrived; the server's
// middleware does it, and time to first token counts from there.
func WithReceived(ctx context.Context, t time.Time) context.Context {
	return context.WithValue(ctx, receivedKey{}, t)
}

// Received is when r arrived, as WithReceived recorded it, or now.
func Received(r *http.Request) time.Time {
	if t, ok := r.Context().Value(receivedKey{}).(time.Time); ok {
		return t
	}
	return time.Now()
}
