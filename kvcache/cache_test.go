package kvcache

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ruvllm/ruvllm/kernels"
)

func TestNewRejectsBadSizes(t *testing.T) {
	ok := Options{Layers: 2, KVHeads: 2, HeadDim: 4, MaxLen: 8}
	cases := []struct {
		name string
		edit func(*Options)
	}{
		{"zero layers", func(o *Options) { o.Layers = 0 }},
		{"negative heads", func(o *Options) { o.KVHeads = -1 }},
		{"zero head dim", func(o *Options) { o.HeadDim = 0 }},
		{"negative value dim", func(o *Options) { o.HeadDimV = -3 }},
		{"zero length", func(o *Options) { o.MaxLen = 0 }},
		{"huge", func(o *Options) { o.MaxLen = math.MaxInt32; o.Layers = 1 << 20 }},
		{"overflowing", func(o *Options) { o.MaxLen = math.MaxInt; o.HeadDim = math.MaxInt / 2 }},
		{"unknown precision", func(o *Options) { o.Type = 7 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := ok
			c.edit(&o)
			if _, err := New(o); err == nil {
				t.Fatalf("New(%+v) succeeded", o)
			}
		})
	}
}

func TestBytes(t *testing.T) {
	for _, p := range []Precision{F16, F32} {
		t.Run(p.String(), func(t *testing.T) {
			c, err := New(Options{Layers: 3, KVHeads: 2, HeadDim: 8, HeadDimV: 4, MaxLen: 10, Type: p})
			if err != nil {
				t.Fatal(err)
			}
			elem := int64(p.DType().RowBytes(1))
			want := 3 * 2 * 10 * (8 + 4) * elem
			if c.Bytes() != want {
				t.Fatalf("Bytes() = %d, want %d", c.Bytes(), want)
			}
		})
	}
}

// TestStoreLayout writes random keys and values and reads them back through
// the raw views, checking the documented layouts and the rounding.
func TestStoreLayout(t *testing.T) {
	for _, p := range []Precision{F16, F32} {
		t.Run(p.String(), func(t *testing.T) {
			o := Options{Layers: 2, KVHeads: 3, HeadDim: 4, HeadDimV: 5, MaxLen: 6, Type: p}
			c, err := New(o)
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(1, 2))
			random := func(n int) []float32 {
				x := make([]float32, n)
				for i := range x {
					x[i] = float32(r.NormFloat64())
				}
				return x
			}
			// Each layer is written in two calls: positions 0..1, then 2..5.
			ks := make([][]float32, o.Layers)
			vs := make([][]float32, o.Layers)
			for l := range o.Layers {
				ks[l] = random(o.MaxLen * o.KVHeads * o.HeadDim)
				vs[l] = random(o.MaxLen * o.KVHeads * o.HeadDimV)
				split := 2
				c.Store(l, 0, ks[l][:split*o.KVHeads*o.HeadDim], vs[l][:split*o.KVHeads*o.HeadDimV])
				c.Store(l, split, ks[l][split*o.KVHeads*o.HeadDim:], vs[l][split*o.KVHeads*o.HeadDimV:])
			}
			round := func(x float32) float32 {
				if p == F16 {
					return kernels.FP16ToFP32(kernels.FP32ToFP16(x))
				}
				return x
			}
			keyRaw := func(l, i int) float32 {
				if p == F16 {
					return kernels.FP16ToFP32(c.KeysF16(l)[i])
				}
				return c.KeysF32(l)[i]
			}
			valueRaw := func(l, i int) float32 {
				if p == F16 {
					return kernels.FP16ToFP32(c.ValuesF16(l)[i])
				}
				return c.ValuesF32(l)[i]
			}
			for l := range o.Layers {
				for pos := range o.MaxLen {
					for h := range o.KVHeads {
						for i := range o.HeadDim {
							// keys (max_len, kv_heads, head_dim)
							idx := (pos*o.KVHeads+h)*o.HeadDim + i
							want := round(ks[l][idx])
							if got := keyRaw(l, idx); got != want {
								t.Fatalf("keys of layer %d [pos %d][head %d][%d] = %g, want %g", l, pos, h, i, got, want)
							}
							if got := c.KeyAt(l, pos, h, i); got != want {
								t.Fatalf("KeyAt = %g, want %g", got, want)
							}
						}
						for i := range o.HeadDimV {
							want := round(vs[l][(pos*o.KVHeads+h)*o.HeadDimV+i])
							// values (kv_heads, head_dim_v, max_len)
							if got := valueRaw(l, (h*o.HeadDimV+i)*o.MaxLen+pos); got != want {
								t.Fatalf("values of layer %d [head %d][%d][pos %d] = %g, want %g", l, h, i, pos, got, want)
							}
							if got := c.ValueAt(l, pos, h, i); got != want {
								t.Fatalf("ValueAt = %g, want %g", got, want)
							}
						}
					}
				}
			}
			if p == F16 && (c.KeysF32(0) != nil || c.ValuesF32(0) != nil) || p == F32 && (c.KeysF16(0) != nil || c.ValuesF16(0) != nil) {
				t.Fatal("the accessors of the other precision are not nil")
			}
		})
	}
}

func TestLength(t *testing.T) {
	c, err := New(Options{Layers: 1, KVHeads: 1, HeadDim: 2, MaxLen: 4})
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name    string
		do      func() error
		wantLen int
		wantErr bool
	}{
		{"extend 3", func() error { return c.Extend(3) }, 3, false},
		{"extend past end", func() error { return c.Extend(2) }, 3, true},
		{"extend negative", func() error { return c.Extend(-1) }, 3, true},
		{"truncate 1", func() error { return c.Truncate(1) }, 1, false},
		{"truncate longer", func() error { return c.Truncate(2) }, 1, true},
		{"truncate negative", func() error { return c.Truncate(-1) }, 1, true},
		{"extend to full", func() error { return c.Extend(3) }, 4, false},
		{"reset", func() error { c.Reset(); return nil }, 0, false},
	}
	for _, s := range steps {
		err := s.do()
		if (err != nil) != s.wantErr {
			t.Fatalf("%s: error %v, want error %v", s.name, err, s.wantErr)
		}
		if c.Len() != s.wantLen {
			t.Fatalf("%s: Len() = %d, want %d", s.name, c.Len(), s.wantLen)
		}
	}
}

func TestStorePanicsOutOfRange(t *testing.T) {
	c, err := New(Options{Layers: 1, KVHeads: 1, HeadDim: 2, MaxLen: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Store past MaxLen did not panic")
		}
	}()
	c.Store(0, 3, make([]float32, 4), make([]float32, 4)) // positions 3 and 4
}

func TestParsePrecision(t *testing.T) {
	cases := []struct {
		in   string
		want Precision
		ok   bool
	}{{"f16", F16, true}, {"F32", F32, true}, {"q8_0", 0, false}, {"", 0, false}}
	for _, c := range cases {
		got, err := ParsePrecision(c.in)
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("ParsePrecision(%q) = %v, %v", c.in, got, err)
		}
	}
}

// TestForgottenPositionsReadZero checks the invariant kernels rely on when
// they run past Len: forgotten positions hold zeros, kept ones their values.
func TestForgottenPositionsReadZero(t *testing.T) {
	for _, p := range []Precision{F16, F32} {
		t.Run(p.String(), func(t *testing.T) {
			o := Options{Layers: 2, KVHeads: 2, HeadDim: 3, MaxLen: 5, Type: p}
			c, err := New(o)
			if err != nil {
				t.Fatal(err)
			}
			fill := func(n int) {
				k := make([]float32, n*o.KVHeads*o.HeadDim)
				for i := range k {
					k[i] = float32(math.NaN())
				}
				for l := range o.Layers {
					c.Store(l, c.Len(), k, k)
				}
				if err := c.Extend(n); err != nil {
					t.Fatal(err)
				}
			}
			check := func(keep int) {
				for l := range o.Layers {
					for pos := range o.MaxLen {
						for h := range o.KVHeads {
							for i := range o.HeadDim {
								k, v := c.KeyAt(l, pos, h, i), c.ValueAt(l, pos, h, i)
								nan := math.IsNaN(float64(k)) && math.IsNaN(float64(v))
								if pos < keep && !nan || pos >= keep && (k != 0 || v != 0) {
									t.Fatalf("keep %d: layer %d pos %d head %d [%d] = %g, %g", keep, l, pos, h, i, k, v)
								}
							}
						}
					}
				}
			}
			fill(5)
			check(5)
			if err := c.Truncate(2); err != nil {
				t.Fatal(err)
			}
			check(2)
			c.Reset()
			check(0)
		})
	}
}
