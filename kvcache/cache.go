package kvcache

import (
	"fmt"

	"github.com/ruvllm/ruvllm/kernels"
)

// Precision is the element format of cached keys and values.
type Precision int

const (
	// F16 halves the memory of F32 and is llama.cpp's default cache type;
	// the zero value, so that options default to it.
	F16 Precision = iota
	// F32 keeps keys and values exactly as computed.
	F32
)

// DType is the kernels format of one element.
func (p Precision) DType() kernels.DType {
	if p == F32 {
		return kernels.F32
	}
	return kernels.F16
}

func (p Precision) String() string { return p.DType().String() }

// ParsePrecision reads "f16" or "f32" (any case), as a flag or config file
// names a cache type.
func ParsePrecision(s string) (Precision, error) {
	if t, ok := kernels.ParseDType(s); ok {
		switch t {
		case kernels.F16:
			return F16, nil
		case kernels.F32:
			return F32, nil
		}
	}
	return 0, fmt.Errorf("kvcache: cache type %q is not supported (f16, f32)", s)
}

// maxBytes bounds one cache so that a hostile size is an error, not an
// allocation that kills the process.
const maxBytes = 1 << 40

// Options are the dimensions of a cache.
type Options struct {
	Layers   int
	KVHeads  int
	HeadDim  int // per-head length of a key
	HeadDimV int // per-head length of a value; 0 means HeadDim
	MaxLen   int // positions the cache holds
	Type     Precision
}

// Cache is the keys and values of one sequence, for every layer and KV head,
// at positions [0, MaxLen). Only positions below Len are valid; writing a
// position does not make it valid until Extend. Positions at or past Len
// that were never written, or were forgotten by Truncate or Reset, read as
// zeros, so that a kernel may run a dot product past Len with zero weights
// there without picking up a NaN a previous use left behind.
//
// Layout, as llama.cpp's cache without flash attention:
//
//	keys   (layers, max_len, kv_heads, head_dim):   a token's keys are one row,
//	                                                written where its projection lands
//	values (layers, kv_heads, head_dim_v, max_len): transposed, so that each
//	                                                output element of attention is one
//	                                                dot product of a row with the weights
//
// Exactly one of the F16 and F32 slice pairs is non-nil, as Type says.
type Cache struct {
	opt      Options
	n        int      // valid positions
	k16, v16 []uint16 // F16 storage
	k32, v32 []float32
	kLayer   int // elements of one layer's keys: max_len*kv_heads*head_dim
	vLayer   int // elements of one layer's values: kv_heads*head_dim_v*max_len
}

// New allocates a cache; its memory is sized once and never grows.
func New(o Options) (*Cache, error) {
	if o.HeadDimV == 0 {
		o.HeadDimV = o.HeadDim
	}
	if o.Layers <= 0 || o.KVHeads <= 0 || o.HeadDim <= 0 || o.HeadDimV <= 0 || o.MaxLen <= 0 {
		return nil, fmt.Errorf("kvcache: layers %d, kv heads %d, head dims %d/%d and length %d must be positive",
			o.Layers, o.KVHeads, o.HeadDim, o.HeadDimV, o.MaxLen)
	}
	if o.Type != F16 && o.Type != F32 {
		return nil, fmt.Errorf("kvcache: unknown precision %d", int(o.Type))
	}
	// Multiply in float64 first so that the check itself cannot overflow.
	total := float64(o.Layers) * float64(o.KVHeads) * float64(o.MaxLen) * float64(o.HeadDim+o.HeadDimV) *
		float64(o.Type.DType().RowBytes(1))
	if total > maxBytes {
		return nil, fmt.Errorf("kvcache: %d layers × %d heads × %d positions × %d dims needs %.0f bytes, more than the %d allowed",
			o.Layers, o.KVHeads, o.MaxLen, o.HeadDim+o.HeadDimV, total, int64(maxBytes))
	}
	c := &Cache{
		opt:    o,
		kLayer: o.MaxLen * o.KVHeads * o.HeadDim,
		vLayer: o.KVHeads * o.HeadDimV * o.MaxLen,
	}
	if o.Type == F16 {
		c.k16 = make([]uint16, o.Layers*c.kLayer)
		c.v16 = make([]uint16, o.Layers*c.vLayer)
	} else {
		c.k32 = make([]float32, o.Layers*c.kLayer)
		c.v32 = make([]float32, o.Layers*c.vLayer)
	}
	return c, nil
}

// Options returns the dimensions the cache was made with.
func (c *Cache) Options() Options { return c.opt }

// Type is the precision of the cached elements.
func (c *Cache) Type() Precision { return c.opt.Type }

// Len is the number of valid positions.
func (c *Cache) Len() int { return c.n }

// MaxLen is the number of positions the cache holds.
func (c *Cache) MaxLen() int { return c.opt.MaxLen }

// Bytes is the memory the cache holds.
func (c *Cache) Bytes() int64 {
	return 2*int64(len(c.k16)+len(c.v16)) + 4*int64(len(c.k32)+len(c.v32))
}

// Truncate keeps the first n positions and zeroes the rest.
func (c *Cache) Truncate(n int) error {
	if n < 0 || n > c.n {
		return fmt.Errorf("kvcache: cannot truncate %d positions to %d", c.n, n)
	}
	c.forget(n, c.n)
	c.n = n
	return nil
}

// Reset forgets every position; the memory is kept.
func (c *Cache) Reset() {
	c.forget(0, c.n)
	c.n = 0
}

// forget zeroes positions [from, to) of every layer.
func (c *Cache) forget(from, to int) {
	if from >= to {
		return
	}
	o := c.opt
	kw := o.KVHeads * o.HeadDim
	for l := range o.Layers {
		if o.Type == F16 {
			clear(c.KeysF16(l)[from*kw : to*kw])
			v := c.ValuesF16(l)
			for row := 0; row < len(v); row += o.MaxLen {
				clear(v[row+from : row+to])
			}
			continue
		}
		clear(c.KeysF32(l)[from*kw : to*kw])
		v := c.ValuesF32(l)
		for row := 0; row < len(v); row += o.MaxLen {
			clear(v[row+from : row+to])
		}
	}
}

// Extend makes the next n positions valid, once Store has written them in
// every layer.
func (c *Cache) Extend(n int) error {
	if n < 0 || c.n+n > c.opt.MaxLen {
		return fmt.Errorf("kvcache: %d positions do not fit after %d of %d", n, c.n, c.opt.MaxLen)
	}
	c.n += n
	return nil
}

// KeysF16 is the keys of one layer of an F16 cache, (max_len, kv_heads,
// head_dim); nil for an F32 cache.
func (c *Cache) KeysF16(layer int) []uint16 { return slice(c.k16, layer, c.kLayer) }

// KeysF32 is the keys of one layer of an F32 cache, (max_len, kv_heads,
// head_dim); nil for an F16 cache.
func (c *Cache) KeysF32(layer int) []float32 { return slice(c.k32, layer, c.kLayer) }

// ValuesF16 is the values of one layer of an F16 cache, transposed:
// (kv_heads, head_dim_v, max_len); nil for an F32 cache.
func (c *Cache) ValuesF16(layer int) []uint16 { return slice(c.v16, layer, c.vLayer) }

// ValuesF32 is the values of one layer of an F32 cache, transposed:
// (kv_heads, head_dim_v, max_len); nil for an F16 cache.
func (c *Cache) ValuesF32(layer int) []float32 { return slice(c.v32, layer, c.vLayer) }

func slice[T any](s []T, layer, n int) []T {
	if s == nil {
		return nil
	}
	return s[layer*n : (layer+1)*n : (layer+1)*n]
}

// Store writes the keys k (n, kv_heads, head_dim) and values
// v (n, kv_heads, head_dim_v) of n consecutive tokens from position pos in
// layer, rounded to the cache's precision.
func (c *Cache) Store(layer, pos int, k, v []float32) {
	o := c.opt
	kw, vw := o.KVHeads*o.HeadDim, o.KVHeads*o.HeadDimV
	n := len(k) / kw
	if layer < 0 || layer >= o.Layers || pos < 0 || n*kw != len(k) || n*vw != len(v) || pos+n > o.MaxLen {
		panic(fmt.Sprintf("kvcache: Store(layer %d, pos %d, %d keys, %d values) out of range", layer, pos, len(k), len(v)))
	}
	if o.Type == F16 {
		kernels.FP32ToFP16Row(k, c.KeysF16(layer)[pos*kw:(pos+n)*kw])
		vl := c.ValuesF16(layer)
		for t := range n {
			for i, x := range v[t*vw : (t+1)*vw] {
				vl[i*o.MaxLen+pos+t] = kernels.FP32ToFP16(x)
			}
		}
		return
	}
	copy(c.KeysF32(layer)[pos*kw:(pos+n)*kw], k)
	vl := c.ValuesF32(layer)
	for t := range n {
		for i, x := range v[t*vw : (t+1)*vw] {
			vl[i*o.MaxLen+pos+t] = x
		}
	}
}

// KeyAt reads element i of head h's key at pos, widened to float32; for
// tests and debugging, not the hot path.
func (c *Cache) KeyAt(layer, pos, h, i int) float32 {
	j := (pos*c.opt.KVHeads+h)*c.opt.HeadDim + i
	if c.opt.Type == F16 {
		return kernels.FP16ToFP32(c.KeysF16(layer)[j])
	}
	return c.KeysF32(layer)[j]
}

// ValueAt reads element i of head h's value at pos, widened to float32.
func (c *Cache) ValueAt(layer, pos, h, i int) float32 {
	j := (h*c.opt.HeadDimV+i)*c.opt.MaxLen + pos
	if c.opt.Type == F16 {
		return kernels.FP16ToFP32(c.ValuesF16(layer)[j])
	}
	return c.ValuesF32(layer)[j]
}
