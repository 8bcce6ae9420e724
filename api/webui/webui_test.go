package webui

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/ruvllm/ruvllm/internal/httpcheck"
)

// TestRoutes checks what the page's routes answer: the page with its
// security headers, its files with their types, HEAD without a body, a
// 304 for a cached copy, and the router's own 404 for other paths.
func TestRoutes(t *testing.T) {
	r := chi.NewRouter()
	r.NotFound(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "router 404", http.StatusNotFound) })
	Routes(r)
	srv := httptest.NewServer(r)
	defer srv.Close()

	get := func(t *testing.T, method, path string, header ...string) (*http.Response, string) {
		t.Helper()
		resp, b := httpcheck.Do(t, method, srv.URL+path, "", header...)
		return resp, string(b)
	}

	for _, tc := range []struct {
		method, path string
		status       int
		typ, body    string // Content-Type prefix; text the body holds
	}{
		{"GET", "/", 200, "text/html", "<title>ruvllm chat</title>"},
		{"HEAD", "/", 200, "text/html", ""},
		{"GET", "/webui/app.js", 200, "text/javascript", "v1/chat/completions"},
		{"GET", "/webui/markdown.js", 200, "text/javascript", "safeHref"},
		{"GET", "/webui/style.css", 200, "text/css", "#messages"},
		{"GET", "/webui/icon.svg", 200, "image/svg+xml", "<svg"},
		{"GET", "/favicon.ico", 200, "image/svg+xml", "<svg"},
		{"HEAD", "/favicon.ico", 200, "image/svg+xml", ""},
		{"GET", "/webui/index.html", 404, "", "router 404"},
		{"GET", "/webui/nope.js", 404, "", "router 404"},
		{"GET", "/index.html", 404, "", "router 404"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			resp, body := get(t, tc.method, tc.path)
			if resp.StatusCode != tc.status || !strings.HasPrefix(resp.Header.Get("Content-Type"), tc.typ) || !strings.Contains(body, tc.body) {
				t.Fatalf("%d %q: %.200s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
			}
			if tc.method == "HEAD" && (body != "" || resp.ContentLength <= 0) {
				t.Errorf("HEAD: body %q, length %d", body, resp.ContentLength)
			}
			if tc.status != 200 {
				return
			}
			if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("ETag") == "" {
				t.Errorf("headers %v", resp.Header)
			}
			if tc.path == "/" && !strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src 'self'") {
				t.Errorf("the page's Content-Security-Policy is %q", resp.Header.Get("Content-Security-Policy"))
			}
			if resp2, body2 := get(t, "GET", tc.path, "If-None-Match", resp.Header.Get("ETag")); resp2.StatusCode != 304 || body2 != "" {
				t.Errorf("revalidation: %d %q", resp2.StatusCode, body2)
			}
		})
	}
}

// TestPageIsSelfContained checks that the page loads nothing from
// elsewhere (no CDN): every file index.html names is one of the embedded
// files.
func TestPageIsSelfContained(t *testing.T) {
	html := string(page["index.html"].body)
	refs := regexp.MustCompile(`(?:src|href)="([^"]*)"`).FindAllStringSubmatch(html, -1)
	if len(refs) < 4 {
		t.Fatalf("only %d references in index.html", len(refs))
	}
	for _, m := range refs {
		t.Run(m[1], func(t *testing.T) {
			name, ok := strings.CutPrefix(m[1], "webui/")
			if _, found := page[name]; !ok || !found {
				t.Errorf("index.html loads %q, which is not an embedded file", m[1])
			}
		})
	}
	for name, f := range page {
		if strings.Contains(string(f.body), "//cdn") || strings.Contains(string(f.body), "@import") {
			t.Errorf("%s refers to another site", name)
		}
	}
}
