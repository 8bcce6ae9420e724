package hub

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// newCache makes a cache holding files (paths under its hf directory, each
// with its own path as content) and returns a client on it.
func newCache(t *testing.T, files ...string) *Client {
	t.Helper()
	c := &Client{CacheDir: t.TempDir()}
	for _, f := range files {
		p := filepath.Join(c.CacheDir, "hf", filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

var cacheFiles = []string{
	"o/r/main/a-Q4_K_M.gguf",
	"o/r/main/a-Q8_0.gguf",
	"o/r/v1/a-Q4_K_M.gguf",
	"o/s/main/sub/x.gguf.part",
	"stray.txt",
	"o/stray.gguf",
}

func refs(files []CachedFile) string {
	var s []string
	for _, f := range files {
		r := f.Ref.String()
		if f.Partial {
			r += " (partial)"
		}
		s = append(s, r)
	}
	return strings.Join(s, ", ")
}

func TestCached(t *testing.T) {
	c := newCache(t, cacheFiles...)
	files, err := c.Cached()
	if err != nil {
		t.Fatal(err)
	}
	want := "o/r/a-Q4_K_M.gguf, o/r/a-Q8_0.gguf, o/r@v1/a-Q4_K_M.gguf, o/s/sub/x.gguf (partial)"
	if got := refs(files); got != want {
		t.Errorf("Cached = %s, want %s", got, want)
	}
	for _, f := range files {
		if f.Size != int64(len(strings.TrimPrefix(filepath.ToSlash(f.Path), filepath.ToSlash(filepath.Join(c.CacheDir, "hf"))+"/"))) || f.Modified.IsZero() {
			t.Errorf("%s: size %d, modified %v", f.Path, f.Size, f.Modified)
		}
	}
	empty := &Client{CacheDir: filepath.Join(t.TempDir(), "none")}
	if files, err := empty.Cached(); err != nil || len(files) != 0 {
		t.Errorf("a cache not made yet: %v, %v", files, err)
	}
}

func TestFindCached(t *testing.T) {
	c := newCache(t, cacheFiles...)
	hf := filepath.Join(c.CacheDir, "hf")
	outside := filepath.Join(t.TempDir(), "mine.gguf")
	if err := os.WriteFile(outside, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, want, err string
	}{
		{"o/r/a-Q4_K_M.gguf", "o/r/a-Q4_K_M.gguf, o/r@v1/a-Q4_K_M.gguf", ""},
		{"o/r@v1/a-Q4_K_M.gguf", "o/r@v1/a-Q4_K_M.gguf", ""},
		{"o/r@main/a-Q4_K_M.gguf", "o/r/a-Q4_K_M.gguf", ""},
		{"o/r:q8_0", "o/r/a-Q8_0.gguf", ""},
		{"hf.co/o/r:Q4_K_M", "o/r/a-Q4_K_M.gguf, o/r@v1/a-Q4_K_M.gguf", ""},
		{"o/r", "o/r/a-Q4_K_M.gguf, o/r/a-Q8_0.gguf, o/r@v1/a-Q4_K_M.gguf", ""},
		{"o/s/sub/x.gguf", "o/s/sub/x.gguf (partial)", ""},
		{"o/r:Q2_K", "", ""},
		{filepath.Join(hf, "o", "r", "main", "a-Q8_0.gguf"), "o/r/a-Q8_0.gguf", ""},
		{outside, "", "not in the cache"},
		{filepath.Join(hf, "stray.txt"), "", "not a model file"},
		{"/no/such/file.gguf", "", "neither a file nor a model reference"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := c.FindCached(tt.name)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("FindCached = %s, %v; want an error saying %q", refs(got), err, tt.err)
				}
				return
			}
			if err != nil || refs(got) != tt.want {
				t.Errorf("FindCached = %s, %v; want %s", refs(got), err, tt.want)
			}
		})
	}
}

func TestRemove(t *testing.T) {
	c := newCache(t, append(cacheFiles, "o/r/main/a-Q8_0.gguf.part")...)
	hf := filepath.Join(c.CacheDir, "hf")
	// The file and its partial download (of a new download after a
	// wrong size) are both found, and go.
	found, err := c.FindCached("o/r:Q8_0")
	if err != nil || refs(found) != "o/r/a-Q8_0.gguf, o/r/a-Q8_0.gguf (partial)" {
		t.Fatalf("%s, %v", refs(found), err)
	}
	for _, f := range found {
		if err := c.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	assertAbsent(t, filepath.Join(hf, "o", "r", "main", "a-Q8_0.gguf"))
	assertAbsent(t, filepath.Join(hf, "o", "r", "main", "a-Q8_0.gguf.part"))
	// The last file of a repository takes its empty directories along,
	// not the cache's own.
	found, _ = c.FindCached("o/s/sub/x.gguf")
	if err := c.Remove(found[0]); err != nil {
		t.Fatal(err)
	}
	assertAbsent(t, filepath.Join(hf, "o", "s"))
	if _, err := os.Stat(filepath.Join(hf, "o", "r", "main", "a-Q4_K_M.gguf")); err != nil {
		t.Errorf("another file went too: %v", err)
	}
	files, _ := c.Cached()
	if got, want := refs(files), "o/r/a-Q4_K_M.gguf, o/r@v1/a-Q4_K_M.gguf"; got != want {
		t.Errorf("left %s, want %s", got, want)
	}
	// A path outside the cache, or one leading out of it, is refused.
	outside := filepath.Join(t.TempDir(), "mine.gguf")
	if err := os.WriteFile(outside, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(hf, "o", "r", "main", "link.gguf")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{outside, link, filepath.Join(hf, "o", "r", "main", "..", "..", "..", "..", "x")} {
		if err := c.Remove(CachedFile{Path: p}); err == nil {
			t.Errorf("Remove(%s) = nil, want a refusal", p)
		}
	}
	if _, err := os.Stat(outside); err != nil {
		t.Errorf("the file outside the cache is gone: %v", err)
	}
}
