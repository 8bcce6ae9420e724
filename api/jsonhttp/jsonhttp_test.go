package jsonhttp

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ruvllm/ruvllm/session"
)

func TestRead(t *testing.T) {
	for _, tc := range []struct {
		name, contentType, body string
		status                  int // 0: read
	}{
		{"json", "application/json", `{"a":1}`, 0},
		{"no type", "", `{"a":1}`, 0},
		{"a json suffix", "application/vnd.x+json; charset=utf-8", `{"a":1}`, 0},
		{"curl -d without -H", "application/x-www-form-urlencoded", ` {"a":1}`, 0},
		{"a form that is a form", "application/x-www-form-urlencoded", `a=1&b=2`, 415},
		{"a form of a JSON array", "application/x-www-form-urlencoded", `[1]`, 415},
		{"text", "text/plain", `{"a":1}`, 415},
		{"not JSON", "application/json", `{"a":`, 400},
		{"two objects", "application/json", `{} {}`, 400},
		{"an array", "application/json", `[]`, 400},
		{"empty", "application/json", ``, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/", strings.NewReader(tc.body))
			if tc.contentType != "" {
				r.Header.Set("Content-Type", tc.contentType)
			}
			f, err := Read(r)
			if tc.status == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if n, ok, err := f.Integer("a"); err != nil || !ok || n != 1 {
					t.Errorf("a = %d, %v, %v", n, ok, err)
				}
				return
			}
			if e := session.AsError(err); err == nil || e.Status != tc.status {
				t.Errorf("err %v, want status %d", err, tc.status)
			}
		})
	}
}

func TestFieldsUnknown(t *testing.T) {
	f, err := Parse([]byte(`{"b":1,"a":null,"c":"x","d":2}`), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.Str("c"); err != nil {
		t.Fatal(err)
	}
	// null counts as absent; the first unread member in sorted order is
	// the one reported.
	if e := session.AsError(f.Unknown()); e.Param != "b" || e.Code != session.CodeUnknownParam {
		t.Errorf("unknown %+v", e)
	}
	f.Ignore("b")
	if err := f.Unknown("d"); err != nil {
		t.Errorf("unknown %v", err)
	}
}

// TestHandler checks the one place handler errors become responses: a
// nil *session.Error returned as an error is a bug, answered as a 500, not
// an empty 200.
func TestHandler(t *testing.T) {
	var nilError *session.Error
	for _, tc := range []struct {
		name   string
		err    error
		status int
		logged bool
	}{
		{"no error", nil, 200, false},
		{"a session error", session.Invalid("x", session.CodeInvalidValue, "bad x"), 400, false},
		{"a wrapped one", fmt.Errorf("wrapped: %w", session.Loading()), 503, false},
		{"a nil *session.Error", nilError, 500, true},
		{"another error", errors.New("disk on fire"), 500, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logged := false
			write := func(w http.ResponseWriter, e *session.Error) { w.WriteHeader(e.Status) }
			h := Handler(func(http.ResponseWriter, *http.Request) error { return tc.err }, write, func(*http.Request, error) { logged = true })
			rec := httptest.NewRecorder()
			h(rec, httptest.NewRequest("GET", "/", nil))
			if rec.Code != tc.status || logged != tc.logged {
				t.Errorf("status %d logged %v, want %d %v", rec.Code, logged, tc.status, tc.logged)
			}
		})
	}
}

func TestStreamFraming(t *testing.T) {
	rec := httptest.NewRecorder()
	s := NewSSE(rec)
	s.Event("ping", map[string]string{"type": "ping"})
	s.Send(map[string]int{"a": 1})
	s.Done()
	if got, want := rec.Body.String(), "event: ping\ndata: {\"type\":\"ping\"}\n\ndata: {\"a\":1}\n\ndata: [DONE]\n\n"; got != want {
		t.Errorf("sse %q, want %q", got, want)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "text/event-stream; charset=utf-8" {
		t.Errorf("content type %q", ct)
	}
	rec = httptest.NewRecorder()
	n := NewNDJSON(rec)
	n.Event("ignored", map[string]string{"b": "<|im_end|>"})
	if got, want := rec.Body.String(), "{\"b\":\"<|im_end|>\"}\n"; got != want {
		t.Errorf("ndjson %q, want %q", got, want)
	}
}
