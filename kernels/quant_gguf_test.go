package kernels_test

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ruvllm/ruvllm/internal/shared"
	"github.com/ruvllm/ruvllm/kernels"
	"github.com/ruvllm/ruvllm/models/gguf"
)

// The mini-llama files were written by llama.cpp's llama-quantize from
// mini-llama-F32.gguf; each holds a mix of formats (norms stay F32, the output
// and some FFN tensors get a larger type). These tests check our kernels on
// every tensor of every file against the F32 originals.

var miniFiles = []string{"F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1",
	"Q2_K", "Q3_K_M", "Q4_K_M", "Q5_K_M", "Q6_K", "Q4_K-pure", "Q6_K-pure"}

func openMini(t *testing.T, name string) *gguf.File {
	t.Helper()
	f, err := gguf.Open(shared.Path(t, "models", "mini", "mini-llama-"+name+".gguf"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// levels is the number of quantization steps across a block's range, the
// bits of the format.
var levels = map[kernels.DType]float64{
	kernels.F16: 2048, kernels.BF16: 256, kernels.Q8_0: 255, kernels.Q4_0: 15, kernels.Q4_1: 15,
	kernels.Q5_0: 31, kernels.Q5_1: 31, kernels.Q2_K: 3, kernels.Q3_K: 7, kernels.Q4_K: 15,
	kernels.Q5_K: 31, kernels.Q6_K: 63,
}

// maxSteps is the largest error allowed for one element, in quantization
// steps of its (sub-)block: half a step where the grid covers the block
// exactly; more where the grid is asymmetric (Q4_0/Q5_0 leave the far end one
// step short) or the scale and min are fitted by least squares rather than to
// the extremes (k-quants clip outliers and quantize their sub-block scales to
// 4-6 bits).
var maxSteps = map[kernels.DType]float64{
	kernels.F16: 0.51, kernels.BF16: 0.51, kernels.Q8_0: 0.6, kernels.Q4_1: 0.6, kernels.Q5_1: 0.6,
	kernels.Q4_0: 1.05, kernels.Q5_0: 1.05,
	kernels.Q2_K: 1.5, kernels.Q3_K: 1.5, kernels.Q4_K: 1.5, kernels.Q5_K: 1.5, kernels.Q6_K: 1.2,
}

// subBlock is the number of weights that share one scale.
func subBlock(t kernels.DType) int {
	switch t {
	case kernels.F16, kernels.BF16:
		return 1
	case kernels.Q2_K, kernels.Q3_K, kernels.Q6_K:
		return 16
	}
	return 32
}

// stepOf is a format's quantization step for a sub-block x: its range over
// the number of levels (for the floats, a relative step of the element).
func stepOf(t kernels.DType, x []float32) float64 {
	lo, hi := float64(x[0]), float64(x[0])
	for _, v := range x {
		lo, hi = min(lo, float64(v)), max(hi, float64(v))
	}
	switch t {
	case kernels.F16, kernels.BF16:
		return math.Abs(float64(x[0])) * 2 / levels[t]
	case kernels.Q4_0, kernels.Q5_0, kernels.Q8_0, kernels.Q3_K, kernels.Q6_K:
		a := max(math.Abs(lo), math.Abs(hi)) // symmetric grids span ±amax
		return 2 * a / levels[t]
	case kernels.Q2_K, kernels.Q4_K, kernels.Q5_K:
		lo = min(lo, 0) // the min is never positive
	}
	return (hi - lo) / levels[t]
}

func rmse(x, y []float32) float64 {
	var s float64
	for i := range x {
		d := float64(x[i]) - float64(y[i])
		s += d * d
	}
	return math.Sqrt(s / float64(len(x)))
}

// TestDequantizeLlamaCppFiles dequantizes every tensor of every mini file and
// compares it element by element with the F32 original, each error bounded by
// a number of quantization steps of its sub-block.
func TestDequantizeLlamaCppFiles(t *testing.T) {
	ref := openMini(t, "F32")
	for _, name := range miniFiles {
		t.Run(name, func(t *testing.T) {
			f := openMini(t, name)
			worstOf := map[kernels.DType]float64{} // largest error in steps, per format
			for i := range f.Tensors {
				ti := &f.Tensors[i]
				ri, ok := ref.Tensor(ti.Name)
				if !ok {
					t.Fatalf("tensor %s is not in the F32 file", ti.Name)
				}
				want, err := ref.TensorF32(ri)
				if err != nil {
					t.Fatal(err)
				}
				tr, ok := kernels.TraitsOf(ti.Type)
				if !ok {
					t.Fatalf("%s: no traits for %v", ti.Name, ti.Type)
				}
				got := make([]float32, ti.Elements())
				tr.DequantizeRow(f.TensorData(ti), got)
				if ti.Type == kernels.F32 {
					if !equalF32(got, want) {
						t.Errorf("%s: F32 tensor differs", ti.Name)
					}
					continue
				}
				sb := subBlock(ti.Type)
				worst := 0.0
				for b := 0; b < len(want); b += sb {
					step := stepOf(ti.Type, want[b:b+sb])
					for j := b; j < b+sb; j++ {
						e := math.Abs(float64(got[j]) - float64(want[j]))
						if e > maxSteps[ti.Type]*step+1e-7 {
							t.Fatalf("%s (%v) element %d: %g, want %g: error %.3g is %.2f steps of %.3g",
								ti.Name, ti.Type, j, got[j], want[j], e, e/step, step)
						}
						if step > 0 {
							worst = max(worst, e/step)
						}
					}
				}
				worstOf[ti.Type] = max(worstOf[ti.Type], worst)
			}
			t.Logf("largest error in quantization steps: %v", worstOf)
		})
	}
}

func equalF32(a, b []float32) bool {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return len(a) == len(b)
}

// TestQuantizeMatchesLlamaCpp quantizes every F32 original to the format the
// file holds it in and requires llama.cpp's bytes: our quantizers follow
// ggml's reference quantizers (those llama-quantize uses without an importance
// matrix) rounding for rounding. For the k-quants a mismatch also reports how
// our error compares with theirs, and an error more than 5% above theirs is
// reported on its own: a C compiler that fuses multiply-adds could flip rare
// roundings, which would excuse a few differing blocks but not a worse fit.
func TestQuantizeMatchesLlamaCpp(t *testing.T) {
	ref := openMini(t, "F32")
	for _, name := range miniFiles {
		t.Run(name, func(t *testing.T) {
			f := openMini(t, name)
			for i := range f.Tensors {
				ti := &f.Tensors[i]
				if ti.Type == kernels.F32 {
					continue
				}
				ri, _ := ref.Tensor(ti.Name)
				x, err := ref.TensorF32(ri)
				if err != nil {
					t.Fatal(err)
				}
				tr, _ := kernels.TraitsOf(ti.Type)
				theirs := f.TensorData(ti)
				ours := make([]byte, len(theirs))
				rowLen := int(ti.Dims[0])
				rowBytes := ti.Type.RowBytes(rowLen)
				for r := 0; r < int(ti.Rows()); r++ {
					tr.QuantizeRow(x[r*rowLen:(r+1)*rowLen], ours[r*rowBytes:(r+1)*rowBytes])
				}
				if bytes.Equal(ours, theirs) {
					continue
				}
				nblocks := len(theirs) / ti.Type.BlockBytes()
				yo, yt := make([]float32, len(x)), make([]float32, len(x))
				tr.DequantizeRow(ours, yo)
				tr.DequantizeRow(theirs, yt)
				eo, et := rmse(x, yo), rmse(x, yt)
				t.Errorf("%s (%v): %d of %d blocks differ from llama.cpp's; RMSE vs F32 ours %.5g, llama.cpp %.5g",
					ti.Name, ti.Type, nblocks-sameBlocks(ti.Type, ours, theirs), nblocks, eo, et)
				if eo > 1.05*et {
					t.Errorf("%s (%v): our RMSE is more than 5%% above llama.cpp's", ti.Name, ti.Type)
				}
			}
		})
	}
}

func sameBlocks(t kernels.DType, a, b []byte) int {
	bs, n := t.BlockBytes(), 0
	for i := 0; i+bs <= len(a); i += bs {
		if bytes.Equal(a[i:i+bs], b[i:i+bs]) {
			n++
		}
	}
	return n
}

// TestVecDotLlamaCppFiles takes rows of every quantized tensor as llama.cpp
// wrote them and checks VecDot against random activations (quantized to the
// vec dot type) with the float dot of the dequantized operands.
func TestVecDotLlamaCppFiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, name := range miniFiles {
		t.Run(name, func(t *testing.T) {
			f := openMini(t, name)
			for i := range f.Tensors {
				ti := &f.Tensors[i]
				tr, _ := kernels.TraitsOf(ti.Type)
				at, _ := kernels.TraitsOf(tr.VecDotType)
				n := int(ti.Dims[0])
				if n%tr.VecDotType.BlockSize() != 0 {
					continue
				}
				rowBytes := ti.Type.RowBytes(n)
				data := f.TensorData(ti)
				act := make([]float32, n)
				for j := range act {
					act[j] = float32(rng.NormFloat64())
				}
				a := make([]byte, tr.VecDotType.RowBytes(n))
				kernels.QuantizeActivations(tr.VecDotType, act, a)
				af := make([]float32, n)
				at.DequantizeRow(a, af)
				wf := make([]float32, n)
				for _, r := range []int{0, int(ti.Rows()) / 2, int(ti.Rows()) - 1} {
					w := data[r*rowBytes : (r+1)*rowBytes]
					tr.DequantizeRow(w, wf)
					var want, mag float64
					for j := range wf {
						want += float64(wf[j]) * float64(af[j])
						mag += math.Abs(float64(wf[j]) * float64(af[j]))
					}
					got := float64(tr.VecDot(n, w, a))
					tol := 1e-5 * mag
					if ti.Type == kernels.Q4_1 || ti.Type == kernels.Q5_1 {
						tol = 2e-3 * mag // their min term uses the activations' half-precision block sums
					}
					if math.Abs(got-want) > tol {
						t.Errorf("%s (%v) row %d: VecDot %g, dequantized dot %g", ti.Name, ti.Type, r, got, want)
					}
				}
			}
		})
	}
}

func Example() {
	x := []float32{0.5, -1, 0.25, 2}
	x = append(x, make([]float32, 28)...) // one Q8_0 block of 32
	tr, _ := kernels.TraitsOf(kernels.Q8_0)
	w := make([]byte, kernels.Q8_0.RowBytes(len(x)))
	tr.QuantizeRow(x, w)
	a := make([]byte, kernels.Q8_0.RowBytes(len(x)))
	kernels.QuantizeActivations(tr.VecDotType, x, a)
	// Σx² is 5.3125; both operands are rounded to steps of 2/127.
	fmt.Printf("%.3f\n", tr.VecDot(len(x), w, a))
	// Output: 5.333
}
