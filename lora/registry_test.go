package lora

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/ruvllm/ruvllm/kernels"
	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/models/gguf"
)

// zeros is an endless reader of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// adapterFiles holds the uploadable forms of one random adapter.
type adapterFiles struct {
	a              *Adapter
	ggufFile       []byte
	config, safety []byte
}

func makeAdapterFiles(t *testing.T, cfg *models.Config, spec RandomSpec) adapterFiles {
	t.Helper()
	a := randomAdapter(t, cfg, spec)
	dir := t.TempDir()
	if err := a.WriteGGUF(filepath.Join(dir, "a.gguf"), kernels.F32); err != nil {
		t.Fatal(err)
	}
	if err := a.WritePEFT(filepath.Join(dir, "peft"), cfg); err != nil {
		t.Fatal(err)
	}
	read := func(p string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	return adapterFiles{a: a, ggufFile: read("a.gguf"), config: read("peft/" + PEFTConfigFile), safety: read("peft/" + PEFTWeightsFile)}
}

type part struct {
	filename string
	body     io.Reader
}

func upload(r *Registry, name, baseModel string, parts ...part) (Info, error) {
	u, err := r.NewUpload()
	if err != nil {
		return Info{}, err
	}
	defer u.Abort()
	for _, p := range parts {
		if err := u.AddFile(p.filename, p.body); err != nil {
			return Info{}, err
		}
	}
	return u.Commit(name, baseModel)
}

// dirNames lists the adapter directory.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	sort.Strings(names)
	return names
}

func newRegistry(t *testing.T, base *gguf.File, cfg *models.Config, dir string, maxResident int) *Registry {
	t.Helper()
	r, err := NewRegistry(RegistryOptions{Dir: dir, Config: cfg, Base: base, BaseModel: "tiny", MaxResident: maxResident, MaxUploadBytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRegistryUpload(t *testing.T) {
	base, cfg, _ := tinyModel(t)
	dir := t.TempDir()
	r := newRegistry(t, base, cfg, dir, 0)
	f := makeAdapterFiles(t, cfg, RandomSpec{Rank: 4, Seed: 1})
	rank8 := makeAdapterFiles(t, cfg, RandomSpec{Rank: 8, Seed: 2})
	rankMismatch := bytes.Replace(rank8.config, []byte(`"r": 8`), []byte(`"r": 4`), 1)
	b := func(x []byte) io.Reader { return bytes.NewReader(x) }

	ok := []struct {
		name   string
		format Format
		parts  []part
		base   string
	}{
		{"g1", FormatGGUF, []part{{"my-lora.gguf", b(f.ggufFile)}}, ""},
		{"p1", FormatPEFT, []part{{"adapter_config.json", b(f.config)}, {"adapter_model.safetensors", b(f.safety)}}, "tiny"},
		{"sniffed.v2", FormatPEFT, []part{{"blob", b(rank8.safety)}, {"", b(rank8.config)}}, ""},
		{"sniffed_gguf", FormatGGUF, []part{{"upload", b(f.ggufFile)}}, ""},
	}
	for _, c := range ok {
		t.Run("ok "+c.name, func(t *testing.T) {
			info, err := upload(r, c.name, c.base, c.parts...)
			if err != nil {
				t.Fatal(err)
			}
			if info.Name != c.name || info.Format != c.format || !info.Resident || info.Targets != len(f.a.order) || info.BaseModel != "tiny" {
				t.Fatalf("info %+v", info)
			}
			l, err := r.Acquire(c.name)
			if err != nil {
				t.Fatal(err)
			}
			want := f.a
			if strings.HasPrefix(c.name, "sniffed.") {
				want = rank8.a
			}
			sameAdapter(t, want, l.Adapter(), 1e-6)
			l.Release()
		})
	}

	bad := []struct {
		name  string
		parts []part
		base  string
		want  error
		text  string
	}{
		{"../x", []part{{"a.gguf", b(f.ggufFile)}}, "", ErrBadName, "invalid adapter name"},
		{"a/b", []part{{"a.gguf", b(f.ggufFile)}}, "", ErrBadName, ""},
		{".hidden", []part{{"a.gguf", b(f.ggufFile)}}, "", ErrBadName, ""},
		{"", []part{{"a.gguf", b(f.ggufFile)}}, "", ErrBadName, ""},
		{strings.Repeat("x", 65), []part{{"a.gguf", b(f.ggufFile)}}, "", ErrBadName, ""},
		{"huge", []part{{"a.gguf", io.LimitReader(zeros{}, 2<<30)}}, "", ErrTooLarge, "over 4194304 bytes"},
		{"huge-total", []part{{"c.json", b(f.config)}, {"w.safetensors", io.LimitReader(zeros{}, 2<<30)}}, "", ErrTooLarge, ""},
		{"rank", []part{{"c.json", b(rankMismatch)}, {"w.safetensors", b(rank8.safety)}}, "", ErrInvalid, "rank mismatch"},
		{"truncated", []part{{"c.json", b(f.config)}, {"w.safetensors", b(f.safety[:len(f.safety)-100])}}, "", ErrInvalid, "truncated"},
		{"truncated-gguf", []part{{"a.gguf", b(f.ggufFile[:len(f.ggufFile)-100])}}, "", ErrInvalid, "truncated"},
		{"config-only", []part{{"c.json", b(f.config)}}, "", ErrInvalid, "either one GGUF"},
		{"gguf-and-config", []part{{"a.gguf", b(f.ggufFile)}, {"c.json", b(f.config)}}, "", ErrInvalid, "either one GGUF"},
		{"two-configs", []part{{"c.json", b(f.config)}, {"d.json", b(f.config)}}, "", ErrInvalid, "two uploaded files"},
		{"junk", []part{{"x", b([]byte("hello"))}}, "", ErrInvalid, "neither"},
		{"other-base", []part{{"a.gguf", b(f.ggufFile)}}, "llama-70b", ErrBaseMismatch, "llama-70b"},
		{"g1", []part{{"a.gguf", b(f.ggufFile)}}, "", ErrExists, ""},
		{"p1", []part{{"a.gguf", b(f.ggufFile)}}, "", ErrExists, ""},
	}
	for _, c := range bad {
		t.Run("bad "+c.name, func(t *testing.T) {
			_, err := upload(r, c.name, c.base, c.parts...)
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.text) {
				t.Fatalf("error %v, want %v containing %q", err, c.want, c.text)
			}
			// A client learns what is wrong with its files, not where the
			// server keeps them.
			if strings.Contains(err.Error(), dir) || strings.Contains(err.Error(), uploadPrefix) || strings.Contains(err.Error(), os.TempDir()) {
				t.Errorf("the error shows a server path: %v", err)
			}
		})
	}
	got := dirNames(t, dir)
	want := []string{"g1.gguf", "p1", "sniffed.v2", "sniffed_gguf.gguf"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("adapter dir holds %v, want %v", got, want)
	}
	if peft := dirNames(t, filepath.Join(dir, "p1")); strings.Join(peft, " ") != PEFTConfigFile+" "+PEFTWeightsFile {
		t.Fatalf("p1/ holds %v", peft)
	}
	if n := len(r.List()); n != 4 {
		t.Fatalf("%d adapters listed, want 4", n)
	}
}

func TestRegistryResidency(t *testing.T) {
	base, cfg, _ := tinyModel(t)
	r := newRegistry(t, base, cfg, t.TempDir(), 2)
	files := map[string]adapterFiles{}
	for i, name := range []string{"a", "b", "c"} {
		files[name] = makeAdapterFiles(t, cfg, RandomSpec{Rank: 2, Seed: uint64(i)})
		if _, err := upload(r, name, "", part{"x.gguf", bytes.NewReader(files[name].ggufFile)}); err != nil {
			t.Fatal(err)
		}
	}
	resident := func() string {
		var s []string
		for _, in := range r.List() {
			if in.Resident {
				s = append(s, in.Name)
			}
		}
		return strings.Join(s, ",")
	}
	if got := resident(); got != "b,c" {
		t.Fatalf("resident %s after three uploads, want b,c (a least recently used)", got)
	}
	la, err := r.Acquire("a") // reloads a, evicts b
	if err != nil {
		t.Fatal(err)
	}
	sameAdapter(t, files["a"].a, la.Adapter(), 0)
	if got := resident(); got != "a,c" {
		t.Fatalf("resident %s, want a,c", got)
	}
	lb, _ := r.Acquire("b")
	lc, _ := r.Acquire("c")
	if got := resident(); got != "a,b,c" {
		t.Fatalf("resident %s with all three in use, want a,b,c", got)
	}
	if in, _ := r.Get("b"); in.InUse != 1 || in.MemoryBytes == 0 || in.Rank != 2 {
		t.Fatalf("info %+v", in)
	}
	la.Release()
	la.Release() // a second release does nothing
	if in, _ := r.Get("a"); in.InUse != 0 {
		t.Fatalf("a in use %d after release", in.InUse)
	}
	if got := resident(); got != "b,c" {
		t.Fatalf("resident %s after releasing a, want b,c", got)
	}
	lb.Release()
	lc.Release()
	if got := resident(); got != "b,c" {
		t.Fatalf("resident %s, want b,c", got)
	}

	// Many requests at once with room for one adapter: each lease keeps
	// its adapter whatever the others do.
	r1 := newRegistry(t, base, cfg, r.Dir(), 1)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				name := []string{"a", "b", "c"}[(g+i)%3]
				l, err := r1.Acquire(name)
				if err != nil {
					t.Error(err)
					return
				}
				if tg := l.Adapter().Targets()[0]; tg.Rank != 2 || l.Adapter().Name != name {
					t.Errorf("leased %s, got %s", name, l.Adapter().Name)
				}
				l.Release()
			}
		}()
	}
	wg.Wait()
	if got := len(strings.Split(resident(), ",")); got > 2 {
		t.Fatalf("%d resident", got)
	}
	n := 0
	for _, in := range r1.List() {
		if in.Resident {
			n++
		}
		if in.InUse != 0 {
			t.Errorf("%s still in use", in.Name)
		}
	}
	if n != 1 {
		t.Fatalf("%d resident after the storm, want 1", n)
	}
}

func TestRegistryDelete(t *testing.T) {
	base, cfg, _ := tinyModel(t)
	dir := t.TempDir()
	r := newRegistry(t, base, cfg, dir, 0)
	f := makeAdapterFiles(t, cfg, RandomSpec{Rank: 1, Seed: 3})
	if _, err := upload(r, "g", "", part{"a.gguf", bytes.NewReader(f.ggufFile)}); err != nil {
		t.Fatal(err)
	}
	if _, err := upload(r, "p", "", part{"c.json", bytes.NewReader(f.config)}, part{"w.safetensors", bytes.NewReader(f.safety)}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"g", "p"} {
		l, err := r.Acquire(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Delete(name); !errors.Is(err, ErrInUse) {
			t.Fatalf("delete of %s in use: %v, want ErrInUse", name, err)
		}
		if err := r.Unload(name); !errors.Is(err, ErrInUse) {
			t.Fatalf("unload of %s in use: %v, want ErrInUse", name, err)
		}
		l.Release()
		if err := r.Delete(name); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Get(name); !errors.Is(err, ErrNotFound) {
			t.Fatalf("get after delete: %v", err)
		}
		if _, err := r.Acquire(name); !errors.Is(err, ErrNotFound) {
			t.Fatalf("acquire after delete: %v", err)
		}
	}
	if err := r.Delete("g"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if got := dirNames(t, dir); len(got) != 0 {
		t.Fatalf("adapter dir holds %v after deleting everything", got)
	}
}

func TestRegistryLoadPath(t *testing.T) {
	base, cfg, _ := tinyModel(t)
	root := t.TempDir()
	dir := filepath.Join(root, "adapters")
	r := newRegistry(t, base, cfg, dir, 0)
	f := makeAdapterFiles(t, cfg, RandomSpec{Rank: 2, Seed: 4})
	write := func(p string, data []byte) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dir, "sub", "x.gguf"), f.ggufFile)
	write(filepath.Join(dir, "peft", PEFTConfigFile), f.config)
	write(filepath.Join(dir, "peft", PEFTWeightsFile), f.safety)
	write(filepath.Join(root, "outside.gguf"), f.ggufFile)
	if err := os.Symlink(filepath.Join(root, "outside.gguf"), filepath.Join(dir, "link.gguf")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, ".upload-1"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, path string
		want       error
	}{
		{"rel", "sub/x.gguf", nil},
		{"abs", filepath.Join(dir, "sub", "x.gguf"), nil},
		{"peftdir", "peft", nil},
		{"escape", "../outside.gguf", ErrBadPath},
		{"escape-abs", filepath.Join(root, "outside.gguf"), ErrBadPath},
		{"escape-dots", "sub/../../outside.gguf", ErrBadPath},
		{"symlink", "link.gguf", ErrBadPath},
		{"dir-itself", ".", ErrBadPath},
		{"temp", ".upload-1", ErrBadPath},
		{"missing", "nope.gguf", ErrNotFound},
		{"../name", "sub/x.gguf", ErrBadName},
		{"rel", "sub/x.gguf", ErrExists},
		{"notadapter", "peft/" + PEFTConfigFile, ErrInvalid},
	}
	for _, c := range cases {
		t.Run(c.name+" "+c.path, func(t *testing.T) {
			info, err := r.LoadPath(c.name, c.path)
			if c.want == nil {
				if err != nil || info.Name != c.name || !info.Resident {
					t.Fatalf("%+v, %v", info, err)
				}
				return
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("error %v, want %v", err, c.want)
			}
		})
	}
	if err := r.Unload("rel"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Get("rel"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get after unload: %v", err)
	}
	if err := r.Delete("abs"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "sub", "x.gguf")); err != nil {
		t.Fatalf("unload or delete of a path-loaded adapter removed its file: %v", err)
	}
}

func TestRegistryStartup(t *testing.T) {
	base, cfg, _ := tinyModel(t)
	dir := t.TempDir()
	r := newRegistry(t, base, cfg, dir, 0)
	f := makeAdapterFiles(t, cfg, RandomSpec{Rank: 2, Seed: 5})
	if _, err := upload(r, "g", "", part{"a.gguf", bytes.NewReader(f.ggufFile)}); err != nil {
		t.Fatal(err)
	}
	if _, err := upload(r, "p", "", part{"c.json", bytes.NewReader(f.config)}, part{"w.safetensors", bytes.NewReader(f.safety)}); err != nil {
		t.Fatal(err)
	}
	other := *cfg
	other.Dim *= 2
	misfit := randomAdapter(t, &other, RandomSpec{Rank: 2, Seed: 1, Targets: []string{"blk.0.attn_q.weight"}})
	if err := misfit.WriteGGUF(filepath.Join(dir, "misfit.gguf"), kernels.F32); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "junk.gguf"), []byte("not gguf"), 0o644)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("hi"), 0o644)
	os.MkdirAll(filepath.Join(dir, ".upload-123"), 0o755)
	os.WriteFile(filepath.Join(dir, ".upload-123", "adapter.gguf"), f.ggufFile, 0o644)

	r2 := newRegistry(t, base, cfg, dir, 0)
	var names []string
	for _, in := range r2.List() {
		names = append(names, in.Name)
	}
	if strings.Join(names, " ") != "g p" {
		t.Fatalf("start-up found %v, want g p", names)
	}
	sk := r2.Skipped()
	if len(sk) != 2 || !errors.Is(sk["misfit.gguf"], ErrInvalid) || !errors.Is(sk["junk.gguf"], ErrInvalid) {
		t.Fatalf("skipped %v", sk)
	}
	if got := strings.Join(dirNames(t, dir), " "); got != "g.gguf junk.gguf misfit.gguf notes.txt p" {
		t.Fatalf("dir after start-up: %s (the stale upload should be gone, the rest untouched)", got)
	}
	l, err := r2.Acquire("p")
	if err != nil {
		t.Fatal(err)
	}
	sameAdapter(t, f.a, l.Adapter(), 1e-6)
	l.Release()
}

func TestResolve(t *testing.T) {
	base, cfg, _ := tinyModel(t)
	r := newRegistry(t, base, cfg, t.TempDir(), 0)
	f := makeAdapterFiles(t, cfg, RandomSpec{Rank: 1, Seed: 6})
	if _, err := upload(r, "sql", "", part{"a.gguf", bytes.NewReader(f.ggufFile)}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		model, want string
	}{
		{"sql", "sql"},
		{"tiny:sql", "sql"},
		{"TINY:sql", "sql"},
		{"ruvllm synthetic tiny:sql", "sql"}, // general.name
		{"other:sql", ""},
		{"tiny", ""},
		{"tiny:", ""},
		{"tiny:nope", ""},
	}
	for _, c := range cases {
		got, ok := r.Resolve(c.model)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("Resolve(%q) = %q, %v; want %q", c.model, got, ok, c.want)
		}
	}
}
