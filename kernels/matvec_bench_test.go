package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// The model-shaped benchmarks run the mat-vecs (decode) and mat-muls
// (prefill) of whole llama models at their real sizes, so their speed can be
// set against llama-bench's tg and pp on files of the same shape. Only the
// linear layers are timed: attention, norms and RoPE are left out.

// benchShape is the size of a llama model.
type benchShape struct {
	name                                    string
	dim, layers, heads, kvHeads, ffn, vocab int
}

var benchShapes = []benchShape{
	{"llama-134m", 768, 12, 12, 12, 2048, 32000},
	{"tinyllama-1.1b", 2048, 22, 32, 4, 5632, 32000},
}

// benchFileType gives the format of each linear layer of a model file type,
// after llama.cpp's mixes: the output projection is Q6_K in the 4-bit types,
// and Q4_K_M gives attn_v and ffn_down Q6_K in the first and last eighth of
// the layers and in every third layer between.
type benchFileType struct {
	name   string
	typeOf func(kind string, layer, layers int) DType
}

var benchFileTypes = []benchFileType{
	{"Q4_0", func(kind string, _, _ int) DType {
		if kind == "output" {
			return Q6_K
		}
		return Q4_0
	}},
	{"Q4_K_M", func(kind string, l, n int) DType {
		moreBits := l < n/8 || l >= 7*n/8 || (l-n/8)%3 == 2
		if kind == "output" || (kind == "v" || kind == "down") && moreBits {
			return Q6_K
		}
		return Q4_K
	}},
	{"Q8_0", func(string, int, int) DType { return Q8_0 }},
	{"F16", func(string, int, int) DType { return F16 }},
}

// benchMatrix is one linear layer: (rows, cols) weights of type t.
type benchMatrix struct {
	kind       string
	t          DType
	rows, cols int
	w          []byte
}

// benchPatterns caches a few random quantized rows per (type, cols), which
// fill the benchmark matrices: their speed does not depend on the values,
// and quantizing gigabytes would take minutes.
var benchPatterns = map[[2]int][]byte{}

const benchPatternRows = 61 // odd, so that copies do not line up with row blocks

func benchFill(t DType, rows, cols int) []byte {
	rb := t.RowBytes(cols)
	key := [2]int{int(t), cols}
	pat, ok := benchPatterns[key]
	if !ok {
		r := rand.New(rand.NewPCG(uint64(t), uint64(cols)))
		tr, _ := TraitsOf(t)
		pat = make([]byte, benchPatternRows*rb)
		for i := range benchPatternRows {
			tr.QuantizeRow(randomRow(r, cols), pat[i*rb:(i+1)*rb])
		}
		benchPatterns[key] = pat
	}
	w := make([]byte, rows*rb)
	for off := 0; off < len(w); off += len(pat) {
		copy(w[off:], pat)
	}
	return w
}

// benchLayers builds the linear layers of shape s in file type ft: the
// matrices of the first nAlloc blocks (enough to exceed the caches; later
// blocks reuse them) and the output projection.
func benchLayers(s benchShape, ft benchFileType, nAlloc int) (blocks [][]benchMatrix, output benchMatrix) {
	hd := s.dim / s.heads
	for l := range nAlloc {
		var ms []benchMatrix
		for _, m := range []struct {
			kind       string
			rows, cols int
		}{
			{"q", s.heads * hd, s.dim}, {"k", s.kvHeads * hd, s.dim}, {"v", s.kvHeads * hd, s.dim},
			{"o", s.dim, s.heads * hd},
			{"gate", s.ffn, s.dim}, {"up", s.ffn, s.dim}, {"down", s.dim, s.ffn},
		} {
			t := ft.typeOf(m.kind, l, s.layers)
			ms = append(ms, benchMatrix{m.kind, t, m.rows, m.cols, benchFill(t, m.rows, m.cols)})
		}
		blocks = append(blocks, ms)
	}
	t := ft.typeOf("output", 0, s.layers)
	return blocks, benchMatrix{"output", t, s.vocab, s.dim, benchFill(t, s.vocab, s.dim)}
}

// benchModelBytes is the weight bytes one token reads: every block's linear
// layers and the output projection (the embedding row is negligible).
func benchModelBytes(s benchShape, ft benchFileType) int64 {
	hd := s.dim / s.heads
	var n int64
	for l := range s.layers {
		for _, m := range []struct {
			kind       string
			rows, cols int
		}{
			{"q", s.heads * hd, s.dim}, {"k", s.kvHeads * hd, s.dim}, {"v", s.kvHeads * hd, s.dim},
			{"o", s.dim, s.heads * hd}, {"gate", s.ffn, s.dim}, {"up", s.ffn, s.dim}, {"down", s.dim, s.ffn},
		} {
			n += int64(m.rows * ft.typeOf(m.kind, l, s.layers).RowBytes(m.cols))
		}
	}
	return n + int64(s.vocab*ft.typeOf("output", 0, s.layers).RowBytes(s.dim))
}

// benchAllocLayers is how many blocks to allocate: all of them, or enough
// for 320 MB of weights.
func benchAllocLayers(s benchShape, ft benchFileType) int {
	per := benchModelBytes(s, ft) / int64(s.layers)
	return int(min(int64(s.layers), (320<<20+per-1)/per))
}

// BenchmarkDecode runs the linear layers of one token of each model shape
// and file type: 7 mat-vecs per block and the output projection. It reports
// tokens/s and the weight bytes streamed per second.
func BenchmarkDecode(b *testing.B) {
	for _, s := range benchShapes {
		for _, ft := range benchFileTypes {
			for _, threads := range []int{1, 2} {
				b.Run(fmt.Sprintf("%s/%s/threads=%d", s.name, ft.name, threads), func(b *testing.B) {
					benchDecode(b, s, ft, threads)
				})
			}
		}
	}
}

func benchDecode(b *testing.B, s benchShape, ft benchFileType, threads int) {
	blocks, output := benchLayers(s, ft, benchAllocLayers(s, ft))
	width := max(s.dim, s.ffn, s.vocab)
	r := rand.New(rand.NewPCG(1, 2))
	x, out := randF32(r, width, 1), make([]float32, width)
	scratch := make([]byte, benchScratch(blocks, output, 1))
	p := NewPool(threads)
	defer p.Close()
	run := func(m *benchMatrix) {
		MatVec(p, m.t, m.w, m.rows, m.cols, x[:m.cols], out[:m.rows], scratch)
	}
	b.ResetTimer()
	for b.Loop() {
		for l := range s.layers {
			for i := range blocks[l%len(blocks)] {
				run(&blocks[l%len(blocks)][i])
			}
		}
		run(&output)
	}
	sec := b.Elapsed().Seconds()
	b.ReportMetric(float64(b.N)/sec, "tok/s")
	b.ReportMetric(float64(benchModelBytes(s, ft))*float64(b.N)/sec/1e9, "GB/s")
}

func benchScratch(blocks [][]benchMatrix, output benchMatrix, n int) int {
	need := MatScratchBytes(output.t, output.cols, n)
	for _, ms := range blocks {
		for _, m := range ms {
			need = max(need, MatScratchBytes(m.t, m.cols, n))
		}
	}
	return need
}

// BenchmarkPrefill runs the linear layers of a prompt of n tokens through
// each model shape and file type, one block per iteration (blocks in turn),
// and reports the prompt tokens/s of the whole model that this implies:
// n / (layers · time per block), the output projection of the last token
// being negligible. It also reports the multiply-adds per second.
func BenchmarkPrefill(b *testing.B) {
	for _, s := range benchShapes {
		for _, ft := range benchFileTypes {
			for _, n := range []int{8, 128, 512} {
				for _, threads := range []int{1, 2} {
					b.Run(fmt.Sprintf("%s/%s/n=%d/threads=%d", s.name, ft.name, n, threads), func(b *testing.B) {
						benchPrefill(b, s, ft, n, threads)
					})
				}
			}
		}
	}
}

func benchPrefill(b *testing.B, s benchShape, ft benchFileType, n, threads int) {
	blocks, output := benchLayers(s, ft, benchAllocLayers(s, ft))
	width := max(s.dim, s.ffn)
	r := rand.New(rand.NewPCG(3, 4))
	x, out := randF32(r, n*width, 1), make([]float32, n*width)
	scratch := make([]byte, benchScratch(blocks, output, n))
	p := NewPool(threads)
	defer p.Close()
	var macs int64
	for _, m := range blocks[0] {
		macs += int64(m.rows * m.cols * n)
	}
	b.ResetTimer()
	l := 0
	for b.Loop() {
		for i := range blocks[l] {
			m := &blocks[l][i]
			MatMul(p, m.t, m.w, m.rows, m.cols, x[:n*m.cols], n, out[:n*m.rows], scratch)
		}
		l = (l + 1) % len(blocks)
	}
	perBlock := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(float64(n)/(perBlock*float64(s.layers)), "tok/s")
	b.ReportMetric(float64(macs)/perBlock/1e9, "GMAC/s")
}
