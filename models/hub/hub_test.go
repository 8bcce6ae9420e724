package hub

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// testFile is the content every fake hub serves: 256 KiB of seeded noise.
var testFile = func() []byte {
	b := make([]byte, 256<<10)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}()

func digestOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// request is what a fake server saw.
type request struct {
	path, rangeHdr, auth string
}

// fileServer serves testFile the way the Hub and its CDN do: honouring
// "Range: bytes=N-" with 206, or 416 past the end. The knobs make it misbehave.
type fileServer struct {
	t       *testing.T
	srv     *httptest.Server
	content []byte
	// path is the only URL path (escaped) with content; others get 404.
	path string
	// header is added to every file response (X-Linked-*, ETag, …).
	header http.Header
	// ignoreRange answers every request with 200 and the whole file.
	ignoreRange bool
	// cutAt, when > 0, makes the next response stop after that many body bytes
	// by dropping the connection; it resets after one use.
	cutAt int
	// stallAt, when > 0, makes every response send that many bytes and then
	// hang until the client goes away.
	stallAt int
	// sent is signalled after a stalling response flushed its bytes.
	sent chan struct{}
	// status, when set, is returned instead of the file.
	status int

	mu   sync.Mutex
	reqs []request
}

func newFileServer(t *testing.T, path string) *fileServer {
	fs := &fileServer{t: t, content: testFile, path: path, header: http.Header{}, sent: make(chan struct{}, 1)}
	fs.srv = httptest.NewServer(http.HandlerFunc(fs.serve))
	t.Cleanup(fs.srv.Close)
	return fs
}

func (fs *fileServer) requests() []request {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return append([]request(nil), fs.reqs...)
}

func (fs *fileServer) serve(w http.ResponseWriter, r *http.Request) {
	fs.mu.Lock()
	fs.reqs = append(fs.reqs, request{path: r.URL.EscapedPath(), rangeHdr: r.Header.Get("Range"), auth: r.Header.Get("Authorization")})
	cut, stall, status := fs.cutAt, fs.stallAt, fs.status
	fs.cutAt = 0
	fs.mu.Unlock()

	if status != 0 {
		w.Header().Set("X-Error-Code", "GatedRepo")
		http.Error(w, "no", status)
		return
	}
	if r.URL.EscapedPath() != fs.path {
		w.Header().Set("X-Error-Code", "EntryNotFound")
		http.Error(w, "Entry not found", http.StatusNotFound)
		return
	}
	for k, v := range fs.header {
		w.Header()[k] = v
	}
	body := fs.content
	code := http.StatusOK
	if rng := r.Header.Get("Range"); rng != "" && !fs.ignoreRange {
		n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(rng, "bytes="), "-"))
		if err != nil {
			fs.t.Errorf("unexpected Range %q", rng)
			return
		}
		if n >= len(fs.content) {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", len(fs.content)))
			w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
			return
		}
		body, code = fs.content[n:], http.StatusPartialContent
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", n, len(fs.content)-1, len(fs.content)))
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(code)
	switch {
	case cut > 0:
		_, _ = w.Write(body[:cut])
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // drop the connection mid-body
	case stall > 0:
		_, _ = w.Write(body[:stall])
		w.(http.Flusher).Flush()
		fs.sent <- struct{}{}
		<-r.Context().Done()
		return
	}
	_, _ = w.Write(body)
}

// testRef names the served file.
var testRef = Ref{Repo: "owner/model-GGUF", File: "model-Q4_K_M.gguf"}

const testPath = "/owner/model-GGUF/resolve/main/model-Q4_K_M.gguf"

func newClient(t *testing.T, base string) (*Client, *bytes.Buffer) {
	var progress bytes.Buffer
	return &Client{BaseURL: base, CacheDir: t.TempDir(), Progress: &progress}, &progress
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func assertAbsent(t *testing.T, p string) {
	t.Helper()
	if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s exists (err %v), want it absent", p, err)
	}
}

func TestPullFresh(t *testing.T) {
	fs := newFileServer(t, testPath)
	c, progress := newClient(t, fs.srv.URL)
	ref := testRef
	ref.SHA256 = digestOf(testFile)
	ref.Size = int64(len(testFile))

	p, err := c.Pull(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(c.CacheDir, "hf", "owner", "model-GGUF", "main", "model-Q4_K_M.gguf")
	if p != want {
		t.Errorf("path %s, want %s", p, want)
	}
	if !bytes.Equal(readFile(t, p), testFile) {
		t.Error("downloaded content differs")
	}
	assertAbsent(t, p+partSuffix)
	if reqs := fs.requests(); len(reqs) != 1 || reqs[0].rangeHdr != "" {
		t.Errorf("requests %+v, want one without Range", reqs)
	}
	if out := progress.String(); !strings.Contains(out, "100.0%") || !strings.Contains(out, "256.0 KiB") {
		t.Errorf("progress output lacks the final state:\n%s", out)
	}
}

func TestPullCachedMakesNoRequest(t *testing.T) {
	fs := newFileServer(t, testPath)
	c, _ := newClient(t, fs.srv.URL)
	first, err := c.Pull(context.Background(), testRef)
	if err != nil {
		t.Fatal(err)
	}
	// Even with the server gone, the cached file is found.
	fs.srv.Close()
	second, err := c.Pull(context.Background(), testRef)
	if err != nil {
		t.Fatal(err)
	}
	if first != second {
		t.Errorf("second pull %s, first %s", second, first)
	}
	if n := len(fs.requests()); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

func TestPullCachedWrongSizeIsFetchedAgain(t *testing.T) {
	fs := newFileServer(t, testPath)
	c, _ := newClient(t, fs.srv.URL)
	ref := testRef
	ref.Size = int64(len(testFile))
	p, err := c.CachePath(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("truncated"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Pull(context.Background(), ref); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readFile(t, p), testFile) || len(fs.requests()) != 1 {
		t.Error("a cached file of the wrong size was not replaced")
	}
}

func TestPullResumesBrokenTransfer(t *testing.T) {
	fs := newFileServer(t, testPath)
	cut := len(testFile) / 2
	fs.cutAt = cut
	c, _ := newClient(t, fs.srv.URL)
	ref := testRef
	ref.SHA256 = digestOf(testFile)

	_, err := c.Pull(context.Background(), ref)
	if !errors.Is(err, ErrNetwork) {
		t.Fatalf("first pull: %v, want ErrNetwork", err)
	}
	p, _ := c.CachePath(ref)
	assertAbsent(t, p)
	fi, err := os.Stat(p + partSuffix)
	if err != nil {
		t.Fatalf("no partial file kept: %v", err)
	}
	if fi.Size() == 0 || fi.Size() > int64(cut) {
		t.Fatalf("partial file has %d bytes, want 1..%d", fi.Size(), cut)
	}

	got, err := c.Pull(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readFile(t, got), testFile) {
		t.Error("resumed content differs")
	}
	reqs := fs.requests()
	if len(reqs) != 2 {
		t.Fatalf("requests %+v, want 2", reqs)
	}
	if want := fmt.Sprintf("bytes=%d-", fi.Size()); reqs[1].rangeHdr != want {
		t.Errorf("second request Range %q, want %q", reqs[1].rangeHdr, want)
	}
	assertAbsent(t, got+partSuffix)
}

// writePart leaves a partial download of ref in c's cache.
func writePart(t *testing.T, c *Client, ref Ref, b []byte) string {
	t.Helper()
	p, err := c.CachePath(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p+partSuffix, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPullServerIgnoringRange(t *testing.T) {
	fs := newFileServer(t, testPath)
	fs.ignoreRange = true
	c, _ := newClient(t, fs.srv.URL)
	// A part that is not even a prefix: a server that ignores Range sends
	// the whole file, which must replace it.
	p := writePart(t, c, testRef, bytes.Repeat([]byte{0xAA}, 1000))

	if _, err := c.Pull(context.Background(), testRef); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readFile(t, p), testFile) {
		t.Error("content differs after a 200 answer to a Range request")
	}
	if reqs := fs.requests(); len(reqs) != 1 || reqs[0].rangeHdr != "bytes=1000-" {
		t.Errorf("requests %+v, want one with Range bytes=1000-", reqs)
	}
}

func TestPullStalePartRestarts(t *testing.T) {
	fs := newFileServer(t, testPath)
	c, _ := newClient(t, fs.srv.URL)
	ref := testRef
	ref.SHA256 = digestOf(testFile)
	// The kept bytes belong to some other file: the resumed result fails the
	// digest, and Pull starts over once.
	p := writePart(t, c, ref, bytes.Repeat([]byte{0x55}, 4096))

	if _, err := c.Pull(context.Background(), ref); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readFile(t, p), testFile) {
		t.Error("content differs after restart")
	}
	reqs := fs.requests()
	if len(reqs) != 2 || reqs[0].rangeHdr != "bytes=4096-" || reqs[1].rangeHdr != "" {
		t.Errorf("requests %+v, want a resume then a fresh download", reqs)
	}
}

func TestPullCompletePartIsFinished(t *testing.T) {
	fs := newFileServer(t, testPath)
	c, _ := newClient(t, fs.srv.URL)
	ref := testRef
	ref.SHA256 = digestOf(testFile)
	// Download done, rename not: the server answers 416 to the Range.
	p := writePart(t, c, ref, testFile)

	if _, err := c.Pull(context.Background(), ref); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readFile(t, p), testFile) {
		t.Error("content differs")
	}
	if reqs := fs.requests(); len(reqs) != 1 {
		t.Errorf("requests %+v, want 1", reqs)
	}
}

func TestPullVerificationFailures(t *testing.T) {
	wrong := strings.Repeat("ab", 32)
	tests := []struct {
		name   string
		ref    func(Ref) Ref
		header http.Header
	}{
		{"ref sha256", func(r Ref) Ref { r.SHA256 = wrong; return r }, nil},
		{"hub etag", func(r Ref) Ref { return r }, http.Header{"X-Linked-Etag": {`"` + wrong + `"`}}},
		{"ref and hub disagree", func(r Ref) Ref { r.SHA256 = digestOf(testFile); return r },
			http.Header{"X-Linked-Etag": {`"` + wrong + `"`}}},
		{"ref size", func(r Ref) Ref { r.Size = int64(len(testFile)) + 1; return r }, nil},
		{"hub size", func(r Ref) Ref { r.Size = int64(len(testFile)); return r },
			http.Header{"X-Linked-Size": {strconv.Itoa(len(testFile) - 1)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := newFileServer(t, testPath)
			fs.header = tt.header
			c, _ := newClient(t, fs.srv.URL)
			ref := tt.ref(testRef)
			_, err := c.Pull(context.Background(), ref)
			if !errors.Is(err, ErrIntegrity) {
				t.Fatalf("err %v, want ErrIntegrity", err)
			}
			p, _ := c.CachePath(ref)
			assertAbsent(t, p)
			assertAbsent(t, p+partSuffix)
		})
	}
}

func TestPullHubETagVerifies(t *testing.T) {
	// A 64-hex ETag from the Hub itself is the file's sha256; a 40-hex one
	// (a Git blob id for small files) is not and is ignored.
	for _, etag := range []string{`"` + digestOf(testFile) + `"`, `W/"` + digestOf(testFile) + `"`, `"0123456789abcdef0123456789abcdef01234567"`} {
		fs := newFileServer(t, testPath)
		fs.header = http.Header{"Etag": {etag}}
		c, _ := newClient(t, fs.srv.URL)
		if _, err := c.Pull(context.Background(), testRef); err != nil {
			t.Errorf("ETag %s: %v", etag, err)
		}
	}
	fs := newFileServer(t, testPath)
	fs.header = http.Header{"Etag": {`"` + strings.Repeat("0", 64) + `"`}}
	c, _ := newClient(t, fs.srv.URL)
	if _, err := c.Pull(context.Background(), testRef); !errors.Is(err, ErrIntegrity) {
		t.Errorf("wrong sha256 ETag: %v, want ErrIntegrity", err)
	}
}

func TestPullHTTPErrors(t *testing.T) {
	tests := []struct {
		name   string
		status int
		ref    Ref
		want   error
		say    string
	}{
		{"missing file", 0, Ref{Repo: "owner/model-GGUF", File: "nope.gguf"}, ErrNotFound, "EntryNotFound"},
		{"unauthorized", http.StatusUnauthorized, testRef, ErrAccess, "HF_TOKEN"},
		{"forbidden", http.StatusForbidden, testRef, ErrAccess, "GatedRepo"},
		{"server error", http.StatusInternalServerError, testRef, ErrNetwork, "500"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := newFileServer(t, testPath)
			fs.status = tt.status
			c, _ := newClient(t, fs.srv.URL)
			_, err := c.Pull(context.Background(), tt.ref)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err %v, want %v", err, tt.want)
			}
			for _, s := range []string{tt.say, "--model", tt.ref.File} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
			p, _ := c.CachePath(tt.ref)
			assertAbsent(t, p)
		})
	}
}

// closedURL is an address nothing listens on.
func closedURL(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

func TestPullOffline(t *testing.T) {
	c, _ := newClient(t, closedURL(t))
	_, err := c.Pull(context.Background(), DefaultModel)
	if !errors.Is(err, ErrNetwork) {
		t.Fatalf("err %v, want ErrNetwork", err)
	}
	for _, s := range []string{"could not download", DefaultModel.File, "--model PATH", "--hf"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
}

func TestPullFollowsRedirectAndKeepsTokenAtHub(t *testing.T) {
	cdn := newFileServer(t, "/blob/abc")
	var hubAuth string
	hub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hubAuth = r.Header.Get("Authorization")
		if r.URL.Path != testPath {
			http.NotFound(w, r)
			return
		}
		// What the Hub sends for an LFS file: size and digest, and the way to
		// its CDN.
		w.Header().Set("X-Linked-Size", strconv.Itoa(len(testFile)))
		w.Header().Set("X-Linked-Etag", `"`+digestOf(testFile)+`"`)
		w.Header().Set("ETag", `"`+digestOf(testFile)+`"`)
		http.Redirect(w, r, cdn.srv.URL+"/blob/abc", http.StatusFound)
	}))
	t.Cleanup(hub.Close)
	// The CDN's own ETag means something else and must not be taken as the
	// digest.
	cdn.header = http.Header{"Etag": {`"` + strings.Repeat("f", 64) + `"`}}

	c, _ := newClient(t, hub.URL)
	c.Token = "secret"
	p, err := c.Pull(context.Background(), testRef)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readFile(t, p), testFile) {
		t.Error("content differs")
	}
	if hubAuth != "Bearer secret" {
		t.Errorf("hub saw Authorization %q", hubAuth)
	}
	if reqs := cdn.requests(); len(reqs) != 1 || reqs[0].auth != "" {
		t.Errorf("CDN requests %+v, want one without Authorization", reqs)
	}
}

func TestPullRedirectResumes(t *testing.T) {
	cdn := newFileServer(t, "/blob/abc")
	cdn.cutAt = 1000
	hub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Linked-Etag", `"`+digestOf(testFile)+`"`)
		http.Redirect(w, r, cdn.srv.URL+"/blob/abc", http.StatusFound)
	}))
	t.Cleanup(hub.Close)
	c, _ := newClient(t, hub.URL)
	if _, err := c.Pull(context.Background(), testRef); !errors.Is(err, ErrNetwork) {
		t.Fatalf("first pull: %v, want ErrNetwork", err)
	}
	p, err := c.Pull(context.Background(), testRef)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readFile(t, p), testFile) {
		t.Error("content differs")
	}
	if reqs := cdn.requests(); len(reqs) != 2 || !strings.HasPrefix(reqs[1].rangeHdr, "bytes=") {
		t.Errorf("CDN requests %+v, want the Range carried over the redirect", reqs)
	}
}

func TestPullCancel(t *testing.T) {
	fs := newFileServer(t, testPath)
	fs.stallAt = 1000
	c, _ := newClient(t, fs.srv.URL)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Cancel once the transfer has begun: the progress reporter's first line
	// comes after the part file is open.
	var once sync.Once
	c.Progress = writerFunc(func(b []byte) (int, error) {
		once.Do(func() { <-fs.sent; cancel() })
		return len(b), nil
	})
	_, err := c.Pull(ctx, testRef)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if strings.Contains(err.Error(), "--model") {
		t.Errorf("a cancelled pull should not suggest --model: %v", err)
	}
	p, _ := c.CachePath(testRef)
	assertAbsent(t, p)
	if _, err := os.Stat(p + partSuffix); err != nil {
		t.Errorf("partial download not kept for resuming: %v", err)
	}
}

func TestPullStalledTransfer(t *testing.T) {
	fs := newFileServer(t, testPath)
	fs.stallAt = 1000
	c, _ := newClient(t, fs.srv.URL)
	c.stall = 200 * time.Millisecond
	_, err := c.Pull(context.Background(), testRef)
	if !errors.Is(err, ErrNetwork) || !errors.Is(err, errStalled) {
		t.Fatalf("err %v, want a stalled-transfer ErrNetwork", err)
	}
}

func TestPullFromEnvironment(t *testing.T) {
	fs := newFileServer(t, testPath)
	cache := t.TempDir()
	t.Setenv("HF_ENDPOINT", fs.srv.URL+"/")
	t.Setenv("RUVLLM_CACHE", cache)
	t.Setenv("HF_TOKEN", "tok")
	c := &Client{Progress: io.Discard}
	p, err := c.Pull(context.Background(), testRef)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p, cache+string(filepath.Separator)) {
		t.Errorf("path %s not under RUVLLM_CACHE %s", p, cache)
	}
	if reqs := fs.requests(); len(reqs) != 1 || reqs[0].auth != "Bearer tok" || reqs[0].path != testPath {
		t.Errorf("requests %+v, want one to %s with the token", reqs, testPath)
	}
}

func TestPullRevisionIsEscaped(t *testing.T) {
	fs := newFileServer(t, "/owner/model-GGUF/resolve/refs%2Fpr%2F1/sub%20dir/model.gguf")
	c, _ := newClient(t, fs.srv.URL)
	ref := Ref{Repo: "owner/model-GGUF", File: "sub dir/model.gguf", Revision: "refs/pr/1"}
	p, err := c.Pull(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(c.CacheDir, "hf", "owner", "model-GGUF", "refs%2Fpr%2F1", "sub dir", "model.gguf")
	if p != want {
		t.Errorf("path %s, want %s", p, want)
	}
}

func TestPullHostileRefsRejected(t *testing.T) {
	c, _ := newClient(t, closedURL(t))
	for _, r := range []Ref{
		{Repo: "owner/model", File: "../../etc/passwd"},
		{Repo: "owner/model", File: "/etc/passwd"},
		{Repo: "owner/model", File: "a/../../b.gguf"},
		{Repo: "../model", File: "x.gguf"},
		{Repo: "owner/..", File: "x.gguf"},
		{Repo: "owner/model/extra", File: "x.gguf"},
		{Repo: "owner/model", File: "x.gguf", Revision: "../../.."},
		{Repo: "owner/model", File: "x.gguf", SHA256: "zz"},
		{Repo: "owner/model", File: "x.gguf", Size: -1},
	} {
		if _, err := c.Pull(context.Background(), r); err == nil {
			t.Errorf("Pull(%+v) succeeded", r)
		} else if errors.Is(err, ErrNetwork) {
			t.Errorf("Pull(%+v) reached the network: %v", r, err)
		}
		if _, err := c.CachePath(r); err == nil {
			t.Errorf("CachePath(%+v) succeeded", r)
		}
	}
	// Nothing at all was written.
	entries, err := os.ReadDir(c.CacheDir)
	if err != nil || len(entries) != 0 {
		t.Errorf("cache dir has %d entries (err %v)", len(entries), err)
	}
}

func TestDefaultModel(t *testing.T) {
	if err := DefaultModel.Validate(); err != nil {
		t.Fatal(err)
	}
	if DefaultModel.Size <= 0 || DefaultModel.SHA256 == "" {
		t.Error("default model lacks its published size and digest")
	}
	want := "https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct-GGUF/resolve/9217f5db79a29953eb74d5343926648285ec7e67/qwen2.5-0.5b-instruct-q4_k_m.gguf"
	if got := DefaultModel.resolveURL(DefaultEndpoint); got != want {
		t.Errorf("URL %s, want %s", got, want)
	}
	back, err := ParseRef(DefaultModel.String())
	if err != nil {
		t.Fatal(err)
	}
	if back.Repo != DefaultModel.Repo || back.File != DefaultModel.File || back.Revision != DefaultModel.Revision {
		t.Errorf("ParseRef(String()) = %+v", back)
	}
}

func TestDefaultCacheDir(t *testing.T) {
	t.Setenv("RUVLLM_CACHE", "")
	d, err := DefaultCacheDir()
	if err != nil {
		t.Skipf("no user cache dir here: %v", err)
	}
	if filepath.Base(d) != "ruvllm" {
		t.Errorf("default cache %s does not end in ruvllm", d)
	}
	t.Setenv("RUVLLM_CACHE", "/somewhere/else")
	if d, _ := DefaultCacheDir(); d != "/somewhere/else" {
		t.Errorf("RUVLLM_CACHE ignored: %s", d)
	}
}

func TestParseContentRange(t *testing.T) {
	tests := []struct {
		in           string
		start, total int64
		ok           bool
	}{
		{"bytes 100-199/200", 100, 200, true},
		{"bytes 0-0/1", 0, 1, true},
		{"bytes 5-9/*", 5, -1, true},
		{"bytes */300", -1, 300, true},
		{"bytes 100-199/150", 0, 0, false},
		{"bytes 9-5/20", 0, 0, false},
		{"bytes -1-5/20", 0, 0, false},
		{"bytes 1-5", 0, 0, false},
		{"items 1-5/9", 0, 0, false},
		{"bytes 1-x/9", 0, 0, false},
		{"", 0, 0, false},
	}
	for _, tt := range tests {
		start, total, ok := parseContentRange(tt.in)
		if ok != tt.ok || (ok && (start != tt.start || total != tt.total)) {
			t.Errorf("parseContentRange(%q) = %d, %d, %v; want %d, %d, %v", tt.in, start, total, ok, tt.start, tt.total, tt.ok)
		}
	}
}

func TestPullMisplacedRangeRestarts(t *testing.T) {
	// A server that answers a Range with bytes from elsewhere: the part is
	// dropped and the file fetched whole.
	var calls []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls = append(calls, r.Header.Get("Range"))
		if r.Header.Get("Range") != "" {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes 0-%d/%d", len(testFile)-1, len(testFile)))
			w.WriteHeader(http.StatusPartialContent)
			_, _ = w.Write(testFile)
			return
		}
		_, _ = w.Write(testFile)
	}))
	t.Cleanup(srv.Close)
	c, _ := newClient(t, srv.URL)
	p := writePart(t, c, testRef, testFile[:500])
	if _, err := c.Pull(context.Background(), testRef); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readFile(t, p), testFile) {
		t.Error("content differs")
	}
	if len(calls) != 2 || calls[0] != "bytes=500-" || calls[1] != "" {
		t.Errorf("requests with Range %q, want a resume then a fresh download", calls)
	}
}

func TestBadEndpoint(t *testing.T) {
	for _, base := range []string{"ftp://example.com", "not a url", "http://"} {
		c := &Client{BaseURL: base, CacheDir: t.TempDir(), Progress: io.Discard}
		if _, err := c.Pull(context.Background(), testRef); err == nil || errors.Is(err, ErrNetwork) {
			t.Errorf("BaseURL %q: %v, want an endpoint error", base, err)
		}
	}
}

func TestOfflineUsesOnlyTheCache(t *testing.T) {
	fs := newFileServer(t, testPath)
	online, _ := newClient(t, fs.srv.URL)
	want, err := online.Pull(context.Background(), testRef)
	if err != nil {
		t.Fatal(err)
	}
	before := len(fs.requests())
	tagged := Ref{Repo: testRef.Repo, Quant: "Q4_K_M"}
	other := Ref{Repo: "owner/other-GGUF", File: "other.gguf"}
	for _, env := range []string{"", "1"} {
		cases := []struct {
			name string
			ref  Ref
			ok   bool
		}{
			{"cached file", testRef, true},
			{"cached quantization", tagged, true},
			{"file not cached", other, false},
			{"repository not cached", Ref{Repo: "owner/other-GGUF"}, false},
		}
		for _, tc := range cases {
			t.Run(tc.name+"/HF_HUB_OFFLINE="+env, func(t *testing.T) {
				c := &Client{BaseURL: fs.srv.URL, CacheDir: online.CacheDir, Progress: io.Discard, Offline: env == ""}
				t.Setenv("HF_HUB_OFFLINE", env)
				got, err := c.Pull(context.Background(), tc.ref)
				switch {
				case tc.ok && (err != nil || got != want):
					t.Fatalf("Pull = %q, %v; want %q", got, err, want)
				case !tc.ok && !errors.Is(err, ErrOffline):
					t.Fatalf("Pull = %q, %v; want ErrOffline", got, err)
				}
				if n := len(fs.requests()); n != before {
					t.Fatalf("offline Pull made %d requests to the Hub", n-before)
				}
			})
		}
	}
}
