package hub

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// CachedFile is one file of the cache: what `ruvllm-serve ls` lists and
// `rm` deletes.
type CachedFile struct {
	// Ref names the file: its repository, revision ("" for main) and
	// path in the repository, as Pull would fetch it again.
	Ref Ref
	// Path is where the file is on disk.
	Path string
	// Size is its size in bytes so far; Modified when it was last written.
	Size     int64
	Modified time.Time
	// Partial marks an interrupted download (the "<file>.part" that the
	// next Pull resumes); Path is then the partial file's.
	Partial bool
}

// hfDir is the part of the cache that holds the Hub's files.
func (c *Client) hfDir() (string, error) {
	root := c.CacheDir
	if root == "" {
		d, err := DefaultCacheDir()
		if err != nil {
			return "", err
		}
		root = d
	}
	root = filepath.Join(root, "hf")
	// Paths are reported under the directory's real name, so that one
	// file has one path however the cache is reached.
	if real, err := filepath.EvalSymlinks(root); err == nil {
		root = real
	}
	if abs, err := filepath.Abs(root); err == nil {
		root = abs
	}
	return root, nil
}

// Cached lists the files in the cache, complete and partial, sorted by
// their reference. A cache that does not exist yet holds nothing; entries
// that do not fit the cache's layout (owner/name/revision/file) are left
// out.
func (c *Client) Cached() ([]CachedFile, error) {
	root, err := c.hfDir()
	if err != nil {
		return nil, err
	}
	var files []CachedFile
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == root {
				return fs.SkipAll
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		f, ok := cachedFile(root, p)
		if !ok {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil // removed while we walked
		}
		f.Size, f.Modified = info.Size(), info.ModTime()
		files = append(files, f)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("hub: listing the cache %s: %w", root, err)
	}
	sort.Slice(files, func(i, j int) bool {
		a, b := files[i], files[j]
		if a.Ref.String() != b.Ref.String() {
			return a.Ref.String() < b.Ref.String()
		}
		return !a.Partial && b.Partial
	})
	return files, nil
}

// cachedFile reads the reference of the file at p, under root (the
// cache's hf directory): root/owner/name/revision/file.
func cachedFile(root, p string) (CachedFile, bool) {
	rel, err := filepath.Rel(root, p)
	if err != nil {
		return CachedFile{}, false
	}
	parts := strings.SplitN(filepath.ToSlash(rel), "/", 4)
	if len(parts) < 4 {
		return CachedFile{}, false
	}
	rev, err := url.PathUnescape(parts[2])
	if err != nil {
		return CachedFile{}, false
	}
	f := CachedFile{Path: p, Ref: Ref{Repo: parts[0] + "/" + parts[1], File: parts[3]}}
	if rev != defaultRevision {
		f.Ref.Revision = rev
	}
	if name, ok := strings.CutSuffix(f.Ref.File, partSuffix); ok {
		f.Ref.File, f.Partial = name, true
	}
	if f.Ref.Validate() != nil {
		return CachedFile{}, false
	}
	return f, true
}

// FindCached finds the cached files that name means: the path of a file
// in the cache, or a reference — one naming a file matches it at every
// revision the cache holds unless it names its revision, one naming a
// quantization tag matches the files with that tag, one naming only a
// repository every file of it. A path outside the cache is refused.
func (c *Client) FindCached(name string) ([]CachedFile, error) {
	root, err := c.hfDir()
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(name); err == nil && (filepath.IsAbs(name) || strings.HasPrefix(name, ".") || !looksLikeRef(name)) {
		p, err := within(root, name)
		if err != nil {
			return nil, err
		}
		f, ok := cachedFile(root, p)
		if !ok {
			return nil, fmt.Errorf("hub: %s is in the cache directory but is not a model file of it", name)
		}
		return c.match(func(g CachedFile) bool { return g.Path == f.Path })
	}
	r, err := ParseRef(name)
	if err != nil {
		return nil, fmt.Errorf("hub: %s is neither a file nor a model reference (%w)", name, err)
	}
	return c.match(func(f CachedFile) bool {
		switch {
		case f.Ref.Repo != r.Repo:
			return false
		case r.Revision != "" && f.Ref.Revision != r.Revision && !(r.Revision == defaultRevision && f.Ref.Revision == ""):
			return false
		case r.File != "":
			return f.Ref.File == r.File
		case r.Quant != "":
			return hasTag(strings.ToLower(path.Base(f.Ref.File)), strings.ToLower(r.Quant))
		}
		return true
	})
}

// looksLikeRef reports whether a name that is also a path is written as a
// reference (owner/name...) rather than as a path (absolute, ./, ../).
func looksLikeRef(name string) bool {
	_, err := ParseRef(name)
	return err == nil
}

// match lists the cached files keep accepts.
func (c *Client) match(keep func(CachedFile) bool) ([]CachedFile, error) {
	all, err := c.Cached()
	if err != nil {
		return nil, err
	}
	var found []CachedFile
	for _, f := range all {
		if keep(f) {
			found = append(found, f)
		}
	}
	return found, nil
}

// within returns the absolute, symlink-free path of name, which must lie
// under root (itself absolute and symlink-free, as hfDir gives it).
func within(root, name string) (string, error) {
	abs, err := filepath.Abs(name)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(root, real)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", fmt.Errorf("hub: %s is not in the cache (%s): only cached models are removed", name, root)
	}
	return real, nil
}

// Remove deletes a cached file (with its partial download, if any) and
// the directories it leaves empty, up to the cache's hf directory. A file
// outside the cache is refused.
func (c *Client) Remove(f CachedFile) error {
	root, err := c.hfDir()
	if err != nil {
		return err
	}
	if abs, err := filepath.Abs(f.Path); err == nil {
		if _, err := os.Lstat(abs); errors.Is(err, fs.ErrNotExist) {
			if _, ok := cachedFile(root, abs); ok {
				return nil // gone already (with the file it was the partial download of)
			}
		}
	}
	p, err := within(root, f.Path)
	if err != nil {
		return err
	}
	if _, ok := cachedFile(root, p); !ok {
		return fmt.Errorf("hub: %s is not a model file of the cache", f.Path)
	}
	full := strings.TrimSuffix(p, partSuffix)
	for _, q := range []string{full, full + partSuffix} {
		if err := os.Remove(q); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("hub: %w", err)
		}
	}
	for dir := filepath.Dir(full); dir != root && strings.HasPrefix(dir, root+string(filepath.Separator)); dir = filepath.Dir(dir) {
		if os.Remove(dir) != nil {
			break // not empty, or not ours to remove
		}
	}
	return nil
}
