package hub

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// DefaultEndpoint is the Hub used when neither Client.BaseURL nor HF_ENDPOINT
// is set.
const DefaultEndpoint = "https://huggingface.co"

// Errors a failed Pull wraps, for errors.Is.
var (
	// ErrNotFound: the repository, revision or file does not exist (HTTP 404),
	// or no GGUF file carries the requested quantization tag.
	ErrNotFound = errors.New("not found on the Hugging Face Hub")
	// ErrAccess: the Hub refused the request (HTTP 401/403), usually a gated or
	// private repository without a valid HF_TOKEN.
	ErrAccess = errors.New("access denied by the Hugging Face Hub")
	// ErrNetwork: the Hub could not be reached or the transfer broke off. A
	// partial download is kept and resumed by the next Pull.
	ErrNetwork = errors.New("network failure")
	// ErrIntegrity: the file's size or sha256 is not what the reference or the
	// Hub promised. Nothing is left in the cache.
	ErrIntegrity = errors.New("download failed verification")
	// ErrOffline: the file is not in the cache and Client.Offline (or
	// HF_HUB_OFFLINE) forbids the download.
	ErrOffline = errors.New("offline")
)

// hint tells the user of ruvllm-serve how to get going without the download.
const hint = "to run without downloading, pass --model PATH to a local GGUF file, " +
	"or pick another file with --hf REPO/FILE"

// Defaults of the transport built when Client.HTTP is nil, and of the stall
// watchdog. A whole-request timeout would cut off a healthy multi-gigabyte
// download, so instead the transfer fails when no byte arrives for stallTimeout.
const (
	responseHeaderTimeout = time.Minute
	stallTimeout          = time.Minute
)

// Client downloads files from the Hub into a local cache. The zero value is
// ready to use: every empty field falls back to the environment or a default.
type Client struct {
	// BaseURL is the Hub endpoint; empty means $HF_ENDPOINT, else
	// DefaultEndpoint. A path prefix (a mirror or proxy) is kept.
	BaseURL string
	// CacheDir holds downloaded files; empty means DefaultCacheDir().
	CacheDir string
	// Token is sent as "Authorization: Bearer" to the Hub (never to the CDN it
	// redirects to); empty means $HF_TOKEN.
	Token string
	// HTTP does the requests; nil means a client with connect and
	// response-header timeouts but no overall deadline.
	HTTP *http.Client
	// Progress receives download progress; nil means os.Stderr. It is drawn as
	// a bar when it is a terminal, as periodic lines otherwise; io.Discard
	// silences it.
	Progress io.Writer
	// OnProgress, when set, is told of a download's progress as it goes:
	// when the transfer starts, after each piece written, and at its end.
	// A file found in the cache is not reported.
	OnProgress func(Progress)
	// Offline takes files from the cache only and never calls the Hub
	// (llama-server's --offline, huggingface_hub's HF_HUB_OFFLINE=1, which
	// also sets it), for a machine without network or a server that must
	// not download behind its operator's back.
	Offline bool

	// stall overrides stallTimeout (tests).
	stall time.Duration
}

// Progress is the state of a download, for Client.OnProgress.
type Progress struct {
	// File is the file's path in the repository; SHA256 the digest it
	// must have (lowercase hex), "" when neither the reference nor the
	// Hub gives one.
	File, SHA256 string
	// Total is the file's size, 0 when unknown; Completed the bytes in
	// the cache so far, those of an earlier interrupted download included.
	Total, Completed int64
}

// DefaultCacheDir is $RUVLLM_CACHE, else the "ruvllm" directory in the
// user's cache directory (os.UserCacheDir).
func DefaultCacheDir() (string, error) {
	if d := os.Getenv("RUVLLM_CACHE"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("hub: no cache directory (set RUVLLM_CACHE): %w", err)
	}
	return filepath.Join(d, "ruvllm"), nil
}

// Pull returns the local path of the file r names, downloading it first when
// the cache does not hold it. A cached file is returned without touching the
// network. A download goes to "<file>.part", resumes from there after an
// interruption, is checked against the size and sha256 known from r and from
// the Hub's headers, and is renamed into place only when it passes.
func (c *Client) Pull(ctx context.Context, r Ref) (string, error) {
	if err := r.Validate(); err != nil {
		return "", err
	}
	if r.File == "" {
		resolved, err := c.Resolve(ctx, r)
		if err != nil {
			return "", err
		}
		r = resolved
	}
	path, err := c.CachePath(r)
	if err != nil {
		return "", err
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() && (r.Size == 0 || fi.Size() == r.Size) {
		return path, nil
	}
	if c.offline() {
		return "", fmt.Errorf("%w: %s is not in the cache (%s) and downloads are off (--offline or HF_HUB_OFFLINE)", ErrOffline, r, path)
	}
	if err := c.download(ctx, r, path); err != nil {
		return "", c.explain(ctx, r, err)
	}
	return path, nil
}

// CachePath is where the file r names is (or will be) stored:
// <cache>/hf/<owner>/<name>/<revision>/<file>. r must name a file.
func (c *Client) CachePath(r Ref) (string, error) {
	if err := r.Validate(); err != nil {
		return "", err
	}
	if r.File == "" {
		return "", fmt.Errorf("hub: %s names no file; resolve it first", r)
	}
	dir, err := c.repoDir(r)
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, filepath.FromSlash(r.File))
	// Validate already forbids every way out; this is the last line.
	if rel, err := filepath.Rel(dir, p); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("hub: file %q leaves the cache directory", r.File)
	}
	return p, nil
}

// repoDir is the cache directory of r's repository at r's revision. The
// revision is escaped into one path element, so "refs/pr/1" cannot collide
// with a file path.
func (c *Client) repoDir(r Ref) (string, error) {
	root := c.CacheDir
	if root == "" {
		d, err := DefaultCacheDir()
		if err != nil {
			return "", err
		}
		root = d
	}
	owner, name, _ := strings.Cut(r.Repo, "/")
	return filepath.Join(root, "hf", owner, name, url.PathEscape(r.revision())), nil
}

// explain turns a download failure into the error Pull returns: a stop
// requested through ctx stays that, anything else says what failed and how to
// start without the download.
func (c *Client) explain(ctx context.Context, r Ref, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("hub: download of %s stopped: %w", r, ctx.Err())
	}
	return fmt.Errorf("hub: could not download model %s from %s: %w; %s", r, c.endpoint(), err, hint)
}

// endpoint is the Hub base URL without a trailing slash.
func (c *Client) endpoint() string {
	base := c.BaseURL
	if base == "" {
		base = os.Getenv("HF_ENDPOINT")
	}
	if base == "" {
		base = DefaultEndpoint
	}
	return strings.TrimRight(base, "/")
}

// endpointURL parses endpoint and insists on http or https.
func (c *Client) endpointURL() (*url.URL, error) {
	u, err := url.Parse(c.endpoint())
	if err != nil {
		return nil, fmt.Errorf("hub endpoint: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("hub endpoint %q: want an http or https URL", c.endpoint())
	}
	return u, nil
}

// offline says whether the Hub may not be called: Offline, or
// HF_HUB_OFFLINE set to a true value as huggingface_hub reads it.
func (c *Client) offline() bool {
	if c.Offline {
		return true
	}
	switch strings.ToLower(os.Getenv("HF_HUB_OFFLINE")) {
	case "1", "true", "yes", "on":
		return true
	}
	return false
}

func (c *Client) token() string {
	if c.Token != "" {
		return c.Token
	}
	return os.Getenv("HF_TOKEN")
}

func (c *Client) progressOut() io.Writer {
	if c.Progress != nil {
		return c.Progress
	}
	return os.Stderr
}

func (c *Client) stallTimeout() time.Duration {
	if c.stall > 0 {
		return c.stall
	}
	return stallTimeout
}

var defaultHTTP = func() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ResponseHeaderTimeout = responseHeaderTimeout
	return &http.Client{Transport: t}
}()

// hop is one response on the way to the final one: the host that answered and
// its headers. The Hub's own redirect carries the file's size and digest; the
// CDN behind it does not.
type hop struct {
	host   string
	header http.Header
}

// do sends req, following redirects, and returns the final response together
// with every response seen on the way. The token goes only to the Hub's host.
func (c *Client) do(req *http.Request, hub *url.URL) (*http.Response, []hop, error) {
	req.Header.Set("User-Agent", "ruvllm")
	if tok := c.token(); tok != "" && req.URL.Host == hub.Host {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	base := c.HTTP
	if base == nil {
		base = defaultHTTP
	}
	hc := *base
	var hops []hop
	hc.CheckRedirect = func(next *http.Request, via []*http.Request) error {
		if next.Response != nil {
			hops = append(hops, hop{host: via[len(via)-1].URL.Host, header: next.Response.Header})
		}
		if next.URL.Host != hub.Host {
			next.Header.Del("Authorization")
		}
		if base.CheckRedirect != nil {
			return base.CheckRedirect(next, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, nil, err
	}
	hops = append(hops, hop{host: resp.Request.URL.Host, header: resp.Header})
	return resp, hops, nil
}

// statusError describes a response that is not the file.
func statusError(resp *http.Response) error {
	msg := resp.Status
	// The Hub explains 4xx answers in these headers (e.g. "X-Error-Code:
	// GatedRepo"); pass them on, trimmed and printable.
	for _, h := range []string{"X-Error-Code", "X-Error-Message"} {
		if v := printable(resp.Header.Get(h), 200); v != "" {
			msg += ": " + v
		}
	}
	switch resp.StatusCode {
	case http.StatusNotFound:
		return fmt.Errorf("%w (%s): check the repository, revision and file name", ErrNotFound, msg)
	case http.StatusUnauthorized, http.StatusForbidden:
		return fmt.Errorf("%w (%s): the repository may be gated or private; accept its terms on the Hub and set HF_TOKEN", ErrAccess, msg)
	}
	return fmt.Errorf("%w: unexpected answer %s", ErrNetwork, msg)
}

// printable keeps at most n bytes of s and replaces control characters, so a
// hostile header cannot forge lines in a log.
func printable(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, strings.TrimSpace(s))
}
