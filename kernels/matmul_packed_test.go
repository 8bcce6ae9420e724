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
	for _, dt := range []DType{F32, F16, Q8_0, Q4_0, Q4_K, Q6_K, IQ4_NL, MXFP4} {
		for _, c := range []struct{ n, chunks int }{{1, 2}, {2, 2}, {7, 2}, {16, 2}, {gemmTokChunk + 9, 2}, {3, 11}} {
			n := c.n
			t.Run(fmt.Sprintf("%v/n=%d/chunks=%d", dt, n, c.chunks), func(t *testing.T) {
				cols := max(512, dt.BlockSize())
				rows := c.chunks*packedChunk(dt, cols) + 37 // a partial last chunk; with 11, whole chunks before the guided tail
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

func TestPackedPlanCoversEveryRow(t *testing.T) {
	for _, chunk := range []int{64, 128, 256} {
		for _, rows := range []int{1, 31, 64, 256, 300, 2048, 5632, 32000, 152064} {
			for _, workers := range []int{1, 2, 3, 8, 64} {
				t.Run(fmt.Sprintf("chunk=%d/rows=%d/workers=%d", chunk, rows, workers), func(t *testing.T) {
					j := packedJob{rows: rows, chunk: chunk}
					n := j.plan(workers)
					if j.nTail > maxPackedTail {
						t.Fatalf("%d tail tasks, at most %d", j.nTail, maxPackedTail)
					}
					next := 0
					for task := range n {
						r0, r1 := j.span(task)
						switch {
						case r0 != next:
							t.Fatalf("task %d starts at row %d, want %d", task, r0, next)
						case r1 <= r0 || r1-r0 > chunk:
							t.Fatalf("task %d has rows [%d, %d): not 1..%d rows", task, r0, r1, chunk)
						case r1 != rows && r1%32 != 0:
							t.Fatalf("task %d ends at row %d, not a multiple of 32", task, r1)
						}
						next = r1
					}
					if next != rows {
						t.Fatalf("tasks cover %d of %d rows", next, rows)
					}
				})
			}
		}
	}
}
