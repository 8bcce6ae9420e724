package lora

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ruvllm/ruvllm/kernels"
	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/models/gguf"
)

// Errors of the registry, for callers to tell apart with errors.Is and map
// to HTTP statuses. Content errors wrap ErrInvalid (400).
var (
	// ErrNotFound: no adapter of that name (404).
	ErrNotFound = errors.New("adapter not found")
	// ErrExists: an adapter of that name is already registered or stored (409).
	ErrExists = errors.New("an adapter of that name already exists")
	// ErrInUse: the adapter serves a request now; delete and unload are
	// refused rather than deferred, so the caller knows at once whether the
	// adapter is gone (409).
	ErrInUse = errors.New("the adapter is in use by a running request")
	// ErrTooLarge: an upload or adapter file is over the size limit (413).
	ErrTooLarge = errors.New("adapter is larger than the size limit")
	// ErrBadName: a name outside [A-Za-z0-9._-]{1,64}, or one starting with a dot (400).
	ErrBadName = errors.New("invalid adapter name")
	// ErrBadPath: a load path outside the adapter directory (400).
	ErrBadPath = errors.New("adapter path is outside the adapter directory")
	// ErrBaseMismatch: an upload names another base model (400).
	ErrBaseMismatch = errors.New("adapter is for another base model")
)

// Defaults of RegistryOptions.
const (
	DefaultMaxResident    = 8
	DefaultMaxUploadBytes = 512 << 20
)

// Prefixes of the registry's temporary entries in the adapter directory;
// names cannot start with a dot, so these never clash with an adapter, and
// the start-up scan removes any left by a crash.
const (
	uploadPrefix = ".upload-"
	deletePrefix = ".delete-"
)

// nameRE is what an adapter name may be: it becomes a file name in the
// adapter directory, so it has no separators and no "..".
var nameRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// CheckName reports whether name may name an adapter.
func CheckName(name string) error {
	if !nameRE.MatchString(name) || strings.HasPrefix(name, ".") {
		return fmt.Errorf("%w %q: use 1 to 64 of A-Z a-z 0-9 . _ - not starting with a dot", ErrBadName, name)
	}
	return nil
}

// RegistryOptions configure a Registry. Dir, Config and Base are required.
type RegistryOptions struct {
	// Dir holds the adapters: NAME.gguf files and NAME/ PEFT directories.
	// It is created when missing.
	Dir string
	// Config and Base are the base model every adapter must fit; Base must
	// stay open while the registry is used (evicted adapters are reloaded
	// and checked against it).
	Config *models.Config
	Base   *gguf.File
	// BaseModel is the base model's id as clients name it ("model" in a
	// request, the parent in /v1/models); an upload whose base_model is
	// neither it nor Config.Name is refused.
	BaseModel string
	// MaxResident is the most adapters held in memory; the least recently
	// used idle one is unloaded first. Adapters serving requests are never
	// unloaded, so more may be resident while more are in use at once.
	// 0 means DefaultMaxResident.
	MaxResident int
	// MaxUploadBytes bounds an upload (all its files together) and any
	// adapter read from the directory. 0 means DefaultMaxUploadBytes.
	MaxUploadBytes int64
}

// Info describes a registered adapter.
type Info struct {
	Name      string `json:"name"`
	Format    Format `json:"format"`
	BaseModel string `json:"base_model"`
	// Rank, Alpha and Targets are known once the adapter has been loaded,
	// which the registry does when it registers one.
	Rank    int     `json:"rank"`
	Alpha   float32 `json:"alpha"`
	Targets int     `json:"targets"`
	// FileBytes is the size of the adapter's files.
	FileBytes int64 `json:"file_bytes"`
	// Resident says whether the adapter is in memory; MemoryBytes is what
	// it takes there.
	Resident    bool  `json:"resident"`
	MemoryBytes int64 `json:"memory_bytes"`
	// InUse counts the requests using the adapter now.
	InUse   int       `json:"in_use"`
	Created time.Time `json:"created"`
	// Training is set for a MicroLoRA trained online from feedback: its
	// version, feedback and updates as last published.
	Training *Training `json:"training,omitempty"`
}

// entry is one registered adapter.
type entry struct {
	name      string
	path      string // a NAME.gguf file or a PEFT directory
	owned     bool   // path is the adapter's own place in Dir: Delete removes it
	format    Format
	created   time.Time
	fileBytes int64

	loadMu   sync.Mutex // serialises loading; never held with Registry.mu wanted first
	adapter  *Adapter   // nil when not resident
	refs     int        // leases held
	lastUse  uint64     // Registry.clock at the last use, for LRU
	rank     int
	alpha    float32
	targets  int
	memBytes int64
	// pinned entries (MicroLoRAs with updates not yet saved) are never
	// unloaded: the newest version lives in memory first, its file
	// follows, and the entry is unpinned once it is written.
	pinned   bool
	training *Training
}

// Registry is the set of adapters a server offers for one base model. It is
// safe for concurrent use.
type Registry struct {
	dir         string
	cfg         *models.Config
	base        *gguf.File
	baseModel   string
	maxResident int
	maxBytes    int64

	mu      sync.Mutex
	entries map[string]*entry
	clock   uint64
	skipped map[string]error
}

// NewRegistry opens the adapter directory and loads every adapter in it,
// checking each against the base model; one that does not fit is left out
// and reported by Skipped. Temporary files of interrupted uploads and
// deletes are removed.
func NewRegistry(o RegistryOptions) (*Registry, error) {
	if o.Dir == "" || o.Config == nil || o.Base == nil {
		return nil, errors.New("lora: a registry needs a directory and a base model")
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	if dir, err = filepath.EvalSymlinks(dir); err != nil {
		return nil, err
	}
	r := &Registry{
		dir: dir, cfg: o.Config, base: o.Base, baseModel: o.BaseModel,
		maxResident: o.MaxResident, maxBytes: o.MaxUploadBytes,
		entries: map[string]*entry{}, skipped: map[string]error{},
	}
	if r.maxResident <= 0 {
		r.maxResident = DefaultMaxResident
	}
	if r.maxBytes <= 0 {
		r.maxBytes = DefaultMaxUploadBytes
	}
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, de := range des {
		n := de.Name()
		if strings.HasPrefix(n, uploadPrefix) || strings.HasPrefix(n, deletePrefix) {
			os.RemoveAll(filepath.Join(dir, n))
			continue
		}
		if strings.HasPrefix(n, ".") {
			continue
		}
		name, format := n, FormatPEFT
		if !de.IsDir() {
			var ok bool
			if name, ok = strings.CutSuffix(n, ".gguf"); !ok {
				continue // not an adapter: leave it alone
			}
			format = FormatGGUF
		}
		if err := CheckName(name); err != nil {
			r.skipped[n] = err
			continue
		}
		if _, dup := r.entries[name]; dup {
			r.skipped[n] = fmt.Errorf("%w: both %s.gguf and %s/ exist", ErrExists, name, name)
			continue
		}
		e := &entry{name: name, path: filepath.Join(dir, n), owned: true, format: format}
		if err := r.register(e); err != nil {
			r.skipped[n] = err
		}
	}
	return r, nil
}

// Skipped lists the entries of the adapter directory the start-up scan left
// out, with the reason, by file name.
func (r *Registry) Skipped() map[string]error {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]error, len(r.skipped))
	for k, v := range r.skipped {
		out[k] = v
	}
	return out
}

// Dir is the adapter directory.
func (r *Registry) Dir() string { return r.dir }

// BaseModel is the base model's id.
func (r *Registry) BaseModel() string { return r.baseModel }

// MaxResident is the most adapters held in memory at once (the option, or
// its default): the servers' metrics report it as how many adapters a
// server can run without reading one again.
func (r *Registry) MaxResident() int { return r.maxResident }

// register loads a new entry (checking it against the base model) and adds
// it under its name.
func (r *Registry) register(e *entry) error {
	e.created = modTime(e.path)
	size, err := pathBytes(e.path)
	if err != nil {
		return err
	}
	e.fileBytes = size
	if size > r.maxBytes {
		return fmt.Errorf("%w: %s has %d bytes, the limit is %d", ErrTooLarge, e.name, size, r.maxBytes)
	}
	a, err := Load(e.path, r.cfg, r.base)
	if err != nil {
		return err
	}
	a.Name = e.name
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.entries[e.name]; dup {
		return fmt.Errorf("%w: %q", ErrExists, e.name)
	}
	r.entries[e.name] = e
	r.setResident(e, a)
	r.evict()
	return nil
}

// setResident records a loaded adapter; r.mu is held.
func (r *Registry) setResident(e *entry, a *Adapter) {
	e.adapter = a
	e.rank, e.alpha, e.targets, e.memBytes = a.Rank(), a.Alpha, len(a.order), a.Bytes()
	if a.Training != nil {
		t := *a.Training
		e.training = &t
	}
	r.clock++
	e.lastUse = r.clock
}

// evict unloads the least recently used idle adapters until at most
// maxResident are in memory; r.mu is held.
func (r *Registry) evict() {
	var idle []*entry
	resident := 0
	for _, e := range r.entries {
		if e.adapter != nil {
			resident++
			if e.refs == 0 && !e.pinned {
				idle = append(idle, e)
			}
		}
	}
	sort.Slice(idle, func(i, j int) bool { return idle[i].lastUse < idle[j].lastUse })
	for _, e := range idle {
		if resident <= r.maxResident {
			break
		}
		e.adapter = nil
		resident--
	}
}

// Lease is the use of an adapter by one request: while any lease is held
// the adapter stays in memory and cannot be deleted or unloaded.
type Lease struct {
	r    *Registry
	e    *entry
	a    *Adapter
	once sync.Once
}

// Adapter is the leased adapter.
func (l *Lease) Adapter() *Adapter { return l.a }

// Release ends the lease; later calls do nothing.
func (l *Lease) Release() {
	l.once.Do(func() {
		l.r.mu.Lock()
		defer l.r.mu.Unlock()
		l.e.refs--
		l.r.clock++
		l.e.lastUse = l.r.clock
		l.r.evict()
	})
}

// Acquire leases the adapter named name, loading it when it is not in
// memory (which may unload the least recently used idle one). The caller
// must Release the lease when its request ends.
func (r *Registry) Acquire(name string) (*Lease, error) {
	r.mu.Lock()
	e, ok := r.entries[name]
	if !ok {
		r.mu.Unlock()
		return nil, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	e.refs++ // pins the entry: not evicted, deleted nor unloaded
	a := e.adapter
	r.clock++
	e.lastUse = r.clock
	r.mu.Unlock()
	if a == nil {
		var err error
		if a, err = r.reload(e); err != nil {
			r.mu.Lock()
			e.refs--
			r.mu.Unlock()
			return nil, err
		}
	}
	return &Lease{r: r, e: e, a: a}, nil
}

// reload reads an evicted adapter again; concurrent callers wait for one
// read.
func (r *Registry) reload(e *entry) (*Adapter, error) {
	e.loadMu.Lock()
	defer e.loadMu.Unlock()
	r.mu.Lock()
	a := e.adapter
	r.mu.Unlock()
	if a != nil {
		return a, nil
	}
	size, err := pathBytes(e.path)
	if err != nil {
		return nil, fmt.Errorf("adapter %q: %w", e.name, err)
	}
	if size > r.maxBytes {
		return nil, fmt.Errorf("%w: %s has %d bytes, the limit is %d", ErrTooLarge, e.name, size, r.maxBytes)
	}
	a, err = Load(e.path, r.cfg, r.base)
	if err != nil {
		return nil, fmt.Errorf("adapter %q: %w", e.name, err)
	}
	a.Name = e.name
	r.mu.Lock()
	defer r.mu.Unlock()
	r.setResident(e, a)
	r.evict()
	return a, nil
}

// info describes e; r.mu is held.
func (r *Registry) info(e *entry) Info {
	in := Info{
		Name: e.name, Format: e.format, BaseModel: r.baseModel,
		Rank: e.rank, Alpha: e.alpha, Targets: e.targets,
		FileBytes: e.fileBytes, Resident: e.adapter != nil, InUse: e.refs, Created: e.created,
	}
	if in.Resident {
		in.MemoryBytes = e.memBytes
	}
	in.Training = e.training
	return in
}

// List describes every registered adapter, sorted by name.
func (r *Registry) List() []Info {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Info, 0, len(r.entries))
	for _, e := range r.entries {
		out = append(out, r.info(e))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Get describes the adapter named name.
func (r *Registry) Get(name string) (Info, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entries[name]
	if !ok {
		return Info{}, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	return r.info(e), nil
}

// Resolve finds the adapter a request's model names: "ADAPTER", or
// "BASE:ADAPTER" with BASE the base model's id (or its general.name).
func (r *Registry) Resolve(model string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.entries[model]; ok {
		return model, true
	}
	i := strings.LastIndexByte(model, ':')
	if i < 0 || !r.isBase(model[:i]) {
		return "", false
	}
	if _, ok := r.entries[model[i+1:]]; ok {
		return model[i+1:], true
	}
	return "", false
}

// isBase reports whether id names the base model.
func (r *Registry) isBase(id string) bool {
	return id != "" && (strings.EqualFold(id, r.baseModel) || strings.EqualFold(id, r.cfg.Name))
}

// Delete removes the adapter named name and, when it is stored in the
// adapter directory under its name (uploaded or found at start-up), its
// files; an adapter registered from another path by LoadPath keeps its
// files. It is refused with ErrInUse while a request uses the adapter.
// The files are first renamed to a temporary name, so that a crash
// mid-delete leaves no half adapter behind.
func (r *Registry) Delete(name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, err := r.removable(name)
	if err != nil {
		return err
	}
	if e.owned {
		tmp, err := os.MkdirTemp(r.dir, deletePrefix)
		if err != nil {
			return err
		}
		if err := os.Rename(e.path, filepath.Join(tmp, "x")); err != nil {
			os.Remove(tmp)
			return err
		}
		defer os.RemoveAll(tmp)
	}
	delete(r.entries, name)
	return nil
}

// Unload removes the adapter named name from the registry and from memory,
// as vLLM's /v1/unload_lora_adapter does; its files stay, so an adapter
// stored in the directory comes back at the next start. It is refused with
// ErrInUse while a request uses the adapter.
func (r *Registry) Unload(name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := r.removable(name); err != nil {
		return err
	}
	delete(r.entries, name)
	return nil
}

// removable finds an idle entry; r.mu is held.
func (r *Registry) removable(name string) (*entry, error) {
	e, ok := r.entries[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	if e.refs > 0 {
		return nil, fmt.Errorf("%w: %q serves %d request(s); retry when they end", ErrInUse, name, e.refs)
	}
	return e, nil
}

// LoadPath registers the adapter at path under name and loads it, as
// vLLM's /v1/load_lora_adapter does. A relative path is taken from the
// adapter directory; after resolving symbolic links the path must lie
// inside it.
func (r *Registry) LoadPath(name, path string) (Info, error) {
	if err := CheckName(name); err != nil {
		return Info{}, err
	}
	p, err := r.confine(path)
	if err != nil {
		return Info{}, err
	}
	r.mu.Lock()
	_, dup := r.entries[name]
	r.mu.Unlock()
	if dup {
		return Info{}, fmt.Errorf("%w: %q", ErrExists, name)
	}
	format := FormatGGUF
	if st, err := os.Stat(p); err == nil && st.IsDir() {
		format = FormatPEFT
	}
	e := &entry{name: name, path: p, format: format}
	e.owned = p == filepath.Join(r.dir, name) || p == filepath.Join(r.dir, name+".gguf")
	if err := r.register(e); err != nil {
		return Info{}, err
	}
	return r.Get(name)
}

// confine resolves path inside the adapter directory.
func (r *Registry) confine(path string) (string, error) {
	if path == "" {
		return "", fmt.Errorf("%w: the path is empty", ErrBadPath)
	}
	p := path
	if !filepath.IsAbs(p) {
		p = filepath.Join(r.dir, p)
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("%w: %q", ErrNotFound, path)
		}
		return "", fmt.Errorf("%w: %q: %v", ErrBadPath, path, err)
	}
	rel, err := filepath.Rel(r.dir, real)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", fmt.Errorf("%w: %q", ErrBadPath, path)
	}
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		if strings.HasPrefix(part, ".") {
			return "", fmt.Errorf("%w: %q is a hidden or temporary entry", ErrBadPath, path)
		}
	}
	return real, nil
}

// Upload is an adapter being uploaded: its files are streamed into a
// temporary directory inside the adapter directory and moved into place by
// Commit, so that the directory never holds half an adapter. Use one
// Upload from one goroutine.
type Upload struct {
	r     *Registry
	tmp   string
	files map[string]string // role (a file name below) → path in tmp
	total int64
	err   error // the first error; the upload is aborted then
}

// Roles of uploaded files, named as they are stored.
const (
	uploadGGUF = "adapter.gguf"
)

// NewUpload starts an upload. The caller reads the files from wherever
// they come (the HTTP API from a multipart body) and hands each to AddFile
// as it reads it, then names the adapter with Commit; a deferred Abort
// removes whatever a failure left.
func (r *Registry) NewUpload() (*Upload, error) {
	tmp, err := os.MkdirTemp(r.dir, uploadPrefix)
	if err != nil {
		return nil, err
	}
	return &Upload{r: r, tmp: tmp, files: map[string]string{}}, nil
}

// AddFile stores one uploaded file: a GGUF adapter, adapter_config.json or
// adapter_model.safetensors, told apart by the file name's extension or,
// without one, by the content. All files together may take at most the
// registry's MaxUploadBytes; past that AddFile stops reading and fails with
// ErrTooLarge. Any error aborts the upload.
func (u *Upload) AddFile(filename string, body io.Reader) error {
	if u.err != nil {
		return u.err
	}
	err := u.addFile(filename, body)
	if err != nil {
		err = u.pathless(err)
		u.fail(err)
	}
	return err
}

// pathless is err with the upload's temporary directory taken out of its
// message: a client is told what is wrong with its files ("adapter.gguf: 4
// bytes is too short"), not where the server keeps them.
func (u *Upload) pathless(err error) error {
	msg := err.Error()
	clean := strings.ReplaceAll(msg, u.tmp+string(filepath.Separator), "")
	clean = strings.ReplaceAll(clean, u.tmp, "the upload")
	if r := u.r.dir; r != "" {
		clean = strings.ReplaceAll(clean, r+string(filepath.Separator), "")
	}
	if clean == msg {
		return err
	}
	return &pathlessError{err: err, msg: clean}
}

// pathlessError is an error with a message of its own, unwrapping to the
// original, so that errors.Is still tells its kind.
type pathlessError struct {
	err error
	msg string
}

func (e *pathlessError) Error() string { return e.msg }
func (e *pathlessError) Unwrap() error { return e.err }

func (u *Upload) addFile(filename string, body io.Reader) error {
	f, err := os.CreateTemp(u.tmp, "part-*")
	if err != nil {
		return err
	}
	room := u.r.maxBytes - u.total
	n, err := io.Copy(f, io.LimitReader(body, room+1))
	u.total += n
	if err == nil && n > room {
		err = fmt.Errorf("%w: the upload is over %d bytes", ErrTooLarge, u.r.maxBytes)
	}
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = f.Chmod(0o644)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	role, err := fileRole(filename, f.Name())
	if err != nil {
		return err
	}
	if _, dup := u.files[role]; dup {
		return fmt.Errorf("%w: two uploaded files are %s", ErrInvalid, role)
	}
	dst := filepath.Join(u.tmp, role)
	if err := os.Rename(f.Name(), dst); err != nil {
		return err
	}
	u.files[role] = dst
	return nil
}

// fileRole tells what an uploaded file is from its name or content.
func fileRole(filename, path string) (string, error) {
	base := strings.ToLower(filepath.Base(filename))
	switch {
	case strings.HasSuffix(base, ".gguf"):
		return uploadGGUF, nil
	case strings.HasSuffix(base, ".json"):
		return PEFTConfigFile, nil
	case strings.HasSuffix(base, ".safetensors"):
		return PEFTWeightsFile, nil
	}
	head := make([]byte, 16)
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	n, _ := io.ReadFull(f, head)
	f.Close()
	head = head[:n]
	switch {
	case len(head) >= 4 && string(head[:4]) == string(ggufMagic):
		return uploadGGUF, nil
	case len(strings.TrimSpace(string(head))) > 0 && strings.TrimSpace(string(head))[0] == '{':
		return PEFTConfigFile, nil
	case len(head) >= 9 && head[8] == '{':
		return PEFTWeightsFile, nil
	}
	return "", fmt.Errorf("%w: uploaded file %q is neither a GGUF adapter, %s nor %s", ErrInvalid, filename, PEFTConfigFile, PEFTWeightsFile)
}

// fail records err and removes the temporary directory.
func (u *Upload) fail(err error) {
	if u.err == nil {
		u.err = err
	}
	os.RemoveAll(u.tmp)
}

// Abort discards the upload. It may be called after Commit or an error,
// and then does nothing more.
func (u *Upload) Abort() {
	if u.err == nil {
		u.fail(errors.New("lora: upload aborted"))
	}
}

// Commit checks the uploaded adapter — one GGUF file, or a PEFT config and
// weights — against the base model and stores it under name (baseModel,
// when not empty, must name the registry's base model). The adapter is
// loaded and listed at once. The upload is finished either way.
func (u *Upload) Commit(name, baseModel string) (Info, error) {
	if u.err != nil {
		return Info{}, u.err
	}
	info, err := u.commit(name, baseModel)
	if err != nil {
		err = u.pathless(err)
		u.fail(err)
		return Info{}, err
	}
	u.err = errors.New("lora: upload already committed")
	return info, nil
}

func (u *Upload) commit(name, baseModel string) (Info, error) {
	r := u.r
	if err := CheckName(name); err != nil {
		return Info{}, err
	}
	if baseModel != "" && !r.isBase(baseModel) {
		return Info{}, fmt.Errorf("%w: base_model %q, this server runs %q", ErrBaseMismatch, baseModel, r.baseModel)
	}
	var src, dst string
	format := FormatGGUF
	_, hasConfig := u.files[PEFTConfigFile]
	_, hasWeights := u.files[PEFTWeightsFile]
	switch g, hasGGUF := u.files[uploadGGUF]; {
	case hasGGUF && !hasConfig && !hasWeights:
		src, dst = g, filepath.Join(r.dir, name+".gguf")
	case !hasGGUF && hasConfig && hasWeights:
		src, dst, format = u.tmp, filepath.Join(r.dir, name), FormatPEFT
		if err := os.Chmod(u.tmp, 0o755); err != nil { // MkdirTemp made it private
			return Info{}, err
		}
	default:
		return Info{}, fmt.Errorf("%w: upload either one GGUF adapter file, or %s and %s", ErrInvalid, PEFTConfigFile, PEFTWeightsFile)
	}
	a, err := Load(src, r.cfg, r.base)
	if err != nil {
		return Info{}, err
	}
	a.Name = name
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.entries[name]; dup || exists(filepath.Join(r.dir, name)) || exists(filepath.Join(r.dir, name+".gguf")) {
		return Info{}, fmt.Errorf("%w: %q", ErrExists, name)
	}
	if err := os.Rename(src, dst); err != nil {
		return Info{}, err
	}
	if format == FormatGGUF {
		os.RemoveAll(u.tmp)
	}
	syncDir(r.dir)
	e := &entry{name: name, path: dst, owned: true, format: format, created: time.Now(), fileBytes: u.total}
	r.entries[name] = e
	r.setResident(e, a)
	r.evict()
	return r.info(e), nil
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// syncDir makes a rename in dir durable; failure only weakens that.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// pathBytes is the size of a file, or of the regular files of a directory.
func pathBytes(path string) (int64, error) {
	st, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	if !st.IsDir() {
		return st.Size(), nil
	}
	var n int64
	for _, f := range []string{PEFTConfigFile, PEFTWeightsFile} {
		if st, err := os.Stat(filepath.Join(path, f)); err == nil {
			n += st.Size()
		}
	}
	return n, nil
}

func modTime(path string) time.Time {
	if st, err := os.Stat(path); err == nil {
		return st.ModTime()
	}
	return time.Time{}
}

// Publish makes a the adapter named name from now on: a new version of a
// MicroLoRA the server trains from feedback (a.Training set). A free name is
// registered as NAME.gguf in the adapter directory; an adapter of that name
// is replaced only when it is a MicroLoRA too, others are refused with
// ErrExists. Requests holding a lease keep the version they run with; the
// next Acquire gets a. Without persist the entry is pinned in memory, so
// that what requests get is always the newest version; with persist the
// file is written too (atomically), so that learning survives a restart,
// and the adapter may be unloaded as others are.
func (r *Registry) Publish(name string, a *Adapter, persist bool) (Info, error) {
	if err := CheckName(name); err != nil {
		return Info{}, err
	}
	if a.Training == nil {
		return Info{}, fmt.Errorf("%w: %q is not an adapter trained online", ErrInvalid, name)
	}
	if err := a.Validate(r.cfg, r.base); err != nil {
		return Info{}, err
	}
	a.Name = name
	path := filepath.Join(r.dir, name+".gguf")
	r.mu.Lock()
	e, ok := r.entries[name]
	switch {
	case ok && e.training == nil && !e.pinned:
		r.mu.Unlock()
		return Info{}, fmt.Errorf("%w: %q is an adapter that is not trained from feedback", ErrExists, name)
	case !ok && exists(filepath.Join(r.dir, name)):
		r.mu.Unlock()
		return Info{}, fmt.Errorf("%w: %q", ErrExists, name)
	case !ok:
		e = &entry{name: name, path: path, owned: true, format: FormatGGUF, created: time.Now()}
		r.entries[name] = e
	}
	e.pinned = true
	r.setResident(e, a)
	r.evict()
	r.mu.Unlock()
	if persist {
		if err := a.WriteGGUF(path, kernels.F32); err != nil {
			return Info{}, err
		}
		size, serr := pathBytes(path)
		r.mu.Lock()
		if serr == nil {
			e.fileBytes = size
		}
		if e.adapter == a {
			// The file holds the newest version: the adapter may be
			// unloaded like any other and read again when needed, so that
			// MicroLoRAs too stay within MaxResident.
			e.pinned = false
			r.evict()
		}
		r.mu.Unlock()
	}
	return r.Get(name)
}

// Adapter is the adapter named name as it is in memory now, without a
// lease; nil when it is not resident or not registered.
func (r *Registry) Adapter(name string) *Adapter {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.entries[name]; ok {
		return e.adapter
	}
	return nil
}
