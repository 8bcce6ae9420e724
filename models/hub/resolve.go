package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// Bounds on listing a repository, so a hostile or runaway server cannot make
// Resolve read without end.
const (
	maxTreePage    = 8 << 20
	maxTreePages   = 100
	maxTreeEntries = 100_000
)

// treeEntry is one element of the Hub's tree listing
// (GET /api/models/{repo}/tree/{revision}); for a Git LFS file, LFS.OID is the
// sha256 of the content.
type treeEntry struct {
	Type string `json:"type"`
	Path string `json:"path"`
	Size int64  `json:"size"`
	LFS  *struct {
		OID  string `json:"oid"`
		Size int64  `json:"size"`
	} `json:"lfs"`
}

// Resolve turns a reference that names a quantization (or nothing) into one
// that names a file. A matching file already in the cache is chosen without
// the network; otherwise the repository is listed on the Hub and the size and
// sha256 it reports are filled in. A reference that names a file is returned
// unchanged.
//
// A reference without a tag picks the file tagged DefaultQuant, else the
// repository's only GGUF model file (projectors and split parts left
// aside); with several and none tagged DefaultQuant, the error lists them.
// Offline, such a reference picks the repository's one cached file.
func (c *Client) Resolve(ctx context.Context, r Ref) (Ref, error) {
	if err := r.Validate(); err != nil {
		return Ref{}, err
	}
	if r.File != "" {
		return r, nil
	}
	quant := r.Quant
	if quant == "" {
		quant = DefaultQuant
	}
	if file, ok := c.cachedQuant(r, quant); ok {
		r.File, r.Quant = file, ""
		return r, nil
	}
	if c.offline() {
		if file, ok := c.cachedOnly(r); ok && r.Quant == "" {
			r.File = file
			return r, nil
		}
		return Ref{}, fmt.Errorf("%w: no file of %s is in the cache and downloads are off (--offline or HF_HUB_OFFLINE)", ErrOffline, r)
	}
	entries, err := c.listTree(ctx, r)
	if err != nil {
		if file, ok := c.cachedOnly(r); ok && errors.Is(err, ErrNetwork) && ctx.Err() == nil {
			r.File = file
			return r, nil
		}
		return Ref{}, c.explain(ctx, r, err)
	}
	paths := make([]string, 0, len(entries))
	byPath := make(map[string]treeEntry, len(entries))
	for _, e := range entries {
		if e.Type == "file" {
			paths = append(paths, e.Path)
			byPath[e.Path] = e
		}
	}
	file, err := pickQuant(paths, quant)
	if err != nil && r.Quant == "" {
		if only, ok := onlyModel(paths); ok {
			file, err = only, nil
		} else if errors.Is(err, ErrNotFound) {
			err = fmt.Errorf("%w; name one as %s:QUANT or %s/FILE.gguf", err, r.Repo, r.Repo)
		}
	}
	if err != nil {
		return Ref{}, c.explain(ctx, r, err)
	}
	if err := validateFile(file); err != nil {
		return Ref{}, fmt.Errorf("hub: the Hub lists an unusable file name: %w", err)
	}
	e := byPath[file]
	r.File, r.Quant = file, ""
	if e.LFS != nil {
		if d := strings.ToLower(e.LFS.OID); sha256RE.MatchString(d) && r.SHA256 == "" {
			r.SHA256 = d
		}
		if e.LFS.Size > 0 && r.Size == 0 {
			r.Size = e.LFS.Size
		}
	} else if e.Size > 0 && r.Size == 0 {
		r.Size = e.Size
	}
	return r, nil
}

// cachedQuant looks for a complete file with the quantization tag in the
// cache directory of r's repository and revision.
func (c *Client) cachedQuant(r Ref, quant string) (string, bool) {
	dir, err := c.repoDir(r)
	if err != nil {
		return "", false
	}
	file, err := pickQuant(filesUnder(dir), quant)
	return file, err == nil
}

// cachedOnly finds the one complete GGUF model file the cache holds of
// r's repository and revision; ok is false when it holds none or several.
func (c *Client) cachedOnly(r Ref) (string, bool) {
	dir, err := c.repoDir(r)
	if err != nil {
		return "", false
	}
	return onlyModel(filesUnder(dir))
}

// filesUnder lists the complete files under dir, as slash-separated paths
// relative to it.
func filesUnder(dir string) []string {
	var paths []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() || strings.HasSuffix(p, partSuffix) {
			return nil
		}
		if rel, err := filepath.Rel(dir, p); err == nil {
			paths = append(paths, filepath.ToSlash(rel))
		}
		return nil
	})
	return paths
}

// onlyModel is the one GGUF model file among paths, leaving projectors
// (mmproj) and the parts of split files aside; ok is false when there is
// none or more than one.
func onlyModel(paths []string) (string, bool) {
	var found []string
	for _, p := range paths {
		name := strings.ToLower(path.Base(p))
		if strings.HasSuffix(name, ".gguf") && !strings.Contains(name, "mmproj") && !splitRE.MatchString(name) {
			found = append(found, p)
		}
	}
	if len(found) != 1 {
		return "", false
	}
	return found[0], true
}

// listTree reads the repository's file list at r's revision, following the
// Hub's pagination (Link: <…>; rel="next").
func (c *Client) listTree(ctx context.Context, r Ref) ([]treeEntry, error) {
	hub, err := c.endpointURL()
	if err != nil {
		return nil, err
	}
	next := r.treeURL(c.endpoint())
	var all []treeEntry
	for page := 0; next != ""; page++ {
		if page == maxTreePages {
			return nil, fmt.Errorf("repository listing longer than %d pages", maxTreePages)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, next, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Accept", "application/json")
		resp, _, err := c.do(req, hub)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNetwork, err)
		}
		entries, link, err := readTreePage(resp)
		if err != nil {
			return nil, err
		}
		all = append(all, entries...)
		if len(all) > maxTreeEntries {
			return nil, fmt.Errorf("repository lists more than %d files", maxTreeEntries)
		}
		next = ""
		if link != "" {
			u, err := resp.Request.URL.Parse(link)
			// Follow only links to the Hub itself: the token goes with them.
			if err != nil || u.Scheme != hub.Scheme || u.Host != hub.Host {
				return nil, fmt.Errorf("repository listing points to another host: %q", printable(link, 200))
			}
			next = u.String()
		}
	}
	return all, nil
}

// readTreePage decodes one page of the listing and returns its next link.
func readTreePage(resp *http.Response) ([]treeEntry, string, error) {
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, "", statusError(resp)
	}
	var entries []treeEntry
	body := io.LimitReader(resp.Body, maxTreePage)
	if err := json.NewDecoder(body).Decode(&entries); err != nil {
		return nil, "", fmt.Errorf("%w: repository listing is not valid JSON: %w", ErrNetwork, err)
	}
	return entries, nextLink(resp.Header.Values("Link")), nil
}

// nextLink finds the rel="next" target in Link headers.
func nextLink(values []string) string {
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			target, params, ok := strings.Cut(part, ";")
			if !ok || !strings.Contains(strings.ReplaceAll(params, " ", ""), `rel="next"`) {
				continue
			}
			target = strings.TrimSpace(target)
			if strings.HasPrefix(target, "<") && strings.HasSuffix(target, ">") {
				return target[1 : len(target)-1]
			}
		}
	}
	return ""
}

// pickQuant chooses the GGUF file tagged quant among paths: the tag must
// stand alone in the file name (Q4_0 does not match Q4_0_4_4 or IQ4_0),
// projector files (mmproj) are skipped, and among several matches the
// shortest path wins. Files split by gguf-split are refused: they need all
// their parts, and ruvllm loads single files.
func pickQuant(paths []string, quant string) (string, error) {
	var matches, splits, ggufs []string
	for _, p := range paths {
		name := strings.ToLower(path.Base(p))
		if !strings.HasSuffix(name, ".gguf") || strings.Contains(name, "mmproj") {
			continue
		}
		ggufs = append(ggufs, p)
		if !hasTag(name, strings.ToLower(quant)) {
			continue
		}
		if splitRE.MatchString(name) {
			splits = append(splits, p)
			continue
		}
		matches = append(matches, p)
	}
	if len(matches) > 0 {
		sort.Slice(matches, func(i, j int) bool {
			if len(matches[i]) != len(matches[j]) {
				return len(matches[i]) < len(matches[j])
			}
			return matches[i] < matches[j]
		})
		return matches[0], nil
	}
	if len(splits) > 0 {
		return "", fmt.Errorf("%w: %s is split into several files (%s); merge them with llama-gguf-split --merge and pass the result with --model",
			ErrNotFound, quant, strings.Join(splits[:min(len(splits), 3)], ", "))
	}
	if len(ggufs) == 0 {
		return "", fmt.Errorf("%w: the repository holds no GGUF file", ErrNotFound)
	}
	sort.Strings(ggufs)
	return "", fmt.Errorf("%w: no GGUF file tagged %s; the repository has %s", ErrNotFound, quant, summarize(ggufs, 8))
}

// hasTag reports whether tag occurs in name delimited on the left by a
// non-alphanumeric byte and on the right by neither an alphanumeric byte nor
// '_' (which would continue the tag, as in Q4_0_4_4).
func hasTag(name, tag string) bool {
	for i := 0; ; {
		j := strings.Index(name[i:], tag)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(tag)
		leftOK := start == 0 || !isAlnum(name[start-1])
		rightOK := end == len(name) || (!isAlnum(name[end]) && name[end] != '_')
		if leftOK && rightOK {
			return true
		}
		i = start + 1
	}
}

func isAlnum(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
}

// summarize lists up to n items and counts the rest.
func summarize(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return strings.Join(items[:n], ", ") + fmt.Sprintf(" and %d more", len(items)-n)
}
