//go:build amd64 && !purego

package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
)

// cpuLoop runs body as b.Loop does and also reports its thread CPU time per
// op and the MB/s on that time, which a machine shared with other jobs
// disturbs less than the clock's.
func cpuLoop(b *testing.B, bytes int64, body func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.SetBytes(bytes)
	c0, n := threadCPU(), 0
	for b.Loop() {
		body()
		n++
	}
	ns := float64(threadCPU()-c0) / float64(n)
	b.ReportMetric(ns, "cpu-ns/op")
	b.ReportMetric(float64(bytes)/ns*1e3, "cpu-MB/s")
}

// q8Gemv2Variants are the Q8_0 two-stream kernels to compare with the
// one-row gemvQ8_0 (nil).
var q8Gemv2Variants = []struct {
	name string
	g2   gemv2Kernel
}{{"gemv", nil}, {"avx2x2", gemvQ8_0x2}, {"vnnix2", vnniQ8Gemv2()}}

func vnniQ8Gemv2() gemv2Kernel {
	if !vnni {
		return nil
	}
	return gemvQ8_0Vx2
}

// TestGemvQ8_0Vx2EveryScale checks the VNNI two-stream kernel against
// gemvQ8_0 bit for bit with weight scales of every half value (subnormal,
// infinite, NaN too) and quants of the whole int8 range.
func TestGemvQ8_0Vx2EveryScale(t *testing.T) {
	if !vnni {
		t.Skip("no AVX-512 VNNI")
	}
	r := rand.New(rand.NewPCG(7, 8))
	const nb, rows = 4, 1 << 14 // 4 scales a row: all 65536 halves
	rb := nb * 34
	w := make([]byte, 2*rows*rb)
	for i := range w {
		w[i] = byte(r.Uint32())
	}
	for i := range 2 * rows * nb {
		h := uint16(i % (1 << 16))
		w[i*34], w[i*34+1] = byte(h), byte(h>>8)
	}
	_, _, a, _ := gemmOperands(r, Q8_0, 1, nb*QK, 0, 1, 0)
	want := make([]float32, 2*rows)
	gemvQ8_0(nb, &w[0], rb, &a[0], &want[0], 2*rows)
	got := make([]float32, 2*rows)
	gemvQ8_0Vx2(nb, &w[0], &w[rows*rb], rb, &a[0], &got[0], &got[rows], rows)
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("row %d: %x, gemvQ8_0 %x", i, math.Float32bits(got[i]), math.Float32bits(want[i]))
		}
	}
}

// BenchmarkDecodeQ8_0 times MatMul of one token through a Q8_0 matrix of
// 2880 columns (gpt-oss's output projection) on one thread, in cache (1024
// rows) and from memory (201088 rows, 615 MB), with the one-row gemv
// kernel alone and with each two-stream kernel.
func BenchmarkDecodeQ8_0(b *testing.B) {
	f := gemmFormats[Q8_0]
	if f == nil {
		b.Skip("no Q8_0 kernels")
	}
	const cols = 2880
	saved := f.gemv2
	defer func() { f.gemv2 = saved }()
	for _, rows := range []int{1024, 201088} {
		rng := rand.New(rand.NewPCG(1, 2))
		w := benchFill(Q8_0, rows, cols)
		x := randomRow(rng, cols)
		out := make([]float32, rows)
		scratch := make([]byte, MatScratchBytes(Q8_0, cols, 1))
		for _, k := range q8Gemv2Variants {
			if k.name != "gemv" && k.g2 == nil {
				continue
			}
			b.Run(fmt.Sprintf("rows=%d/%s", rows, k.name), func(b *testing.B) {
				f.gemv2 = k.g2
				cpuLoop(b, int64(len(w)), func() {
					MatMul(nil, Q8_0, w, rows, cols, x, 1, out, scratch)
				})
			})
		}
	}
}

// BenchmarkGemvQ8_0Variants times the Q8_0 gemv kernels alone on a matrix
// in cache (compute speed).
func BenchmarkGemvQ8_0Variants(b *testing.B) {
	r := rand.New(rand.NewPCG(45, 46))
	const rows, cols = 48, 2048
	w, ws, a, _ := gemmOperands(r, Q8_0, rows, cols, 0, 1, 0)
	out := make([]float32, rows)
	nb, h := cols/QK, rows/2
	for _, k := range q8Gemv2Variants {
		if k.name != "gemv" && k.g2 == nil {
			continue
		}
		b.Run(k.name, func(b *testing.B) {
			if k.g2 == nil {
				cpuLoop(b, int64(len(w)), func() {
					gemvQ8_0(nb, &w[0], ws, &a[0], &out[0], rows)
				})
			} else {
				cpuLoop(b, int64(len(w)), func() {
					k.g2(nb, &w[0], &w[h*ws], ws, &a[0], &out[0], &out[h], h)
				})
			}
		})
	}
}

// BenchmarkGemvQ8_0VariantsDRAM times the Q8_0 gemv kernels alone on a
// matrix from memory: gpt-oss's 201088x2880 output projection (615 MB),
// the two-stream kernels on its two halves as the decode runs them.
func BenchmarkGemvQ8_0VariantsDRAM(b *testing.B) {
	const rows, cols = 201088, 2880
	w := benchFill(Q8_0, rows, cols)
	ws := Q8_0.RowBytes(cols)
	_, _, a, _ := gemmOperands(rand.New(rand.NewPCG(1, 2)), Q8_0, 1, cols, 0, 1, 0)
	out := make([]float32, rows)
	nb, h := cols/QK, rows/2
	for _, k := range q8Gemv2Variants {
		if k.name != "gemv" && k.g2 == nil {
			continue
		}
		b.Run(k.name, func(b *testing.B) {
			if k.g2 == nil {
				cpuLoop(b, int64(len(w)), func() {
					gemvQ8_0(nb, &w[0], ws, &a[0], &out[0], rows)
				})
			} else {
				cpuLoop(b, int64(len(w)), func() {
					k.g2(nb, &w[0], &w[h*ws], ws, &a[0], &out[0], &out[h], h)
				})
			}
		})
	}
}
