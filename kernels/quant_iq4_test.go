package kernels

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// iq4Fixture is testdata/ggml_iq4.json (README.md there): rows of weights
// quantized, dequantized and multiplied by ggml itself.
type iq4Fixture struct {
	Rows, Cols, Tokens int
	Weights, X         b64Floats
	Types              []struct {
		Type               string
		Quantized          b64Bytes
		Dequantized        b64Floats
		Buffer             string
		Product1, ProductN b64Floats
	}
}

// b64Bytes is a byte array in base64.
type b64Bytes []byte

func (b *b64Bytes) UnmarshalJSON(raw []byte) error {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return err
	}
	var err error
	*b, err = base64.StdEncoding.DecodeString(s)
	return err
}

// TestIQ4MatchesGGML holds the IQ4_NL, IQ4_XS and MXFP4 kernels to ggml's
// outputs bit for bit: the bytes its quantizer writes (llama-quantize's,
// without an importance matrix), its dequantized floats, and the products
// of its CPU backend for one token and for several (IQ4_NL and MXFP4 in
// the repacked layout ggml multiplies them in, IQ4_XS by its vec_dot), with
// the assembly kernels and the pure-Go twins alike.
func TestIQ4MatchesGGML(t *testing.T) {
	if !littleEndian {
		t.Skip("the fixture's floats are little-endian")
	}
	raw, err := os.ReadFile(filepath.Join("testdata", "ggml_iq4.json"))
	if err != nil {
		t.Fatal(err)
	}
	var fx iq4Fixture
	if err := json.Unmarshal(raw, &fx); err != nil {
		t.Fatal(err)
	}
	rows, cols := fx.Rows, fx.Cols
	generic := map[DType]func(n int, w, a []byte) float32{
		IQ4_NL: vecDotIQ4_NLGeneric, IQ4_XS: vecDotIQ4_XSGeneric, MXFP4: vecDotMXFP4Generic,
	}
	for _, c := range fx.Types {
		typ, ok := ParseDType(c.Type)
		if !ok {
			t.Fatalf("unknown type %s", c.Type)
		}
		t.Run(c.Type, func(t *testing.T) {
			tr, _ := TraitsOf(typ)
			rb := typ.RowBytes(cols)
			q := make([]byte, rows*rb)
			for r := range rows {
				tr.QuantizeRow(fx.Weights[r*cols:(r+1)*cols], q[r*rb:(r+1)*rb])
			}
			for i := range q {
				if q[i] != c.Quantized[i] {
					t.Fatalf("quantized byte %d (row %d) = %#x, ggml %#x", i, i/rb, q[i], c.Quantized[i])
				}
			}
			deq := make([]float32, cols)
			for r := range rows {
				tr.DequantizeRow(q[r*rb:(r+1)*rb], deq)
				sameBits(t, "dequantized row", deq, c.Dequantized[r*cols:(r+1)*cols])
			}
			a := make([]byte, tr.VecDotType.RowBytes(cols))
			for tok := range fx.Tokens {
				QuantizeActivations(tr.VecDotType, fx.X[tok*cols:(tok+1)*cols], a)
				for r := range rows {
					want := c.ProductN[tok*rows+r]
					if tok == 0 && math.Float32bits(c.Product1[r]) != math.Float32bits(want) {
						t.Fatalf("ggml's products of one and of several tokens differ at row %d", r)
					}
					w := q[r*rb : (r+1)*rb]
					for name, dot := range map[string]func(int, []byte, []byte) float32{"VecDot": tr.VecDot, "Go": generic[typ]} {
						if got := dot(cols, w, a); math.Float32bits(got) != math.Float32bits(want) {
							t.Fatalf("%s token %d row %d: %.9g, ggml %.9g", name, tok, r, got, want)
						}
					}
				}
			}
		})
	}
}
