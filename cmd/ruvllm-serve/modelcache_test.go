package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/ruvllm/ruvllm/internal/serving"
)

// testHub serves files as the Hugging Face Hub serves repository
// owner/repo (its file listing and its files), points HF_ENDPOINT at it
// and RUVLLM_CACHE at an empty directory, which it returns.
func testHub(t *testing.T, files map[string][]byte) string {
	t.Helper()
	type lfs struct {
		OID  string `json:"oid"`
		Size int64  `json:"size"`
	}
	type entry struct {
		Type string `json:"type"`
		Path string `json:"path"`
		Size int64  `json:"size"`
		LFS  *lfs   `json:"lfs,omitempty"`
	}
	var listing []entry
	for name, b := range files {
		sum := sha256.Sum256(b)
		listing = append(listing, entry{Type: "file", Path: name, Size: int64(len(b)), LFS: &lfs{OID: hex.EncodeToString(sum[:]), Size: int64(len(b))}})
	}
	sort.Slice(listing, func(i, j int) bool { return listing[i].Path < listing[j].Path })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/models/owner/repo/tree/main" {
			_ = json.NewEncoder(w).Encode(listing)
			return
		}
		if name, ok := strings.CutPrefix(r.URL.Path, "/owner/repo/resolve/main/"); ok {
			if b, ok := files[name]; ok {
				_, _ = w.Write(b)
				return
			}
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	cache := t.TempDir()
	t.Setenv("HF_ENDPOINT", srv.URL)
	t.Setenv("RUVLLM_CACHE", cache)
	return cache
}

// TestPullLsRm pulls by the names users type, lists the cache and
// deletes from it.
func TestPullLsRm(t *testing.T) {
	files := map[string][]byte{"m-Q4_K_M.gguf": []byte("four"), "m-Q8_0.gguf": []byte("eight bits"), "README.md": []byte("#")}
	cache := testHub(t, files)
	dir := filepath.Join(cache, "hf", "owner", "repo", "main")
	pulls := []struct {
		args []string
		file string // "" for an error
		say  string
	}{
		{[]string{"owner/repo:Q8_0"}, "m-Q8_0.gguf", ""},
		{[]string{"hf.co/owner/repo"}, "m-Q4_K_M.gguf", ""},
		{[]string{"owner/repo/m-Q8_0.gguf"}, "m-Q8_0.gguf", ""},
		{[]string{"--hf", "owner/repo:q4_k_m"}, "m-Q4_K_M.gguf", ""},
		{[]string{"https://huggingface.co/owner/repo/blob/main/m-Q8_0.gguf"}, "m-Q8_0.gguf", ""},
		{[]string{"owner/repo:Q2_K"}, "", "m-Q4_K_M.gguf, m-Q8_0.gguf"},
		{[]string{"owner/other"}, "", "not found"},
		{[]string{"llama3.2"}, "", "not from ollama's library"},
	}
	for _, tt := range pulls {
		t.Run("pull "+strings.Join(tt.args, " "), func(t *testing.T) {
			out, stderr, code := run(t, append([]string{"pull"}, tt.args...)...)
			if tt.file == "" {
				if code == 0 || !strings.Contains(stderr, tt.say) {
					t.Fatalf("exit %d, stderr %q; want an error saying %q", code, stderr, tt.say)
				}
				return
			}
			want := filepath.Join(dir, tt.file)
			if code != 0 || out != want+"\n" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want %s", code, out, stderr, want)
			}
			if b, err := os.ReadFile(want); err != nil || string(b) != string(files[tt.file]) {
				t.Errorf("cached %q, %v", b, err)
			}
		})
	}
	outside := filepath.Join(t.TempDir(), "mine.gguf")
	if err := os.WriteFile(outside, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		args []string
		code int
		out  []string // lines stdout must hold
		err  string
	}{
		{[]string{"ls"}, 0, []string{"NAME", "owner/repo/m-Q4_K_M.gguf   4 B ", "owner/repo/m-Q8_0.gguf     10 B "}, ""},
		{[]string{"rm", "owner/repo"}, 1, nil, "owner/repo matches 2 cached files"},
		{[]string{"rm", outside}, 1, nil, "not in the cache"},
		{[]string{"rm", "owner/repo:Q2_K"}, 1, nil, "no such model in the cache"},
		{[]string{"rm"}, 2, nil, "name the model"},
		{[]string{"rm", "owner/repo:Q8_0"}, 0, []string{"deleted owner/repo/m-Q8_0.gguf"}, ""},
		{[]string{"ls", "--paths"}, 0, []string{filepath.Join(dir, "m-Q4_K_M.gguf")}, ""},
		{[]string{"rm", filepath.Join(dir, "m-Q4_K_M.gguf")}, 0, []string{"deleted owner/repo/m-Q4_K_M.gguf"}, ""},
		{[]string{"ls"}, 0, nil, "holds no model"},
	}
	for _, tt := range steps {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			out, stderr, code := run(t, tt.args...)
			if code != tt.code || !strings.Contains(stderr, tt.err) {
				t.Fatalf("exit %d, stderr %q; want exit %d saying %q", code, stderr, tt.code, tt.err)
			}
			for _, s := range tt.out {
				if !strings.Contains(out, s) {
					t.Errorf("stdout lacks %q:\n%s", s, out)
				}
			}
		})
	}
	if _, err := os.Stat(outside); err != nil {
		t.Errorf("rm touched a file outside the cache: %v", err)
	}
	if _, err := os.Stat(filepath.Join(cache, "hf", "owner")); !os.IsNotExist(err) {
		t.Errorf("the emptied repository's directories stay: %v", err)
	}
}

// TestHubName tells Hugging Face names from paths in --model and run's
// MODEL.
func TestHubName(t *testing.T) {
	t.Chdir(t.TempDir())
	if err := os.MkdirAll("dir", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("dir", "x.gguf"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		in   string
		want string // the reference, "" for a path
	}{
		{"owner/repo", "owner/repo"},
		{"owner/repo:Q4_K_M", "owner/repo:Q4_K_M"},
		{"owner/repo/sub/f.gguf", "owner/repo/sub/f.gguf"},
		{"hf.co/owner/repo:latest", "owner/repo"},
		{"https://huggingface.co/o/r/blob/main/f.gguf", "o/r/f.gguf"},
		{"dir/x.gguf", ""},         // a file
		{"dir/missing.gguf", ""},   // under a directory that is here
		{"dir/a/missing.gguf", ""}, // the same, deeper
		{"nodir/x.gguf", ""},       // owner/repo ending in .gguf: a mistyped path
		{"owner/repo/README.md", ""},
		{"./owner/repo", ""},
		{"/owner/repo", ""},
		{"~/owner/repo", ""},
		{"model.gguf", ""},
		{`owner\repo`, ""},
		{"", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			ref, ok := serving.HubName(tt.in)
			if got := map[bool]string{true: ref.String()}[ok]; got != tt.want {
				t.Errorf("serving.HubName(%q) = %q, %v; want %q", tt.in, ref, ok, tt.want)
			}
		})
	}
}
