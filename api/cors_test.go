package api

import (
	"strings"
	"testing"
)

// TestCORS checks the answers browsers get from other origins: preflights
// on every route answered before the API key is asked for, and
// Access-Control-Allow-Origin on every response to an allowed origin
// (errors and streams too), while the key still guards the routes. The
// browser's side of it is TestWebUIBrowser's cors case.
func TestCORS(t *testing.T) {
	const key = "sk-cors"
	anyOrigin := newFakeServer(t, Options{CORSOrigins: []string{"*"}, APIKeys: []string{key}}, nil)
	listed := newFakeServer(t, Options{CORSOrigins: []string{"https://ok.example"}}, nil)
	off := newFakeServer(t, Options{}, nil)
	bearer := "Bearer " + key

	t.Run("preflight", func(t *testing.T) {
		for _, tc := range []struct {
			name, url, method, origin, requested string
			status                               int
			allowOrigin                          string
			allowHeaders                         []string // that must be among Access-Control-Allow-Headers
		}{
			{"chat, any origin", anyOrigin.URL + "/v1/chat/completions", "POST", "http://127.0.0.1:9", "authorization,content-type",
				204, "*", []string{"Authorization", "Content-Type", "X-Api-Key", "Anthropic-Version"}},
			{"requested headers are echoed", anyOrigin.URL + "/v1/responses", "POST", "https://a.example", "x-stainless-os, x-custom-thing",
				204, "*", []string{"x-stainless-os", "x-custom-thing", "Authorization"}},
			{"ollama's routes", anyOrigin.URL + "/api/chat", "POST", "https://a.example", "", 204, "*", []string{"Content-Type"}},
			{"a model route", anyOrigin.URL + "/v1/models", "GET", "https://a.example", "x-api-key", 204, "*", []string{"x-api-key"}},
			{"an unknown path", anyOrigin.URL + "/no/such/route", "GET", "https://a.example", "", 204, "*", nil},
			{"a listed origin is echoed", listed.URL + "/v1/chat/completions", "POST", "https://ok.example", "authorization",
				204, "https://ok.example", []string{"Authorization"}},
			{"an unlisted origin", listed.URL + "/v1/chat/completions", "POST", "https://evil.example", "authorization", 405, "", nil},
			{"CORS off", off.URL + "/v1/chat/completions", "POST", "https://ok.example", "authorization", 405, "", nil},
		} {
			t.Run(tc.name, func(t *testing.T) {
				h := []string{"Origin", tc.origin, "Access-Control-Request-Method", tc.method}
				if tc.requested != "" {
					h = append(h, "Access-Control-Request-Headers", tc.requested)
				}
				resp, b := do(t, "OPTIONS", tc.url, "", h...)
				if resp.StatusCode != tc.status || resp.Header.Get("Access-Control-Allow-Origin") != tc.allowOrigin {
					t.Fatalf("status %d, Allow-Origin %q: %s", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"), b)
				}
				if tc.status != 204 {
					return
				}
				if len(b) != 0 {
					t.Errorf("a preflight answer has a body: %q", b)
				}
				allowed := strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers"))
				for _, want := range tc.allowHeaders {
					if !strings.Contains(allowed, strings.ToLower(want)) {
						t.Errorf("Access-Control-Allow-Headers %q lacks %s", allowed, want)
					}
				}
				if m := resp.Header.Get("Access-Control-Allow-Methods"); !strings.Contains(m, tc.method) || !strings.Contains(m, "OPTIONS") {
					t.Errorf("Access-Control-Allow-Methods %q", m)
				}
				if resp.Header.Get("Access-Control-Max-Age") == "" {
					t.Error("no Access-Control-Max-Age")
				}
			})
		}
	})

	t.Run("responses carry the origin", func(t *testing.T) {
		for _, tc := range []struct {
			name, method, url, body string
			header                  []string
			status                  int
			allowOrigin             string
		}{
			{"a stream", "POST", anyOrigin.URL + "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"stream":true}`,
				[]string{"Authorization", bearer}, 200, "*"},
			{"x-api-key", "GET", anyOrigin.URL + "/v1/models", "", []string{"X-Api-Key", key}, 200, "*"},
			{"no key is still refused", "POST", anyOrigin.URL + "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}]}`,
				nil, 401, "*"},
			{"a 404", "GET", anyOrigin.URL + "/no/such/route", "", []string{"Authorization", bearer}, 404, "*"},
			{"a 400", "POST", anyOrigin.URL + "/v1/chat/completions", `{"messages":[]}`, []string{"Authorization", bearer}, 400, "*"},
			{"health", "GET", anyOrigin.URL + "/health", "", nil, 200, "*"},
			{"the page", "GET", anyOrigin.URL + "/", "", nil, 200, "*"},
			{"a listed origin", "GET", listed.URL + "/v1/models", "", nil, 200, "https://ok.example"},
			{"an unlisted origin", "GET", listed.URL + "/v1/models", "", nil, 200, ""},
			{"CORS off", "GET", off.URL + "/v1/models", "", nil, 200, ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				origin := "https://ok.example"
				if tc.name == "an unlisted origin" {
					origin = "https://evil.example"
				}
				resp, b := do(t, tc.method, tc.url, tc.body, append([]string{"Origin", origin}, tc.header...)...)
				if resp.StatusCode != tc.status || resp.Header.Get("Access-Control-Allow-Origin") != tc.allowOrigin {
					t.Fatalf("status %d, Allow-Origin %q: %.200s", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"), b)
				}
				if tc.allowOrigin != "" && !strings.Contains(resp.Header.Get("Access-Control-Expose-Headers"), "X-Request-Id") {
					t.Errorf("Access-Control-Expose-Headers %q", resp.Header.Get("Access-Control-Expose-Headers"))
				}
				if tc.allowOrigin != "" && tc.allowOrigin != "*" && !strings.Contains(strings.Join(resp.Header.Values("Vary"), ","), "Origin") {
					t.Errorf("an echoed origin without Vary: Origin: %v", resp.Header)
				}
			})
		}
	})
}

func TestAllowedHeaders(t *testing.T) {
	for _, tc := range []struct{ requested, want string }{
		{"", "Authorization, Content-Type, X-Api-Key, Anthropic-Version, Anthropic-Beta, X-Request-Id"},
		{"authorization, CONTENT-TYPE", "Authorization, Content-Type, X-Api-Key, Anthropic-Version, Anthropic-Beta, X-Request-Id"},
		{"x-stainless-lang,x-b", "Authorization, Content-Type, X-Api-Key, Anthropic-Version, Anthropic-Beta, X-Request-Id, x-stainless-lang, x-b"},
		{"bad header;, x-ok, " + strings.Repeat("a", 65), "Authorization, Content-Type, X-Api-Key, Anthropic-Version, Anthropic-Beta, X-Request-Id, x-ok"},
	} {
		t.Run(tc.requested, func(t *testing.T) {
			if got := allowedHeaders(tc.requested); got != tc.want {
				t.Errorf("allowedHeaders(%q) = %q, want %q", tc.requested, got, tc.want)
			}
		})
	}
}
