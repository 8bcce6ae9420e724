package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// rowCopier packs rows of a row-major matrix by copying them, so that
// MatMulPacked runs over the same bytes as MatMul.
type rowCopier struct {
	w    []byte
	wRow int
}

func (c *rowCopier) PackRows(r0, r1 int, dst []byte) {
	copy(dst, c.w[r0*c.wRow:r1*c.wRow])
}

func TestMatMulPackedMatchesMatMul(t *testing.T) {
	r := rand.New(rand.NewPCG(35, 36))
	pools := map[string]*Pool{"nil": nil, "threads=1": NewPool(1), "threads=3": NewPool(3)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	for _, dt := range []DType{F32, F16, Q8_0, Q4_0, Q4_K, Q6_K} {
		for _, n := range []int{1, 2, 7, 16, gemmTokChunk + 9} {
			t.Run(fmt.Sprintf("%v/n=%d", dt, n), func(t *testing.T) {
				cols := max(512, dt.BlockSize())
				rows := 2*packedChunk(dt, cols) + 37 // a partial last chunk
				w, _ := randMatrix(t, r, dt, rows, cols)
				x := randF32(r, n*cols, 1)
				want := make([]float32, n*rows)
				MatMul(nil, dt, w, rows, cols, x, n, want, make([]byte, MatScratchBytes(dt, cols, n)))
				for name, p := range pools {
					out := make([]float32, n*rows)
					src := &rowCopier{w: w, wRow: dt.RowBytes(cols)}
					MatMulPacked(p, dt, src, rows, cols, x, n, out, make([]byte, PackedScratchBytes(dt, cols, n, p.Size())))
					for i := range out {
						if out[i] != want[i] {
							t.Fatalf("%s: token %d row %d: %g, MatMul %g", name, i/rows, i%rows, out[i], want[i])
						}
					}
				}
			})
		}
	}
}
