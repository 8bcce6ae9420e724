package kernels

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
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
		ProductE           b64Floats // each token alone (MUL_MAT_ID's way)
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
			// MatMul and ExpertMatMul of all the tokens at once (IQ4_NL and
			// MXFP4: 4 of them by the 4-token kernels, where they run).
			for _, mul := range []func(*Pool, DType, []byte, int, int, []float32, int, []float32, []byte){MatMul, ExpertMatMul} {
				for _, p := range []*Pool{nil, NewPool(2)} {
					out := make([]float32, fx.Tokens*rows)
					mul(p, typ, q, rows, cols, fx.X[:fx.Tokens*cols], fx.Tokens, out, make([]byte, MatScratchBytes(typ, cols, fx.Tokens)))
					sameBits(t, fmt.Sprintf("product of %d tokens", fx.Tokens), out, c.ProductN)
					if p != nil {
						p.Close()
					}
				}
			}
		})
	}
}

// TestExpertMatMulMatchesGGML holds MatMulRecent and ExpertMatMul to
// recent ggml's products (testdata/ggml_recent.json, README.md there) bit
// for bit, on one pool thread and two: MatMulRecent to its matrix products
// of one token and of nine (Q4_K repacked: its gemv, and its gemm of 4
// tokens twice then its gemv; IQ4_XS by vec_dot, and its IQ panel; F32 and
// F16 by vec_dot, and tinyBLAS), ExpertMatMul to its products of each
// token alone (as its mixtures of experts take them: Q4_K's gemv and
// vec_dot for every token), and to its IQ panel for nine IQ4_XS tokens.
func TestExpertMatMulMatchesGGML(t *testing.T) {
	if !littleEndian {
		t.Skip("the fixture's floats are little-endian")
	}
	raw, err := os.ReadFile(filepath.Join("testdata", "ggml_recent.json"))
	if err != nil {
		t.Fatal(err)
	}
	var fx iq4Fixture
	if err := json.Unmarshal(raw, &fx); err != nil {
		t.Fatal(err)
	}
	rows, cols, n := fx.Rows, fx.Cols, fx.Tokens
	for _, c := range fx.Types {
		typ, _ := ParseDType(c.Type)
		t.Run(c.Type, func(t *testing.T) {
			if string(c.Quantized) != string(quantizeRows(typ, fx.Weights, rows, cols)) {
				t.Fatal("the quantized weights differ from ggml's")
			}
			expert := c.ProductE
			if typ == IQ4_XS {
				expert = c.ProductN // the panel, for an expert of 8 tokens or more
			}
			for _, cs := range []struct {
				name   string
				mul    func(p *Pool, t DType, w []byte, rows, cols int, x []float32, n int, out []float32, scratch []byte)
				tokens int
				want   []float32
			}{
				{"MatMulRecent", MatMulRecent, 1, c.Product1},
				{"MatMulRecent", MatMulRecent, n, c.ProductN},
				{"ExpertMatMul", ExpertMatMul, 1, c.ProductE[:rows]},
				{"ExpertMatMul", ExpertMatMul, n, expert},
			} {
				for _, p := range []*Pool{nil, NewPool(2)} {
					out := make([]float32, cs.tokens*rows)
					cs.mul(p, typ, c.Quantized, rows, cols, fx.X[:cs.tokens*cols], cs.tokens, out, make([]byte, MatScratchBytes(typ, cols, cs.tokens)))
					sameBits(t, fmt.Sprintf("%s of %d tokens", cs.name, cs.tokens), out, cs.want)
					if p != nil {
						p.Close()
					}
				}
			}
			if typ != Q4_K && typ != IQ4_XS {
				return
			}
			tr, _ := TraitsOf(typ)
			a := make([]byte, tr.VecDotType.RowBytes(cols))
			rb := typ.RowBytes(cols)
			twins := map[DType][2]func(int, []byte, []byte) float32{
				Q4_K:   {vecDotQ4_KGemmGeneric, vecDotQ4_KRepackGeneric},
				IQ4_XS: {vecDotIQ4_XSPanelGeneric, vecDotIQ4_XSPanelGeneric},
			}[typ]
			for tok := range n {
				QuantizeActivations(tr.VecDotType, fx.X[tok*cols:(tok+1)*cols], a)
				for r := range rows {
					w := c.Quantized[r*rb : (r+1)*rb]
					gemm := twins[0]
					if tok >= n-n%4 {
						gemm = twins[1] // the gemv of the tokens past the last 4
					}
					if got, want := gemm(cols, w, a), c.ProductN[tok*rows+r]; math.Float32bits(got) != math.Float32bits(want) {
						t.Fatalf("pure Go, token %d row %d: %.9g, ggml %.9g", tok, r, got, want)
					}
					if typ == Q4_K {
						if got, want := twins[1](cols, w, a), c.ProductE[tok*rows+r]; math.Float32bits(got) != math.Float32bits(want) {
							t.Fatalf("pure Go gemv, token %d row %d: %.9g, ggml %.9g", tok, r, got, want)
						}
					}
				}
			}
		})
	}
}

// quantizeRows quantizes rows of x to t.
func quantizeRows(t DType, x []float32, rows, cols int) []byte {
	tr, _ := TraitsOf(t)
	rb := t.RowBytes(cols)
	q := make([]byte, rows*rb)
	for r := range rows {
		tr.QuantizeRow(x[r*cols:(r+1)*cols], q[r*rb:(r+1)*rb])
	}
	return q
}
