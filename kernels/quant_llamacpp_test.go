package kernels_test

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/ruvllm/ruvllm/internal/shared"
	"github.com/ruvllm/ruvllm/kernels"
	"github.com/ruvllm/ruvllm/models/gguf"
)

// dotFixture is one matrix product of testdata/llamacpp_ops.json: an
// activation row x, the first len(Want) outputs llama.cpp computed from it
// with tensor of model, and whether they come from a product of several rows
// (a prompt: llamafile's kernels for float weights).
type dotFixture struct {
	Model   string `json:"model"`
	Tensor  string `json:"tensor"`
	Batched bool   `json:"batched"`
	X       string `json:"x"`
	Want    string `json:"want"`
}

type opsFixture struct {
	Dots    []dotFixture `json:"dots"`
	RMSNorm struct {
		Model  string `json:"model"`
		Weight string `json:"weight"`
		X      string `json:"x"`
		Want   string `json:"want"`
	} `json:"rms_norm"`
}

func floatsOf(t *testing.T, s string) []float32 {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	f := make([]float32, len(raw)/4)
	for i := range f {
		f[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return f
}

func loadOps(t *testing.T) *opsFixture {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "llamacpp_ops.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f opsFixture
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	return &f
}

func openShared(t *testing.T, model string) *gguf.File {
	t.Helper()
	f, err := gguf.Open(shared.Path(t, "models", "mini", model))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestVecDotMatchesLlamaCpp quantizes llama.cpp's activations as llama.cpp
// does and multiplies them by rows of its own quantized files: every output
// must be llama.cpp's, bit for bit — VecDot for a single activation row,
// GemmVecDot for a row of a prompt.
func TestVecDotMatchesLlamaCpp(t *testing.T) {
	fx := loadOps(t)
	// The fixture's activations are in the repository, the weights they
	// multiply in ../shared: without them the test skips, and with a file
	// missing its cases skip and so does the check that the fixture covers
	// every type.
	shared.Path(t, "models", "mini")
	seen := map[kernels.DType]bool{}
	opened := 0 // cases whose file is there
	for _, c := range fx.Dots {
		name := c.Model + "/" + c.Tensor
		if c.Batched {
			name += "/batched"
		}
		t.Run(name, func(t *testing.T) {
			f := openShared(t, c.Model)
			opened++
			ti, ok := f.Tensor(c.Tensor)
			if !ok {
				t.Fatalf("no tensor %s", c.Tensor)
			}
			seen[ti.Type] = true
			tr, _ := kernels.TraitsOf(ti.Type)
			x, want := floatsOf(t, c.X), floatsOf(t, c.Want)
			cols := int(ti.Dims[0])
			if len(x) != cols {
				t.Fatalf("%d activations for %d columns", len(x), cols)
			}
			a := make([]byte, tr.VecDotType.RowBytes(cols))
			kernels.QuantizeActivations(tr.VecDotType, x, a)
			dot := tr.VecDot
			if c.Batched {
				dot = kernels.GemmVecDot(ti.Type)
			}
			rb, data := ti.Type.RowBytes(cols), f.TensorData(ti)
			for r, w := range want {
				if got := dot(cols, data[r*rb:(r+1)*rb], a); math.Float32bits(got) != math.Float32bits(w) {
					t.Fatalf("%v row %d: %.9g, llama.cpp %.9g", ti.Type, r, got, w)
				}
			}
		})
	}
	for _, typ := range []kernels.DType{kernels.F32, kernels.F16, kernels.BF16, kernels.Q8_0, kernels.Q4_0,
		kernels.Q4_1, kernels.Q5_0, kernels.Q5_1, kernels.Q2_K, kernels.Q3_K, kernels.Q4_K, kernels.Q5_K, kernels.Q6_K} {
		if !seen[typ] && !t.Failed() && opened == len(fx.Dots) {
			t.Errorf("the fixture has no %v product", typ)
		}
	}
}

// TestRMSNormMatchesLlamaCpp normalises a residual row of llama.cpp's and
// scales it by the layer's weight: llama.cpp's attn_norm, bit for bit.
func TestRMSNormMatchesLlamaCpp(t *testing.T) {
	c := loadOps(t).RMSNorm
	f := openShared(t, c.Model)
	ti, ok := f.Tensor(c.Weight)
	if !ok {
		t.Fatalf("no tensor %s", c.Weight)
	}
	w, err := f.TensorF32(ti)
	if err != nil {
		t.Fatal(err)
	}
	x, want := floatsOf(t, c.X), floatsOf(t, c.Want)
	got := make([]float32, len(x))
	kernels.RMSNorm(got, x, w, 1e-5)
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("[%d] = %.9g, llama.cpp %.9g", i, got[i], want[i])
		}
	}
}
