// Package testmodel is the one place tests get a model: a file of
// ../shared (skipping when it is absent), or a small random-weight model
// written by models.Synthesize, which needs nothing beside the repository,
// so that tests that only need some model run on a fresh machine.
package testmodel

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/internal/shared"
	"github.com/ruvllm/ruvllm/kernels"
	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/models/gguf"
)

// synthVersion names the cache directory of synthesized files; raise it
// when Synthesize's output changes, so that no stale file is reused.
const synthVersion = 1

var synthMu sync.Mutex

// Synth returns the path of a random-weight model of the named shape
// (models.Shapes: "tiny" is 256-wide, 2 layers, vocab 1024) in file type ft
// ("F32", "Q4_0", ...), seeded, so every call gives the same file. Files
// are written once into a cache directory under the system's temp dir,
// shared by the test binaries of every package.
func Synth(tb testing.TB, shape, ft string) string {
	tb.Helper()
	return SynthAs(tb, shape, "", ft)
}

// SynthAs is Synth with the shape written as architecture arch ("": the
// shape's own), as synth --arch writes it: SynthAs(tb, "qwen3-0.6b",
// "llama", "Q4_K_M") is a llama of Qwen3-0.6B's size.
func SynthAs(tb testing.TB, shape, arch, ft string) string {
	tb.Helper()
	return synth(tb, shape, arch, ft, 1)
}

// SynthSeed is Synth with the weights drawn from seed instead of 1, as
// synth --seed writes them.
func SynthSeed(tb testing.TB, shape, ft string, seed uint64) string {
	tb.Helper()
	return synth(tb, shape, "", ft, seed)
}

func synth(tb testing.TB, shape, arch, ft string, seed uint64) string {
	tb.Helper()
	s, t := shapeAndType(tb, shape, ft)
	name := s.Name
	if arch != "" {
		s.Arch = arch
		name += "-" + arch
	}
	if seed != 1 {
		name += fmt.Sprintf("-seed%d", seed)
	}
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("ruvllm-testmodels-v%d", synthVersion))
	path := filepath.Join(dir, fmt.Sprintf("%s-%s.gguf", name, t.Name))
	synthMu.Lock()
	defer synthMu.Unlock()
	if _, err := os.Stat(path); err == nil {
		return path
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	// Written under a name of this process and renamed into place, so that
	// test binaries running at once never read a half-written file.
	tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
	if err := models.Synthesize(tmp, s, t, seed, 0); err != nil {
		os.Remove(tmp)
		tb.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		tb.Fatal(err)
	}
	return path
}

// shapeAndType looks up a shape of models.Shapes and a file type by name.
func shapeAndType(tb testing.TB, shape, ft string) (models.Shape, models.FileType) {
	tb.Helper()
	s, err := models.ShapeByName(shape)
	if err != nil {
		tb.Fatal(err)
	}
	t, err := models.ParseFileType(ft)
	if err != nil {
		tb.Fatal(err)
	}
	return s, t
}

// Load loads the model at path, closed when the test ends.
func Load(tb testing.TB, path string) *models.Model {
	tb.Helper()
	m, err := models.Load(path, models.LoadOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { m.Close() })
	return m
}

// Shared loads a model file of ../shared (parts name it under the shared
// directory), skipping the test when it is absent.
func Shared(tb testing.TB, parts ...string) *models.Model {
	tb.Helper()
	return Load(tb, shared.Path(tb, parts...))
}

// Tiny loads the "tiny" synthesized model in F32.
func Tiny(tb testing.TB) *models.Model {
	tb.Helper()
	return Load(tb, Synth(tb, "tiny", "F32"))
}

// Backend opens m on the named backend (backends.Open; "" is the default),
// closed when the test ends, before the model. The caller links the
// backend in (a blank import of its package).
func Backend(tb testing.TB, name string, m *models.Model, o backends.Options) backends.Backend {
	tb.Helper()
	b, err := backends.Open(name, m, o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { b.Close() })
	return b
}

// SynthGains writes into a temporary directory of the test a random-weight
// model of the named shape as architecture arch ("": the shape's own), its
// output projection tied to the token embeddings or not, in file type ft,
// with norm gains drawn at random from [0.25, 1.75) rather than Synth's
// ones: a model in which what is done to the gains shows in the outputs.
func SynthGains(tb testing.TB, shape, arch, ft string, tied bool) string {
	tb.Helper()
	s, t := shapeAndType(tb, shape, ft)
	if arch != "" {
		s.Arch = arch
	}
	s.Tied = tied
	dir := tb.TempDir()
	ones := filepath.Join(dir, "ones.gguf")
	if err := models.Synthesize(ones, s, t, 1, 0); err != nil {
		tb.Fatal(err)
	}
	f, err := gguf.Open(ones)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	w := gguf.NewWriter()
	w.CopyKV(f)
	rng := rand.New(rand.NewPCG(7, 11))
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		data := f.TensorData(ti)
		if strings.HasSuffix(ti.Name, "_norm.weight") && ti.Type == kernels.F32 {
			data = make([]byte, len(data))
			for k := 0; k < len(data); k += 4 {
				binary.LittleEndian.PutUint32(data[k:], math.Float32bits(0.25+1.5*rng.Float32()))
			}
		}
		if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, data); err != nil {
			tb.Fatal(err)
		}
	}
	path := filepath.Join(dir, fmt.Sprintf("%s-gains-%s.gguf", s.Name, t.Name))
	if err := w.WriteFile(path); err != nil {
		tb.Fatal(err)
	}
	return path
}
