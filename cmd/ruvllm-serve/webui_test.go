package main

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/ruvllm/ruvllm/internal/httpcheck"
)

// TestServeWebUIAndCORS checks serve's defaults for browsers, as
// llama-server's: the chat page at / without the API key and CORS for any
// origin with the key still required; --no-webui and an empty
// --cors-origins turn them off.
func TestServeWebUIAndCORS(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		flags                 []string
		page, preflight, chat int    // statuses of GET /, a preflight, a chat without the key
		allowOrigin           string // on the chat's 401
	}{
		{"defaults", nil, 200, 204, 401, "*"},
		{"off", []string{"--no-webui", "--cors-origins", ""}, 404, 405, 401, ""},
		{"one origin", []string{"--cors-origins", "https://app.example"}, 200, 204, 401, "https://app.example"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testServeConfig(t, append([]string{"--api-key", "secret"}, tc.flags...)...)
			ctx, cancel := context.WithCancel(context.Background())
			base, done := startServe(t, ctx, c)
			defer func() {
				cancel()
				<-done
			}()
			waitHealthy(t, base)
			status := func(method, path string, header ...string) (int, http.Header, string) {
				t.Helper()
				resp, b := httpcheck.Do(t, method, base+path, `{"messages":[{"role":"user","content":"hi"}]}`, header...)
				return resp.StatusCode, resp.Header, string(b)
			}
			if s, h, b := status("GET", "/"); s != tc.page || s == 200 && !strings.HasPrefix(h.Get("Content-Type"), "text/html") {
				t.Errorf("GET /: %d %q %.100s", s, h.Get("Content-Type"), b)
			}
			origin := "https://app.example"
			if s, h, _ := status("OPTIONS", "/v1/chat/completions", "Origin", origin, "Access-Control-Request-Method", "POST",
				"Access-Control-Request-Headers", "authorization, content-type"); s != tc.preflight ||
				s == 204 && !strings.Contains(strings.ToLower(h.Get("Access-Control-Allow-Headers")), "authorization") {
				t.Errorf("preflight: %d %v", s, h)
			}
			if s, h, b := status("POST", "/v1/chat/completions", "Origin", origin); s != tc.chat || h.Get("Access-Control-Allow-Origin") != tc.allowOrigin {
				t.Errorf("chat without the key: %d, Allow-Origin %q: %s", s, h.Get("Access-Control-Allow-Origin"), b)
			}
		})
	}
}
