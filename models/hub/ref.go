package hub

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// Ref names one file in a Hugging Face model repository. Either File or Quant
// selects the file; when both are empty the file is the one tagged
// DefaultQuant. Size and SHA256 are optional expectations: when set, a
// download that does not match them is rejected.
type Ref struct {
	// Repo is "owner/name", e.g. "Qwen/Qwen2.5-0.5B-Instruct-GGUF".
	Repo string
	// File is the path of the file inside the repository; it may contain "/".
	File string
	// Revision is a branch, tag or commit; empty means "main".
	Revision string
	// Quant picks a GGUF file by its quantization tag (e.g. "Q4_K_M") when File
	// is empty, the way llama.cpp's -hf does.
	Quant string
	// Size is the expected file size in bytes; 0 means unknown.
	Size int64
	// SHA256 is the expected lowercase hex digest; empty means unknown.
	SHA256 string
}

// DefaultModel is the small instruct model pulled when no model is given:
// Qwen2.5 0.5B Instruct, Q4_K_M, at a pinned commit so that the size and
// digest below (the file's Git LFS oid, as published for that commit) stay
// true.
var DefaultModel = Ref{
	Repo:     "Qwen/Qwen2.5-0.5B-Instruct-GGUF",
	File:     "qwen2.5-0.5b-instruct-q4_k_m.gguf",
	Revision: "9217f5db79a29953eb74d5343926648285ec7e67",
	Size:     491400032,
	SHA256:   "74a4da8c9fdbcd15bd1f6d01d621410d31c6fc00986f5eb687824e7b93d7a9db",
}

// DefaultQuant is the quantization picked when a reference names only a
// repository, as llama.cpp does.
const DefaultQuant = "Q4_K_M"

// defaultRevision is the branch used when a Ref has no Revision.
const defaultRevision = "main"

// Limits keep hostile references from producing huge paths or URLs.
const (
	maxRepoPart = 96
	maxFileLen  = 1024
	maxRevLen   = 256
	maxQuantLen = 32
)

var (
	repoPartRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]*$`)
	revisionRE = regexp.MustCompile(`^[A-Za-z0-9._/-]+$`)
	quantRE    = regexp.MustCompile(`^[A-Za-z0-9_]+$`)
	sha256RE   = regexp.MustCompile(`^[0-9a-f]{64}$`)
	// splitRE matches the parts of a GGUF split by llama.cpp's gguf-split.
	splitRE = regexp.MustCompile(`-[0-9]{5}-of-[0-9]{5}\.gguf$`)
)

// ParseRef parses a model reference:
//
//	owner/name/path/to/file.gguf   one file
//	owner/name@revision/file.gguf  one file at a branch, tag or commit
//	owner/name:Q4_K_M              the GGUF file with that quantization tag
//	owner/name                     the GGUF file tagged DefaultQuant, else the repository's one GGUF file
//
// Each may start with the Hub's host, as users copy names from ollama
// (hf.co/owner/name:Q4_K_M) or from the browser
// (https://huggingface.co/owner/name/blob/main/file.gguf, where the blob
// or resolve path gives the revision); the tag "latest", as ollama writes
// it, is no tag.
//
// Paths that could leave the cache directory ("..", absolute paths,
// backslashes, control characters) are rejected.
func ParseRef(s string) (Ref, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Ref{}, errors.New("hub: empty model reference")
	}
	if rest, ok := trimHost(s); ok {
		if r, ok, err := fromWebPath(rest); ok || err != nil {
			if err != nil {
				return Ref{}, fmt.Errorf("hub: model reference %q: %w", s, err)
			}
			return r, r.Validate()
		}
		s = rest
	}
	parts := strings.SplitN(s, "/", 3)
	if len(parts) < 2 {
		return Ref{}, fmt.Errorf("hub: model reference %q: want owner/name/file or owner/name[:quant]", s)
	}
	var r Ref
	name := parts[1]
	if len(parts) == 3 {
		r.File = parts[2]
		if r.File == "" {
			return Ref{}, fmt.Errorf("hub: model reference %q: empty file name", s)
		}
	} else if i := strings.LastIndexByte(name, ':'); i >= 0 {
		name, r.Quant = name[:i], name[i+1:]
		if r.Quant == "" {
			return Ref{}, fmt.Errorf("hub: model reference %q: empty quantization after ':'", s)
		}
		if strings.EqualFold(r.Quant, latestTag) {
			r.Quant = ""
		}
	}
	if i := strings.IndexByte(name, '@'); i >= 0 {
		name, r.Revision = name[:i], name[i+1:]
		if r.Revision == "" {
			return Ref{}, fmt.Errorf("hub: model reference %q: empty revision after '@'", s)
		}
	}
	r.Repo = parts[0] + "/" + name
	if err := r.Validate(); err != nil {
		return Ref{}, err
	}
	return r, nil
}

// latestTag is ollama's name of a repository's default file.
const latestTag = "latest"

// hubHosts are the Hub's host names as users write them before a
// reference.
var hubHosts = []string{"hf.co/", "huggingface.co/", "www.huggingface.co/"}

// trimHost takes the Hub's URL scheme and host off s; ok says whether s
// had the host.
func trimHost(s string) (rest string, ok bool) {
	for _, scheme := range []string{"https://", "http://"} {
		s = strings.TrimPrefix(s, scheme)
	}
	for _, h := range hubHosts {
		if len(s) > len(h) && strings.EqualFold(s[:len(h)], h) {
			return s[len(h):], true
		}
	}
	return s, false
}

// fromWebPath reads the path of a file's page or download URL on the Hub
// (owner/name/blob/REV/FILE, owner/name/resolve/REV/FILE; a query or
// fragment is dropped); ok is false for any other path.
func fromWebPath(p string) (r Ref, ok bool, err error) {
	if i := strings.IndexAny(p, "?#"); i >= 0 {
		p = p[:i]
	}
	parts := strings.SplitN(p, "/", 5)
	if len(parts) < 5 || (parts[2] != "blob" && parts[2] != "resolve") {
		return Ref{}, false, nil
	}
	rev, err := url.PathUnescape(parts[3])
	if err != nil {
		return Ref{}, true, fmt.Errorf("bad revision %q", parts[3])
	}
	file, err := url.PathUnescape(parts[4])
	if err != nil {
		return Ref{}, true, fmt.Errorf("bad file name %q", parts[4])
	}
	r = Ref{Repo: parts[0] + "/" + parts[1], File: file}
	if rev != defaultRevision {
		r.Revision = rev
	}
	return r, true, nil
}

// Validate reports whether every field of r is well formed and safe to use in
// a URL and a cache path.
func (r Ref) Validate() error {
	if err := validateRepo(r.Repo); err != nil {
		return err
	}
	if r.File != "" {
		if err := validateFile(r.File); err != nil {
			return err
		}
		if r.Quant != "" {
			return fmt.Errorf("hub: reference %s names both a file and a quantization", r.Repo)
		}
	}
	if r.Revision != "" {
		if err := validateRevision(r.Revision); err != nil {
			return err
		}
	}
	if r.Quant != "" && (len(r.Quant) > maxQuantLen || !quantRE.MatchString(r.Quant)) {
		return fmt.Errorf("hub: bad quantization tag %q", r.Quant)
	}
	if r.Size < 0 {
		return fmt.Errorf("hub: negative expected size %d", r.Size)
	}
	if r.SHA256 != "" && !sha256RE.MatchString(r.SHA256) {
		return fmt.Errorf("hub: expected sha256 %q is not 64 lowercase hex digits", r.SHA256)
	}
	return nil
}

func validateRepo(repo string) error {
	owner, name, ok := strings.Cut(repo, "/")
	if !ok || strings.Contains(name, "/") {
		return fmt.Errorf("hub: repository %q: want owner/name", repo)
	}
	for _, p := range []string{owner, name} {
		if len(p) == 0 || len(p) > maxRepoPart || !repoPartRE.MatchString(p) ||
			strings.Contains(p, "..") || strings.HasSuffix(p, ".") || strings.HasSuffix(p, "-") {
			return fmt.Errorf("hub: repository %q: %q is not a valid owner or repository name", repo, p)
		}
	}
	return nil
}

func validateFile(file string) error {
	if len(file) > maxFileLen {
		return fmt.Errorf("hub: file name longer than %d bytes", maxFileLen)
	}
	if strings.HasPrefix(file, "/") {
		return fmt.Errorf("hub: file %q: absolute paths are not allowed", file)
	}
	for _, c := range file {
		// ':' would make a drive letter or a stream name on Windows, '\' a
		// second path separator there.
		if c < 0x20 || c == 0x7f || c == '\\' || c == ':' {
			return fmt.Errorf("hub: file %q: character %q is not allowed", file, c)
		}
	}
	for _, seg := range strings.Split(file, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("hub: file %q: empty, '.' or '..' path element", file)
		}
	}
	if strings.HasSuffix(file, partSuffix) {
		// The cache keeps unfinished downloads under that suffix.
		return fmt.Errorf("hub: file %q: names ending in %s are reserved", file, partSuffix)
	}
	return nil
}

func validateRevision(rev string) error {
	if len(rev) > maxRevLen || !revisionRE.MatchString(rev) {
		return fmt.Errorf("hub: bad revision %q", rev)
	}
	for _, seg := range strings.Split(rev, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("hub: bad revision %q", rev)
		}
	}
	return nil
}

// revision returns r.Revision or the default branch.
func (r Ref) revision() string {
	if r.Revision == "" {
		return defaultRevision
	}
	return r.Revision
}

// String formats r in the syntax ParseRef accepts (without Size and SHA256).
func (r Ref) String() string {
	s := r.Repo
	if r.Revision != "" {
		s += "@" + r.Revision
	}
	switch {
	case r.File != "":
		s += "/" + r.File
	case r.Quant != "":
		s += ":" + r.Quant
	}
	return s
}

// resolveURL is where the Hub serves the file: {base}/{repo}/resolve/{rev}/{file}.
// The revision is escaped as one path element ("refs/pr/1" → "refs%2Fpr%2F1"),
// the file element by element.
func (r Ref) resolveURL(base string) string {
	segs := strings.Split(r.File, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return base + "/" + r.Repo + "/resolve/" + url.PathEscape(r.revision()) + "/" + strings.Join(segs, "/")
}

// treeURL lists the repository's files at the revision, recursively.
func (r Ref) treeURL(base string) string {
	return base + "/api/models/" + r.Repo + "/tree/" + url.PathEscape(r.revision()) + "?recursive=true"
}
