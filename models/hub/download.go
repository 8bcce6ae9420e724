package hub

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// partSuffix marks an unfinished download beside its final name.
const partSuffix = ".part"

// copyBuffer is the size of one read from the network into the file.
const copyBuffer = 1 << 20

// errRestart marks a failure of a resumed download that a fresh download may
// not have: the bytes kept from before do not fit what the server sends now.
var errRestart = errors.New("the partial download does not fit the file on the server")

// errStalled is the cause the watchdog cancels a transfer with.
var errStalled = errors.New("no data received")

// download fetches r into path by way of path+".part". A resumed transfer that
// fails verification is retried once from the start, since the kept bytes may
// belong to an older version of the file.
func (c *Client) download(ctx context.Context, r Ref, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	part := dst + partSuffix
	for attempt := 0; ; attempt++ {
		err := c.fetch(ctx, r, part)
		if err == nil {
			break
		}
		if attempt == 0 && errors.Is(err, errRestart) && ctx.Err() == nil {
			if rmErr := os.Remove(part); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
				return rmErr
			}
			continue
		}
		return err
	}
	if err := os.Rename(part, dst); err != nil {
		return err
	}
	syncDir(filepath.Dir(dst))
	return nil
}

// remote is what the responses say about the file.
type remote struct {
	linkedSize int64  // X-Linked-Size: the file's size, 0 when absent
	sha256     string // the file's digest from X-Linked-Etag or the Hub's ETag
	total      int64  // full size implied by this response, -1 when unknown
}

// fetch makes one attempt: it continues part from its current length when
// the server honours a Range request, or rewrites it from the start, then
// checks size and digest. A broken transfer keeps part for the next attempt;
// a file that fails verification is removed.
func (c *Client) fetch(ctx context.Context, r Ref, part string) (err error) {
	hub, err := c.endpointURL()
	if err != nil {
		return err
	}
	var offset int64
	if fi, err := os.Stat(part); err == nil && fi.Mode().IsRegular() {
		offset = fi.Size()
	}
	if r.Size > 0 && offset > r.Size {
		offset = 0 // longer than the file can be: not a prefix of it
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.resolveURL(c.endpoint()), nil)
	if err != nil {
		return err
	}
	if offset > 0 {
		req.Header.Set("Range", "bytes="+strconv.FormatInt(offset, 10)+"-")
	}
	resp, hops, err := c.do(req, hub)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNetwork, err)
	}
	defer resp.Body.Close()

	meta := readRemote(hops, hub.Host)
	resumed := offset > 0
	complete := false // the part already holds every byte (416 on a resume)
	switch resp.StatusCode {
	case http.StatusPartialContent:
		start, total, ok := parseContentRange(resp.Header.Get("Content-Range"))
		if !ok || start != offset {
			return fmt.Errorf("%w: %w: asked for bytes from %d, got %q", ErrNetwork, errRestart, offset, resp.Header.Get("Content-Range"))
		}
		meta.total = total
	case http.StatusOK:
		// No Range sent, or the server ignored it: the body is the whole file.
		offset, resumed = 0, false
		meta.total = resp.ContentLength
	case http.StatusRequestedRangeNotSatisfiable:
		// The part may already be complete (the rename was interrupted);
		// "Content-Range: bytes */N" gives N.
		_, total, ok := parseContentRange(resp.Header.Get("Content-Range"))
		if !resumed || !ok || total != offset {
			return fmt.Errorf("%w: %w: server refused range from byte %d", ErrNetwork, errRestart, offset)
		}
		meta.total, complete = total, true
	default:
		return statusError(resp)
	}

	size, digest, err := expect(r, meta)
	if err != nil {
		return err
	}
	if size > 0 && offset > size {
		return fmt.Errorf("%w: %w: partial file longer than the %d-byte file", ErrIntegrity, errRestart, size)
	}
	// Opened only now, so that a refused request leaves no empty part behind.
	f, err := os.OpenFile(part, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	// discard closes before removing: Windows cannot remove an open file.
	discard := func() {
		_ = f.Close()
		_ = os.Remove(part)
	}
	if err := f.Truncate(offset); err != nil {
		return err
	}
	h := sha256.New()
	if offset > 0 {
		if _, err := io.Copy(h, io.NewSectionReader(f, 0, offset)); err != nil {
			return err
		}
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return err
	}

	got := offset
	if !complete {
		progress := NewProgressWriter(c.progressOut(), path.Base(r.File), size, offset)
		stall := c.stallTimeout()
		watchdog := time.AfterFunc(stall, func() { cancel(errStalled) })
		kick := writerFunc(func(b []byte) (int, error) { watchdog.Reset(stall); return len(b), nil })
		report := writerFunc(func(b []byte) (int, error) { return len(b), nil })
		if c.OnProgress != nil {
			p := Progress{File: r.File, SHA256: digest, Total: max(size, 0), Completed: offset}
			c.OnProgress(p)
			report = func(b []byte) (int, error) {
				p.Completed += int64(len(b))
				c.OnProgress(p)
				return len(b), nil
			}
		}
		n, cerr := io.CopyBuffer(io.MultiWriter(f, h, progress, kick, report), resp.Body, make([]byte, copyBuffer))
		watchdog.Stop()
		progress.Finish()
		got += n
		if cerr != nil {
			if errors.Is(context.Cause(ctx), errStalled) {
				return fmt.Errorf("%w: %w for %s after %d of %s bytes", ErrNetwork, errStalled, stall, got, sizeText(size))
			}
			return fmt.Errorf("%w: transfer broke off after %d of %s bytes: %w", ErrNetwork, got, sizeText(size), cerr)
		}
	}
	if size > 0 && got < size {
		return fmt.Errorf("%w: connection closed after %d of %d bytes", ErrNetwork, got, size)
	}
	if size > 0 && got > size {
		discard()
		return fmt.Errorf("%w: received %d bytes, expected %d", ErrIntegrity, got, size)
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if digest != "" {
		if sum := hex.EncodeToString(h.Sum(nil)); sum != digest {
			discard()
			err := fmt.Errorf("%w: sha256 is %s, expected %s", ErrIntegrity, sum, digest)
			if resumed {
				err = fmt.Errorf("%w (%w)", err, errRestart)
			}
			return err
		}
	}
	return nil
}

// expect decides the size and digest the file must have: the reference's
// own values first, then the Hub's headers. A disagreement between the two is
// an error before any byte is written: the file on the Hub is not the one the
// reference describes.
func expect(r Ref, m remote) (size int64, digest string, err error) {
	size = r.Size
	for _, s := range []int64{m.linkedSize, m.total} {
		if s <= 0 {
			continue
		}
		if size == 0 {
			size = s
		} else if s != size {
			return 0, "", fmt.Errorf("%w: the Hub offers %d bytes, expected %d", ErrIntegrity, s, size)
		}
	}
	digest = r.SHA256
	if m.sha256 != "" {
		if digest != "" && digest != m.sha256 {
			return 0, "", fmt.Errorf("%w: the Hub reports sha256 %s, expected %s", ErrIntegrity, m.sha256, digest)
		}
		digest = m.sha256
	}
	return size, digest, nil
}

// readRemote collects the file's size and digest from the responses. The Hub
// names them in X-Linked-Size and X-Linked-Etag on the redirect to its CDN
// (for Git LFS files the etag is the sha256 of the content); a file it serves
// itself carries the digest in ETag. An ETag from any other host (the CDN's
// own) means something else and is ignored, as is any tag that is not a
// sha256 (small files are tagged with their Git blob id).
func readRemote(hops []hop, hubHost string) remote {
	m := remote{total: -1}
	for _, h := range hops {
		if m.linkedSize == 0 {
			if n, err := strconv.ParseInt(strings.TrimSpace(h.header.Get("X-Linked-Size")), 10, 64); err == nil && n > 0 {
				m.linkedSize = n
			}
		}
		if m.sha256 != "" {
			continue
		}
		if d := etagDigest(h.header.Get("X-Linked-Etag")); d != "" {
			m.sha256 = d
		} else if h.host == hubHost {
			m.sha256 = etagDigest(h.header.Get("ETag"))
		}
	}
	return m
}

// etagDigest returns the sha256 an ETag holds (W/"…" or "…"), or "".
func etagDigest(tag string) string {
	tag = strings.TrimSpace(tag)
	tag = strings.TrimPrefix(tag, "W/")
	tag = strings.ToLower(strings.Trim(tag, `"`))
	if sha256RE.MatchString(tag) {
		return tag
	}
	return ""
}

// parseContentRange reads "bytes START-END/TOTAL" or "bytes */TOTAL"; start is
// -1 in the second form, total -1 when it is "*".
func parseContentRange(s string) (start, total int64, ok bool) {
	rest, found := strings.CutPrefix(strings.TrimSpace(s), "bytes ")
	if !found {
		return 0, 0, false
	}
	span, tot, found := strings.Cut(rest, "/")
	if !found {
		return 0, 0, false
	}
	total = -1
	if tot != "*" {
		n, err := strconv.ParseInt(tot, 10, 64)
		if err != nil || n < 0 {
			return 0, 0, false
		}
		total = n
	}
	if span == "*" {
		return -1, total, true
	}
	first, last, found := strings.Cut(span, "-")
	if !found {
		return 0, 0, false
	}
	a, err1 := strconv.ParseInt(first, 10, 64)
	b, err2 := strconv.ParseInt(last, 10, 64)
	if err1 != nil || err2 != nil || a < 0 || b < a || (total >= 0 && b >= total) {
		return 0, 0, false
	}
	return a, total, true
}

func sizeText(size int64) string {
	if size <= 0 {
		return "an unknown number of"
	}
	return strconv.FormatInt(size, 10)
}

// syncDir makes a rename durable where the OS allows syncing a directory.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
}

// writerFunc adapts a function to io.Writer.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
