package kernels

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
	"unsafe"
)

// llamaFixture holds values computed by llama.cpp (c392e509, its AVX2 CPU
// code, the build the ../shared references come from) and by glibc, stored
// by testdata/README.md's generator: the truths the ggml-exact kernels are
// held to, bit for bit.
type llamaFixture struct {
	RMSNorm struct {
		Model, Weight string
		X, Want       b64Floats
	} `json:"rms_norm"`
	SiLU struct {
		X, Want b64Floats
	} `json:"silu"`
	SwiGLU struct {
		Gate, Up, Want b64Floats
	} `json:"swiglu"`
	Softmax []struct {
		X, Want b64Floats
	} `json:"softmax"`
	Rope []struct {
		NeoX    bool    `json:"neox"`
		Base    float32 `json:"base"`
		Dims    int     `json:"dims"`
		HeadDim int     `json:"head_dim"`
		Pos     int     `json:"pos"`
		X, Want b64Floats
	} `json:"rope"`
	SinCos [][3]uint32 `json:"sincos"` // bits of x, sinf(x), cosf(x)
}

// b64Floats is a little-endian float32 array in base64.
type b64Floats []float32

func (f *b64Floats) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return err
	}
	*f = make([]float32, len(raw)/4)
	copy(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(*f))), len(raw)), raw)
	return nil
}

func loadLlamaFixture(t *testing.T) *llamaFixture {
	t.Helper()
	if !littleEndian {
		t.Skip("the fixture's floats are little-endian")
	}
	raw, err := os.ReadFile(filepath.Join("testdata", "llamacpp_ops.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f llamaFixture
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	return &f
}

// sameBits reports the first index where got and want differ in their bits.
func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s[%d] = %.9g, llama.cpp %.9g", what, i, got[i], want[i])
		}
	}
}

func TestSinCosMatchGlibc(t *testing.T) {
	f := loadLlamaFixture(t)
	if len(f.SinCos) < 40 {
		t.Fatalf("only %d sinf/cosf values", len(f.SinCos))
	}
	for _, c := range f.SinCos {
		x := math.Float32frombits(c[0])
		if s, co := math.Float32bits(sinf(x)), math.Float32bits(cosf(x)); s != c[1] || co != c[2] {
			t.Errorf("x = %g (%#08x): sinf %#08x cosf %#08x, glibc %#08x %#08x", x, c[0], s, co, c[1], c[2])
		}
	}
}

func TestRopeMatchesLlamaCpp(t *testing.T) {
	for _, c := range loadLlamaFixture(t).Rope {
		r := Rope{Dims: c.Dims, Base: c.Base, NeoX: c.NeoX}
		cos, sin := make([]float32, c.Dims/2), make([]float32, c.Dims/2)
		r.Angles(c.Pos, cos, sin)
		got := append([]float32(nil), c.X...)
		r.Apply(got, c.HeadDim, cos, sin)
		sameBits(t, "Apply", got, c.Want)
		twin := append([]float32(nil), c.X...)
		r.applyGo(twin, c.HeadDim, cos, sin)
		sameBits(t, "applyGo", twin, c.Want)
	}
}

func TestSoftmaxMatchesLlamaCpp(t *testing.T) {
	f := loadLlamaFixture(t)
	if len(f.Softmax) == 0 || len(f.Softmax[0].X)%8 == 0 {
		t.Fatal("the fixture should have rows with a partial group of 8")
	}
	for _, row := range f.Softmax {
		got := append([]float32(nil), row.X...)
		Softmax(got)
		sameBits(t, "Softmax", got, row.Want)
		twin := append([]float32(nil), row.X...)
		softmaxGo(twin)
		sameBits(t, "softmaxGo", twin, row.Want)
	}
}

func TestSiLUMatchesLlamaCpp(t *testing.T) {
	f := loadLlamaFixture(t)
	got := make([]float32, len(f.SiLU.X))
	SiLU(got, f.SiLU.X)
	sameBits(t, "SiLU", got, f.SiLU.Want)
	siluRowGo(got, f.SiLU.X, nil)
	sameBits(t, "siluRowGo", got, f.SiLU.Want)

	s := f.SwiGLU
	got = make([]float32, len(s.Gate))
	SwiGLU(got, s.Gate, s.Up)
	sameBits(t, "SwiGLU", got, s.Want)
	siluRowGo(got, s.Gate, s.Up)
	sameBits(t, "siluRowGo with up", got, s.Want)
}
