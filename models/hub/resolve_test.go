package hub

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

func TestPickQuant(t *testing.T) {
	repo := []string{
		"README.md",
		"model-IQ4_XS.gguf",
		"model-Q4_0.gguf",
		"model-Q4_0_4_4.gguf",
		"model-Q4_K_M.gguf",
		"model-Q4_K_S.gguf",
		"mmproj-model-Q8_0.gguf",
		"model-Q8_0.gguf",
		"sub/model-Q8_0.gguf",
		"Q6_K/model-Q6_K-00001-of-00002.gguf",
		"Q6_K/model-Q6_K-00002-of-00002.gguf",
		"model.q5_k_m.gguf",
	}
	tests := []struct {
		quant, want string
		err         error
	}{
		{"Q4_K_M", "model-Q4_K_M.gguf", nil},
		{"q4_k_m", "model-Q4_K_M.gguf", nil},
		{"Q4_0", "model-Q4_0.gguf", nil},
		{"Q4_0_4_4", "model-Q4_0_4_4.gguf", nil},
		{"Q4_XS", "", ErrNotFound},       // "IQ4_XS" contains it, not as a tag of its own
		{"Q8_0", "model-Q8_0.gguf", nil}, // not the projector, shortest path
		{"Q5_K_M", "model.q5_k_m.gguf", nil},
		{"Q4_K", "", ErrNotFound}, // Q4_K_M and Q4_K_S continue the tag
		{"Q6_K", "", ErrNotFound}, // split only
		{"Q2_K", "", ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.quant, func(t *testing.T) {
			got, err := pickQuant(repo, tt.quant)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("pickQuant(%s) = %q, %v; want %v", tt.quant, got, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("pickQuant(%s) = %q, %v; want %q", tt.quant, got, err, tt.want)
			}
		})
	}
	if _, err := pickQuant(repo, "Q6_K"); err == nil || !strings.Contains(err.Error(), "split") {
		t.Errorf("split-only match: %v, want an error explaining the split", err)
	}
	if _, err := pickQuant([]string{"README.md"}, "Q4_K_M"); err == nil || !strings.Contains(err.Error(), "no GGUF") {
		t.Errorf("no gguf: %v", err)
	}
}

// treeServer serves a repository listing in two pages and the files in it.
type treeServer struct {
	srv      *httptest.Server
	listings atomic.Int32
	files    map[string][]byte
	// nextHost, when set, replaces the host of the next-page link.
	nextHost string
}

func newTreeServer(t *testing.T) *treeServer {
	ts := &treeServer{files: map[string][]byte{
		"model-Q4_K_M.gguf": testFile[:1000],
		"model-Q8_0.gguf":   testFile[:3000],
	}}
	entry := func(path string) treeEntry {
		e := treeEntry{Type: "file", Path: path, Size: 135}
		e.LFS = &struct {
			OID  string `json:"oid"`
			Size int64  `json:"size"`
		}{OID: digestOf(ts.files[path]), Size: int64(len(ts.files[path]))}
		return e
	}
	ts.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		const tree = "/api/models/owner/model-GGUF/tree/main"
		switch {
		case r.URL.Path == tree && r.URL.Query().Get("cursor") == "":
			ts.listings.Add(1)
			if r.URL.Query().Get("recursive") != "true" {
				t.Errorf("listing not recursive: %s", r.URL)
			}
			host := r.Host
			if ts.nextHost != "" {
				host = ts.nextHost
			}
			w.Header().Set("Link", `<http://`+host+tree+`?recursive=true&cursor=2>; rel="next"`)
			_ = json.NewEncoder(w).Encode([]treeEntry{{Type: "directory", Path: "docs"}, entry("model-Q4_K_M.gguf")})
		case r.URL.Path == tree:
			ts.listings.Add(1)
			_ = json.NewEncoder(w).Encode([]treeEntry{entry("model-Q8_0.gguf"), {Type: "file", Path: "README.md", Size: 10}})
		case strings.HasPrefix(r.URL.Path, "/owner/model-GGUF/resolve/main/"):
			b, ok := ts.files[strings.TrimPrefix(r.URL.Path, "/owner/model-GGUF/resolve/main/")]
			if !ok {
				http.NotFound(w, r)
				return
			}
			_, _ = w.Write(b)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(ts.srv.Close)
	return ts
}

func TestPullByQuant(t *testing.T) {
	ts := newTreeServer(t)
	c, _ := newClient(t, ts.srv.URL)
	ref, err := ParseRef("owner/model-GGUF:Q8_0")
	if err != nil {
		t.Fatal(err)
	}
	resolved, err := c.Resolve(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	want := Ref{Repo: "owner/model-GGUF", File: "model-Q8_0.gguf", Size: 3000, SHA256: digestOf(testFile[:3000])}
	if resolved != want {
		t.Errorf("Resolve = %+v, want %+v", resolved, want)
	}
	if n := ts.listings.Load(); n != 2 {
		t.Errorf("%d listing requests, want 2 pages", n)
	}

	p, err := c.Pull(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readFile(t, p), testFile[:3000]) {
		t.Error("content differs")
	}

	// Offline, the cached file still answers the same reference.
	offline := &Client{BaseURL: closedURL(t), CacheDir: c.CacheDir, Progress: c.Progress}
	again, err := offline.Pull(context.Background(), ref)
	if err != nil || again != p {
		t.Errorf("offline pull by quant = %q, %v; want %q", again, err, p)
	}
}

func TestPullDefaultQuant(t *testing.T) {
	ts := newTreeServer(t)
	c, _ := newClient(t, ts.srv.URL)
	p, err := c.Pull(context.Background(), Ref{Repo: "owner/model-GGUF"})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readFile(t, p), testFile[:1000]) {
		t.Errorf("got %s, want the %s file", p, DefaultQuant)
	}
}

func TestResolveErrors(t *testing.T) {
	ts := newTreeServer(t)
	c, _ := newClient(t, ts.srv.URL)
	_, err := c.Resolve(context.Background(), Ref{Repo: "owner/model-GGUF", Quant: "Q3_K_L"})
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "model-Q8_0.gguf") || !strings.Contains(err.Error(), "--model") {
		t.Errorf("missing quant: %v, want ErrNotFound listing the files", err)
	}
	_, err = c.Resolve(context.Background(), Ref{Repo: "owner/other", Quant: "Q8_0"})
	if !errors.Is(err, ErrNotFound) {
		t.Errorf("missing repo: %v, want ErrNotFound", err)
	}
	ts.nextHost = "evil.example"
	_, err = c.Resolve(context.Background(), Ref{Repo: "owner/model-GGUF", Quant: "Q8_0"})
	if err == nil || !strings.Contains(err.Error(), "another host") {
		t.Errorf("next link to another host: %v, want an error", err)
	}
	offline := &Client{BaseURL: closedURL(t), CacheDir: t.TempDir()}
	if _, err := offline.Resolve(context.Background(), Ref{Repo: "owner/model-GGUF"}); !errors.Is(err, ErrNetwork) || !strings.Contains(err.Error(), "--model") {
		t.Errorf("offline resolve: %v, want ErrNetwork with the --model hint", err)
	}
}

func TestNextLink(t *testing.T) {
	tests := []struct {
		in   []string
		want string
	}{
		{nil, ""},
		{[]string{`<https://h/a?cursor=x>; rel="next"`}, "https://h/a?cursor=x"},
		{[]string{`<https://h/p>; rel="prev", <https://h/n>; rel="next"`}, "https://h/n"},
		{[]string{`<https://h/p>; rel="prev"`}, ""},
		{[]string{`garbage`}, ""},
	}
	for _, tt := range tests {
		if got := nextLink(tt.in); got != tt.want {
			t.Errorf("nextLink(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// listingServer serves a one-page listing of files (each holding its own
// name as content) for repository owner/repo, and the files.
func listingServer(t *testing.T, files ...string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/models/owner/repo/tree/main" {
			entries := []treeEntry{}
			for _, f := range files {
				entries = append(entries, treeEntry{Type: "file", Path: f, Size: int64(len(f))})
			}
			_ = json.NewEncoder(w).Encode(entries)
			return
		}
		for _, f := range files {
			if r.URL.Path == "/owner/repo/resolve/main/"+f {
				_, _ = w.Write([]byte(f))
				return
			}
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestResolveUntagged picks, for a reference without a tag, the
// DefaultQuant file, else the repository's one model file; with several
// and none of the default tag, the error lists them and says how to pick.
func TestResolveUntagged(t *testing.T) {
	tests := []struct {
		name  string
		files []string
		want  string
		say   []string
	}{
		{"default tag", []string{"m-Q8_0.gguf", "m-Q4_K_M.gguf", "README.md"}, "m-Q4_K_M.gguf", nil},
		{"the only file", []string{"m-F16.gguf", "mmproj-m-F16.gguf", "README.md"}, "m-F16.gguf", nil},
		{"several", []string{"m-F16.gguf", "m-Q8_0.gguf"}, "", []string{"m-F16.gguf", "m-Q8_0.gguf", "owner/repo:QUANT", "owner/repo/FILE.gguf"}},
		{"none", []string{"README.md"}, "", []string{"no GGUF"}},
		{"split only", []string{"m-Q8_0-00001-of-00002.gguf", "m-Q8_0-00002-of-00002.gguf"}, "", []string{"m-Q8_0-00001-of-00002.gguf"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := newClient(t, listingServer(t, tt.files...).URL)
			ref, err := ParseRef("owner/repo")
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.Resolve(context.Background(), ref)
			if tt.want == "" {
				if !errors.Is(err, ErrNotFound) {
					t.Fatalf("Resolve = %+v, %v; want ErrNotFound", got, err)
				}
				for _, s := range tt.say {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not say %q", err, s)
					}
				}
				return
			}
			if err != nil || got.File != tt.want || got.Quant != "" {
				t.Fatalf("Resolve = %+v, %v; want file %s", got, err, tt.want)
			}
			p, err := c.Pull(context.Background(), ref)
			if err != nil || string(readFile(t, p)) != tt.want {
				t.Fatalf("Pull = %s, %v", p, err)
			}
			// Offline, the one cached file of the repository answers.
			offline := &Client{BaseURL: closedURL(t), CacheDir: c.CacheDir, Progress: c.Progress}
			if again, err := offline.Pull(context.Background(), ref); err != nil || again != p {
				t.Errorf("offline: %s, %v; want %s", again, err, p)
			}
		})
	}
}
