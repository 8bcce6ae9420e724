package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// kvCache is a test cache of ctx positions in a's format, (ctx, KVHeads,
// HeadDim), with the float values it holds for the reference.
type kvCache struct {
	k, v   []byte
	kf, vf []float64
}

func makeCache(r *rand.Rand, a Attention, ctx, spare int) kvCache {
	n := ctx * a.KVHeads * a.HeadDim
	total := (ctx + spare) * a.KVHeads * a.HeadDim
	c := kvCache{kf: make([]float64, n), vf: make([]float64, n)}
	fill := func(dst []float64) []byte {
		switch a.KV {
		case F32:
			buf := make([]float32, total)
			for i := range buf {
				buf[i] = float32(math.NaN()) // positions past ctx must never be read
			}
			for i := range n {
				buf[i] = r.Float32()*2 - 1
				dst[i] = float64(buf[i])
			}
			return unsafe.Slice((*byte)(unsafe.Pointer(&buf[0])), 4*total)
		default:
			buf := make([]uint16, total)
			for i := range buf {
				buf[i] = 0x7e00 // NaN
			}
			for i := range n {
				buf[i] = FP32ToFP16(r.Float32()*2 - 1)
				dst[i] = float64(FP16ToFP32(buf[i]))
			}
			return unsafe.Slice((*byte)(unsafe.Pointer(&buf[0])), 2*total)
		}
	}
	c.k, c.v = fill(c.kf), fill(c.vf)
	return c
}

// attendRef is causal grouped-query attention in float64.
func attendRef(a Attention, q []float32, nQ, pos0 int, c kvCache) (out, mag []float64) {
	hd, group := a.HeadDim, a.Heads/a.KVHeads
	out, mag = make([]float64, nQ*a.Heads*hd), make([]float64, nQ*a.Heads*hd)
	for tok := range nQ {
		for h := range a.Heads {
			g := h / group
			qh := q[(tok*a.Heads+h)*hd:][:hd]
			n := pos0 + tok + 1
			scores := make([]float64, n)
			m := math.Inf(-1)
			for t := range n {
				var s float64
				for d := range hd {
					qd := float64(qh[d])
					if a.KV == F16 {
						qd = float64(FP16ToFP32(FP32ToFP16(qh[d])))
					}
					s += qd * c.kf[(t*a.KVHeads+g)*hd+d]
				}
				scores[t] = s / math.Sqrt(float64(hd))
				m = math.Max(m, scores[t])
			}
			var sum float64
			for t := range scores {
				scores[t] = math.Exp(scores[t] - m)
				sum += scores[t]
			}
			o := (tok*a.Heads + h) * hd
			for t, w := range scores {
				for d := range hd {
					v := c.vf[(t*a.KVHeads+g)*hd+d]
					out[o+d] += w / sum * v
					mag[o+d] += math.Abs(w / sum * v)
				}
			}
		}
	}
	return out, mag
}

func TestAttention(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	p := NewPool(3)
	defer p.Close()
	cases := []struct {
		heads, kvHeads, hd int
		nQ, pos0           int
	}{
		{4, 4, 16, 1, 0},   // first token: attends to itself only
		{8, 2, 32, 1, 10},  // decode step with GQA groups of 4
		{8, 4, 20, 5, 0},   // prompt block from the start; head size not a multiple of 8
		{6, 1, 64, 3, 40},  // multi-query, block after a prefix
		{2, 2, 128, 1, 70}, // long head
	}
	for _, kv := range []DType{F32, F16} {
		for _, c := range cases {
			name := fmt.Sprintf("%v/h%d-kv%d-d%d/q%d@%d", kv, c.heads, c.kvHeads, c.hd, c.nQ, c.pos0)
			t.Run(name, func(t *testing.T) {
				a := Attention{Heads: c.heads, KVHeads: c.kvHeads, HeadDim: c.hd, KV: kv}
				ctx := c.pos0 + c.nQ
				cache := makeCache(r, a, ctx, 3)
				q := randF32(r, c.nQ*c.heads*c.hd, 2)
				want, mag := attendRef(a, q, c.nQ, c.pos0, cache)
				for _, pool := range []*Pool{nil, p} {
					out := make([]float32, len(want))
					scratch := make([]float32, a.ScratchFloats(pool, ctx))
					a.Attend(pool, q, c.nQ, c.pos0, cache.k, cache.v, out, scratch)
					for i := range out {
						if math.Abs(float64(out[i])-want[i]) > 2e-5*mag[i]+1e-7 {
							t.Fatalf("pool %v: out[%d] = %g, want %g", pool != nil, i, out[i], want[i])
						}
					}
				}
			})
		}
	}
}

func TestAttentionExplicitScale(t *testing.T) {
	// With Scale 1/sqrt(HeadDim) given explicitly the result is the default.
	r := rand.New(rand.NewPCG(43, 44))
	a := Attention{Heads: 4, KVHeads: 2, HeadDim: 16, KV: F32}
	cache := makeCache(r, a, 9, 0)
	q := randF32(r, 2*4*16, 1)
	def, expl := make([]float32, len(q)), make([]float32, len(q))
	scratch := make([]float32, a.ScratchFloats(nil, 9))
	a.Attend(nil, q, 2, 7, cache.k, cache.v, def, scratch)
	b := a
	b.Scale = 0.25
	b.Attend(nil, q, 2, 7, cache.k, cache.v, expl, scratch)
	b.Scale = 1
	sharp := make([]float32, len(q))
	b.Attend(nil, q, 2, 7, cache.k, cache.v, sharp, scratch)
	same, differs := true, false
	for i := range def {
		same = same && def[i] == expl[i]
		differs = differs || def[i] != sharp[i]
	}
	if !same || !differs {
		t.Errorf("Scale 0.25 same as default: %v; Scale 1 differs: %v", same, differs)
	}
}

func TestAttentionDoesNotAllocate(t *testing.T) {
	r := rand.New(rand.NewPCG(45, 46))
	p := NewPool(2)
	defer p.Close()
	for _, kv := range []DType{F32, F16} {
		a := Attention{Heads: 8, KVHeads: 2, HeadDim: 64, KV: kv}
		cache := makeCache(r, a, 33, 0)
		q, out := randF32(r, 8*64, 1), make([]float32, 8*64)
		for _, pool := range []*Pool{nil, p} {
			scratch := make([]float32, a.ScratchFloats(pool, 33))
			if n := testing.AllocsPerRun(50, func() { a.Attend(pool, q, 1, 32, cache.k, cache.v, out, scratch) }); n != 0 {
				t.Errorf("%v pool %v: %v allocations", kv, pool != nil, n)
			}
		}
	}
}

func TestAttentionBadShapesPanic(t *testing.T) {
	a := Attention{Heads: 4, KVHeads: 2, HeadDim: 8, KV: F32}
	k := make([]byte, 4*10*2*8)
	q, out := make([]float32, 32), make([]float32, 32)
	scratch := make([]float32, a.ScratchFloats(nil, 10))
	cases := map[string]func(){
		"cache too short": func() { a.Attend(nil, q, 1, 10, k, k, out, scratch) },
		"heads":           func() { Attention{Heads: 3, KVHeads: 2, HeadDim: 8, KV: F32}.Attend(nil, q, 1, 0, k, k, out, scratch) },
		"kv type":         func() { Attention{Heads: 4, KVHeads: 2, HeadDim: 8, KV: Q8_0}.Attend(nil, q, 1, 0, k, k, out, scratch) },
		"scratch":         func() { a.Attend(nil, q, 1, 9, k, k, out, scratch[:5]) },
		"short q":         func() { a.Attend(nil, q[:31], 1, 0, k, k, out, scratch) },
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			f()
		})
	}
}

// BenchmarkAttendDecode times one decode step of a Llama-3-8B-shaped layer
// (32 query heads on 8 kv heads of 128) at 4096 positions and reports the
// cache bytes read per second.
func BenchmarkAttendDecode(b *testing.B) {
	r := rand.New(rand.NewPCG(47, 48))
	const ctx = 4096
	for _, kv := range []DType{F16, F32} {
		a := Attention{Heads: 32, KVHeads: 8, HeadDim: 128, KV: kv}
		cache := makeCache(r, a, ctx, 0)
		q, out := randF32(r, 32*128, 1), make([]float32, 32*128)
		for _, threads := range []int{1, 2} {
			b.Run(fmt.Sprintf("%v/threads=%d", kv, threads), func(b *testing.B) {
				p := NewPool(threads)
				defer p.Close()
				scratch := make([]float32, a.ScratchFloats(p, ctx))
				b.SetBytes(int64(len(cache.k) + len(cache.v)))
				for b.Loop() {
					a.Attend(p, q, 1, ctx-1, cache.k, cache.v, out, scratch)
				}
			})
		}
	}
}
