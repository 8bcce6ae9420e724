package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/rs/zerolog"

	"github.com/ruvllm/ruvllm/api/ollama"
	"github.com/ruvllm/ruvllm/session"
)

func TestPullRef(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"hf.co/bartowski/Qwen-GGUF:Q4_K_M", "bartowski/Qwen-GGUF:Q4_K_M"},
		{"https://huggingface.co/o/r/sub/f.gguf", "o/r/sub/f.gguf"},
		{"hf.co/o/r:latest", "o/r"},
		{"o/r", "o/r"},
		{"o/r@v1/f.gguf", "o/r@v1/f.gguf"},
	} {
		ref, err := pullRef(tc.name)
		if err != nil || ref.String() != tc.want {
			t.Errorf("%s: %v %v, want %s", tc.name, ref, err, tc.want)
		}
	}
	for _, bad := range []string{"llama3.2", "llama3.2:latest", "", "o/../x.gguf"} {
		if _, err := pullRef(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestPullFunc pulls from a Hub of the test's own: progress as ollama's
// status lines (the digest the Hub gives), the file in the cache, then a
// second pull that finds it there; a name that is not a reference is a
// 400 before any progress, and a missing file a 404.
func TestPullFunc(t *testing.T) {
	data := []byte("GGUF not really, but bytes to download")
	sum := sha256.Sum256(data)
	digest := hex.EncodeToString(sum[:])
	hubSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/o/r/resolve/main/f.gguf" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("X-Linked-Etag", `"`+digest+`"`)
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		w.Write(data)
	}))
	defer hubSrv.Close()
	cache := t.TempDir()
	t.Setenv("HF_ENDPOINT", hubSrv.URL)
	t.Setenv("RUVLLM_CACHE", cache)
	pull := pullFunc(true, zerolog.Nop())
	var got []ollama.PullProgress
	progress := func(p ollama.PullProgress) { got = append(got, p) }
	if err := pull(context.Background(), "hf.co/o/r/f.gguf", progress); err != nil {
		t.Fatal(err)
	}
	last := got[len(got)-2]
	if got[0].Status != "pulling manifest" || last.Digest != "sha256:"+digest || last.Status != "pulling "+digest[:12] ||
		last.Total != int64(len(data)) || last.Completed != last.Total || got[len(got)-1].Status != "verifying sha256 digest" {
		t.Errorf("progress %+v", got)
	}
	if b, err := os.ReadFile(filepath.Join(cache, "hf", "o", "r", "main", "f.gguf")); err != nil || string(b) != string(data) {
		t.Errorf("cached %q %v", b, err)
	}
	got = nil
	if err := pull(context.Background(), "o/r/f.gguf", progress); err != nil || len(got) != 2 || got[1].Completed != int64(len(data)) {
		t.Errorf("from the cache: %v %+v", err, got)
	}
	got = nil
	if err := pull(context.Background(), "llama3.2", progress); session.AsError(err).Status != 400 || len(got) != 0 {
		t.Errorf("not a reference: %v %+v", err, got)
	}
	if err := pull(context.Background(), "o/r/missing.gguf", progress); session.AsError(err).Status != 404 {
		t.Errorf("missing: %v", err)
	}
	if pullFunc(false, zerolog.Nop()) != nil {
		t.Error("--pull=false pulls")
	}
}
