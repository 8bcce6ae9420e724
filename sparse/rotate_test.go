package sparse

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ruvllm/ruvllm/internal/testmodel"
	"github.com/ruvllm/ruvllm/kernels"
	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/models/gguf"
)

// randomSymmetric is a random symmetric n×n matrix B·Bᵀ + I/2, B of n×rank
// (rank < n: the eigenvalue 1/2 repeated); rank 0 gives a diagonal matrix
// of the entries 1 and 2, repeated.
func randomSymmetric(n, rank int, seed uint64) []float64 {
	rng := rand.New(rand.NewPCG(seed, 3))
	b := make([]float64, n*n)
	for i := range b {
		b[i] = rng.NormFloat64()
	}
	a := make([]float64, n*n)
	for i := range n {
		for j := range n {
			var s float64
			for k := range rank {
				s += b[i*n+k] * b[j*n+k]
			}
			a[i*n+j] = s
		}
		a[i*n+i] += 0.5
		if rank == 0 {
			a[i*n+i] = float64(1 + i%2)
		}
	}
	return a
}

func TestSymmetricEigen(t *testing.T) {
	for _, c := range []struct {
		n    int
		rank int // of the random part; 0: a diagonal matrix with repeated entries
	}{{1, 1}, {2, 1}, {5, 2}, {64, 32}, {100, 100}, {7, 0}} {
		n := c.n
		t.Run(fmt.Sprintf("n=%d,rank=%d", n, c.rank), func(t *testing.T) {
			a := randomSymmetric(n, c.rank, uint64(n))
			orig := append([]float64(nil), a...)
			vals, q := symmetricEigen(a, n)
			for i := range n {
				if i > 0 && vals[i] > vals[i-1] {
					t.Fatalf("eigenvalues not decreasing: %v", vals)
				}
				for j := range n {
					var dot, qaq float64
					for k := range n {
						dot += q[i*n+k] * q[j*n+k]
						for l := range n {
							qaq += q[i*n+k] * orig[k*n+l] * q[j*n+l]
						}
					}
					want, wantA := 0.0, 0.0
					if i == j {
						want, wantA = 1, vals[i]
					}
					if math.Abs(dot-want) > 1e-10 || math.Abs(qaq-wantA) > 1e-9*float64(n) {
						t.Fatalf("(%d, %d): q·qᵀ %g, q·a·qᵀ %g, want %g, %g", i, j, dot, qaq, want, wantA)
					}
				}
			}
		})
	}
}

func TestRotatable(t *testing.T) {
	for _, c := range []struct {
		arch string
		ok   bool
	}{{"llama", true}, {"qwen2", true}, {"qwen3", false}, {"gemma2", false}, {"gemma3", false}, {"phi3", false}} {
		t.Run(c.arch, func(t *testing.T) {
			a, ok := models.Lookup(c.arch)
			if !ok {
				t.Fatalf("no architecture %s", c.arch)
			}
			if err := Rotatable(a); (err == nil) != c.ok {
				t.Errorf("Rotatable(%s) = %v, want ok %v", c.arch, err, c.ok)
			}
		})
	}
}

// matVec is W·x for the matrix name of f (dequantized), or nil when absent.
func matVec(t *testing.T, f *gguf.File, name string, x []float32) []float64 {
	t.Helper()
	ti, ok := f.Tensor(name)
	if !ok {
		return nil
	}
	tr, _ := kernels.TraitsOf(ti.Type)
	cols := int(ti.Dims[0])
	rows := int(ti.Elements()) / cols
	rb := ti.Type.RowBytes(cols)
	row := make([]float32, cols)
	out := make([]float64, rows)
	for r := range rows {
		tr.DequantizeRow(f.TensorData(ti)[r*rb:(r+1)*rb], row)
		for c, v := range row {
			out[r] += float64(v) * float64(x[c])
		}
	}
	return out
}

// relDiff is ‖a-b‖/‖b‖.
func relDiff(a, b []float64) float64 {
	var d, n float64
	for i := range b {
		d += (a[i] - b[i]) * (a[i] - b[i])
		n += b[i] * b[i]
	}
	return math.Sqrt(d / n)
}

// TestRotateFolds checks each rotated tensor against what it stands for,
// on random vectors: a matrix that reads a norm maps Q·n as the original
// mapped g ⊙ n; one that writes into the residual stream gives Q times the
// original's output; the embeddings are Q·e; the norms are ones; the
// output projection, tied or not, reads the final norm's input. Quantized
// formats are quantized again, so they agree within their rounding.
func TestRotateFolds(t *testing.T) {
	for _, c := range []struct {
		name, arch, ft string
		tied           bool
		tol            float64
	}{
		{"llama-untied-F32", "llama", "F32", false, 1e-5},
		{"llama-tied-F32", "llama", "F32", true, 1e-5},
		{"qwen2-tied-F32", "qwen2", "F32", true, 1e-5},
		{"llama-untied-F16", "llama", "F16", false, 3e-3},
		{"llama-tied-Q8_0", "llama", "Q8_0", true, 3e-2},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := testmodel.SynthGains(t, "tiny-llama3", c.arch, c.ft, c.tied)
			m := testmodel.Load(t, path)
			cfg, dim := m.Config, m.Config.Dim
			_, vecs := symmetricEigen(randomSymmetric(dim, dim, 9), dim)
			q := Rotation{Dim: dim, Q: vecs}
			out := filepath.Join(t.TempDir(), "rotated.gguf")
			if err := Rotate(m.File, cfg, q, out, 2); err != nil {
				t.Fatal(err)
			}
			r := testmodel.Load(t, out)
			if r.Config.TiedOutput {
				t.Error("the rotated model still ties its output to the embeddings")
			}
			if s, _ := r.File.GetString(KeyRotation); s != "pca" {
				t.Errorf("%s = %q", KeyRotation, s)
			}
			rng := rand.New(rand.NewPCG(5, 6))
			vec := func(n int) []float32 {
				x := make([]float32, n)
				for i := range x {
					x[i] = float32(rng.NormFloat64())
				}
				return x
			}
			rotate := func(x []float32) []float32 {
				y := make([]float32, dim)
				q.apply(y, x, nil)
				return y
			}
			gain := func(name string) []float32 {
				g, err := readVector(m.File, name, dim)
				if err != nil {
					t.Fatal(err)
				}
				return g
			}
			check := func(name string, got, want []float64) {
				t.Helper()
				if got == nil || want == nil || len(got) != len(want) {
					t.Fatalf("%s: missing or of another shape", name)
				}
				if d := relDiff(got, want); d > c.tol {
					t.Errorf("%s: relative difference %.2g, more than %g", name, d, c.tol)
				}
			}
			reads := func(name, src, norm string) {
				n := vec(dim)
				g := gain(norm)
				gn := make([]float32, dim)
				for i := range n {
					gn[i] = g[i] * n[i]
				}
				check(name, matVec(t, r.File, name, rotate(n)), matVec(t, m.File, src, gn))
			}
			for l := range cfg.Layers {
				for _, role := range []models.Role{models.AttnQ, models.AttnK, models.AttnV} {
					reads(models.TensorName(role, l), models.TensorName(role, l), models.TensorName(models.AttnNorm, l))
				}
				for _, role := range []models.Role{models.FFNGate, models.FFNUp} {
					reads(models.TensorName(role, l), models.TensorName(role, l), models.TensorName(models.FFNNorm, l))
				}
				for _, role := range []models.Role{models.AttnOut, models.FFNDown} {
					name := models.TensorName(role, l)
					in, _, _ := cfg.LinearShape(name)
					y := vec(in)
					orig := matVec(t, m.File, name, y)
					o32 := make([]float32, dim)
					for i, v := range orig {
						o32[i] = float32(v)
					}
					want := make([]float64, dim)
					for i, v := range rotate(o32) {
						want[i] = float64(v)
					}
					check(name, matVec(t, r.File, name, y), want)
				}
				for _, norm := range []models.Role{models.AttnNorm, models.FFNNorm} {
					for _, v := range gainOrFail(t, r.File, models.TensorName(norm, l), dim) {
						if v != 1 {
							t.Fatalf("%s has gain %g, want 1", models.TensorName(norm, l), v)
						}
					}
				}
				if c.arch == "qwen2" {
					name := models.TensorName(models.AttnQBias, l)
					a, _ := m.File.Tensor(name)
					b, _ := r.File.Tensor(name)
					if string(m.File.TensorData(a)) != string(r.File.TensorData(b)) {
						t.Errorf("%s changed", name)
					}
				}
			}
			head := models.TensorName(cfg.OutputRole(), 0)
			reads(models.TensorName(models.Output, 0), head, models.TensorName(models.OutputNorm, 0))
			// The embedding of a token is Q·e: as a matrix, E'·x = E·Qᵀx,
			// checked through x = Q·n (so Qᵀx = n).
			n := vec(dim)
			check("token_embd.weight", matVec(t, r.File, "token_embd.weight", rotate(n)), matVec(t, m.File, "token_embd.weight", n))
		})
	}
}

func gainOrFail(t *testing.T, f *gguf.File, name string, dim int) []float32 {
	t.Helper()
	g, err := readVector(f, name, dim)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestRotateRefuses: a family the rotation does not know, a rotation of
// another width, a sparsified file.
func TestRotateRefuses(t *testing.T) {
	dir := t.TempDir()
	gemma := testmodel.Load(t, testmodel.Synth(t, "tiny-gemma2", "F32"))
	if err := Rotate(gemma.File, gemma.Config, Rotation{Dim: gemma.Config.Dim, Q: make([]float64, gemma.Config.Dim*gemma.Config.Dim)}, filepath.Join(dir, "g.gguf"), 1); err == nil || !strings.Contains(err.Error(), "cannot be rotated") {
		t.Errorf("gemma2: %v", err)
	}
	if _, err := NewCovariance(gemma.File, gemma.Config); err == nil {
		t.Error("a covariance for gemma2")
	}
	m := testmodel.Load(t, testmodel.Synth(t, "tiny-llama3", "F32"))
	if err := Rotate(m.File, m.Config, Rotation{Dim: 3, Q: make([]float64, 9)}, filepath.Join(dir, "w.gguf"), 1); err == nil {
		t.Error("a rotation of 3 dimensions for a 64-wide model")
	}
}

// TestCovarianceObserve: the covariance of q's and gate's inputs divided by
// their norms' gains; other inputs ignored.
func TestCovarianceObserve(t *testing.T) {
	m := testmodel.Load(t, testmodel.SynthGains(t, "tiny-llama3", "llama", "F32", false))
	c, err := NewCovariance(m.File, m.Config)
	if err != nil {
		t.Fatal(err)
	}
	dim := m.Config.Dim
	g := gainOrFail(t, m.File, "blk.1.ffn_norm.weight", dim)
	x := make([]float32, 2*dim)
	for i := range dim {
		x[i] = g[i] * 2      // n = 2 on every entry
		x[dim+i] = -g[i] * 2 // and -2
	}
	c.Observe("blk.1.ffn_up.weight", x) // not the first reader: ignored
	c.Observe("blk.1.ffn_gate.weight", x)
	if c.Rows() != 2 {
		t.Fatalf("%d rows observed, want 2", c.Rows())
	}
	q, vars, err := c.PCA()
	if err != nil {
		t.Fatal(err)
	}
	// One direction (all ones / √dim) carries all: variance 4·dim.
	if math.Abs(vars[0]-4*float64(dim)) > 1e-9 || math.Abs(vars[1]) > 1e-9 {
		t.Errorf("variances %v", vars[:3])
	}
	for k := range dim {
		if math.Abs(math.Abs(q.Q[k])-1/math.Sqrt(float64(dim))) > 1e-9 {
			t.Fatalf("first direction %v", q.Q[:dim])
		}
	}
}
