package sparse

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/ruvllm/ruvllm/kernels"
)

// TestStackIsTheEncodedRows checks Stack against Encode of the parts'
// row-major rows one after another, byte for byte, on part shapes such as
// a block's q, k, v (one wide, two narrow) and gate, up; and that the
// stack's product is each part's product.
func TestStackIsTheEncodedRows(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, dt := range layoutTypes {
		for _, rowsOf := range [][]int{{128, 32, 32}, {96, 96}, {64}} {
			cols := 96
			t.Run(fmt.Sprintf("%v/%v", dt, rowsOf), func(t *testing.T) {
				var parts []*Matrix
				var rowMajor []byte
				total := 0
				for _, rows := range rowsOf {
					w := randRowMajor(r, dt, rows, cols)
					parts = append(parts, encoded(dt, rows, cols, w))
					rowMajor = append(rowMajor, w...)
					total += rows
				}
				st, err := Stack(parts, make([]byte, StackBytes(parts)))
				if err != nil {
					t.Fatal(err)
				}
				want := make([]byte, len(rowMajor))
				Encode(dt, total, cols, rowMajor, want)
				if st.Rows != total || st.Cols != cols || !bytes.Equal(st.Data, want) {
					t.Fatalf("the stack (%d, %d) is not the encoded rows of its parts", st.Rows, st.Cols)
				}
				x := randInput(r, cols)
				var s Scratch
				s.Fit(st, 1, 1)
				got := make([]float32, total)
				st.MulVec(nil, x, 0.5, got, &s)
				at := 0
				for i, m := range parts {
					s.Fit(m, 1, 1)
					out := make([]float32, m.Rows)
					m.MulVec(nil, x, 0.5, out, &s)
					for k := range out {
						if d := out[k] - got[at+k]; d > 1e-5 || d < -1e-5 {
							t.Fatalf("part %d row %d: %g alone, %g in the stack", i, k, out[k], got[at+k])
						}
					}
					at += m.Rows
				}
			})
		}
	}
}

func TestStackRefusesPartsOfOtherInputs(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	a := encoded(kernels.Q8_0, 32, 64, randRowMajor(r, kernels.Q8_0, 32, 64))
	cases := map[string]*Matrix{
		"other columns":    encoded(kernels.Q8_0, 32, 96, randRowMajor(r, kernels.Q8_0, 32, 96)),
		"other format":     encoded(kernels.Q4_0, 32, 64, randRowMajor(r, kernels.Q4_0, 32, 64)),
		"other thresholds": func() *Matrix { m := *a; m.Thresholds = Table{0, 1, 2, 3}; return &m }(),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			parts := []*Matrix{a, b}
			if _, err := Stack(parts, make([]byte, StackBytes(parts))); err == nil {
				t.Fatal("Stack took parts that do not share an input")
			}
		})
	}
	if _, err := Stack([]*Matrix{a}, make([]byte, 3)); err == nil {
		t.Error("Stack wrote into a buffer of the wrong size")
	}
	if _, err := Stack(nil, nil); err == nil {
		t.Error("Stack made a stack of nothing")
	}
}
