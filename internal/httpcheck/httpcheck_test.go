package httpcheck

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestDo checks what reaches the server: the method, the body, JSON as the
// default Content-Type of a body, and headers that override it.
func TestDo(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Seen", r.Method+"|"+r.Header.Get("Content-Type")+"|"+r.Header.Get("X-Key"))
		w.WriteHeader(http.StatusTeapot)
		w.Write(b)
	}))
	defer srv.Close()
	for _, tc := range []struct {
		name, method, body string
		header             []string
		seen               string
	}{
		{"json by default", "POST", `{"a":1}`, nil, "POST|application/json|"},
		{"no body, no type", "GET", "", []string{"X-Key", "k"}, "GET||k"},
		{"a header overrides", "POST", "a=1", []string{"Content-Type", "application/x-www-form-urlencoded"}, "POST|application/x-www-form-urlencoded|"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, b := Do(t, tc.method, srv.URL, tc.body, tc.header...)
			if resp.StatusCode != http.StatusTeapot || string(b) != tc.body || resp.Header.Get("X-Seen") != tc.seen {
				t.Errorf("%d %q %q, want 418 %q %q", resp.StatusCode, b, resp.Header.Get("X-Seen"), tc.body, tc.seen)
			}
		})
	}
}
