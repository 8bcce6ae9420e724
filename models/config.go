package models

import (
	"fmt"
	"math"

	"github.com/ruvllm/ruvllm/models/gguf"
)

// RopeType is the pairing of dimensions RoPE rotates.
type RopeType int

const (
	// RopeNormal rotates adjacent pairs (2i, 2i+1), as Llama does.
	RopeNormal RopeType = iota
	// RopeNeoX rotates pairs (i, i+n_rot/2), as GPT-NeoX and Qwen2 do.
	RopeNeoX
)

func (r RopeType) String() string {
	if r == RopeNeoX {
		return "neox"
	}
	return "normal"
}

// Config holds the hyperparameters of a decoder-only transformer.
type Config struct {
	Arch          string  // general.architecture
	Name          string  // general.name, may be empty
	ContextLength int     // trained context
	Dim           int     // embedding length
	Layers        int     // block count
	FFN           int     // feed-forward hidden size
	Heads         int     // query heads
	KVHeads       int     // key/value heads (GQA when < Heads)
	HeadDim       int     // per-head size of q and k
	HeadDimV      int     // per-head size of v
	VocabSize     int     // rows of token_embd
	NormEps       float32 // RMSNorm epsilon
	RopeBase      float32 // rope.freq_base
	RopeScale     float32 // multiplies positions: 1/rope.scaling.factor
	RopeDim       int     // dimensions of each head RoPE rotates
	Rope          RopeType
	TiedOutput    bool // no output.weight: the embedding matrix is reused
	// RopeFactors, when set, divide the RoPE angles of each rotated pair
	// (RopeDim/2 of them): Llama 3.1's "llama3" scaling computed from the
	// rope.scaling keys of a file that does not hold them as
	// rope_freqs.weight (which wins when present, as in llama.cpp).
	RopeFactors []float32
	// AttnScale multiplies the attention scores q·k: llama.cpp's
	// 1/sqrtf(head_dim) unless the family says otherwise.
	AttnScale float32
	// RopeAttnFactor multiplies RoPE's cosines and sines
	// (rope.scaling.attn_factor, LongRoPE's); 1 when absent.
	// RopeOrigCtx is the context the model was trained at before its
	// RoPE was scaled (rope.scaling.original_context_length): a sequence
	// longer than it takes LongRoPE's long factors.
	RopeAttnFactor float32
	RopeOrigCtx    int

	// What some families add; the zero values leave a llama block as is.

	// EmbedScale multiplies the token embeddings before the first block
	// (Gemma: sqrt(dim)); 0 means none.
	EmbedScale float32
	// AttnSoftCap caps the attention scores to (−c, c) by c·tanh(s/c)
	// before the softmax (Gemma 2); FinalSoftCap caps the output logits
	// likewise. 0 means no cap.
	AttnSoftCap, FinalSoftCap float32
	// SlidingWindow is how many positions a sliding-window layer attends
	// to, its own included; SWALayers (one per layer, nil when there is no
	// window) says which layers use it. RopeBaseSWA and RopeScaleSWA are
	// the RoPE base and position scale of those layers.
	SlidingWindow             int
	SWALayers                 []bool
	RopeBaseSWA, RopeScaleSWA float32
	// RopeExtFactor, when not 0, is YaRN's extrapolation mix
	// (rope.scaling.type yarn: 1 unless the file sets another): the
	// rotated pairs between the correction dims of RopeBetaFast and
	// RopeBetaSlow rotations over RopeOrigCtx blend the scaled angle with
	// the unscaled one, and the cosines and sines grow by
	// 1 + 0.1·ln(1/RopeScale) (RopeAttnFactor cancels that as llama.cpp
	// does, gpt-oss).
	RopeExtFactor              float32
	RopeBetaFast, RopeBetaSlow float32

	// Mixture of experts (moe.go): 0 experts for a dense model.
	MoE
}

// Windowed reports whether layer l attends over the sliding window only.
func (c *Config) Windowed(l int) bool {
	return c.SlidingWindow > 0 && l < len(c.SWALayers) && c.SWALayers[l]
}

// Architecture is the description of the family c.Arch names: its tensors
// and their shapes; nil for an architecture no file of this package
// registers.
func (c *Config) Architecture() *Architecture {
	a, _ := Lookup(c.Arch)
	return a
}

// ReadConfig reads the hyperparameters of f. Keys llama.cpp requires are
// required here too; optional ones get llama.cpp's defaults.
func ReadConfig(f *gguf.File) (*Config, error) {
	arch, ok := f.GetString("general.architecture")
	if !ok {
		return nil, fmt.Errorf("model has no general.architecture")
	}
	a, ok := Lookup(arch)
	if !ok {
		return nil, fmt.Errorf("architecture %q is not supported (supported: %s)", arch, archList())
	}
	r := KeyReader{f: f, arch: arch}
	c := &Config{Arch: arch, Rope: a.Rope}
	c.Name, _ = f.GetString("general.name")
	c.ContextLength = r.int("context_length", -1)
	c.Dim = r.int("embedding_length", -1)
	c.Layers = r.int("block_count", -1)
	c.FFN = r.perLayer("feed_forward_length", -1)
	c.Heads = r.perLayer("attention.head_count", -1)
	if r.err != nil {
		return nil, r.err
	}
	c.KVHeads = r.perLayer("attention.head_count_kv", c.Heads)
	if c.Heads <= 0 || c.Dim <= 0 || c.Layers <= 0 || c.FFN <= 0 {
		return nil, fmt.Errorf("%s: embedding_length %d, block_count %d, feed_forward_length %d and head_count %d must all be positive", arch, c.Dim, c.Layers, c.FFN, c.Heads)
	}
	c.HeadDim = r.int("attention.key_length", c.Dim/c.Heads)
	c.HeadDimV = r.int("attention.value_length", c.HeadDim)
	c.RopeDim = r.int("rope.dimension_count", c.HeadDim)
	c.NormEps = r.float("attention.layer_norm_rms_epsilon", math.NaN())
	c.RopeBase = r.float("rope.freq_base", 10000)
	c.RopeScale = 1
	switch scaling := r.String("rope.scaling.type", "linear"); scaling {
	case "none": // llama.cpp never scales positions then
	case "llama3":
		// The frequency factors, not a linear scale: convert_hf_to_gguf.py
		// writes them as rope_freqs.weight; some converters leave the keys.
		c.RopeFactors = Llama3RopeFactors(c.RopeDim, c.RopeBase, Llama3Scaling{
			Factor:         r.float("rope.scaling.factor", 8),
			LowFreqFactor:  r.float("rope.scaling.low_freq_factor", 1),
			HighFreqFactor: r.float("rope.scaling.high_freq_factor", 4),
			OriginalCtx:    r.int("rope.scaling.original_context_length", 8192),
		})
	default:
		// linear, and yarn's position scale (yarnScaling adds its other
		// terms).
		if s := r.float("rope.scaling.factor", 0); s > 0 {
			c.RopeScale = 1 / s
		}
	}
	c.AttnScale = 1 / float32(math.Sqrt(float64(c.HeadDim)))
	c.RopeAttnFactor = r.float("rope.scaling.attn_factor", 1)
	c.RopeOrigCtx = r.int("rope.scaling.original_context_length", c.ContextLength)
	if r.String("rope.scaling.type", "linear") == "yarn" {
		yarnScaling(&r, c)
	}
	if r.err != nil {
		return nil, r.err
	}
	if math.IsNaN(float64(c.NormEps)) {
		return nil, fmt.Errorf("%s: key %s.attention.layer_norm_rms_epsilon is missing", arch, arch)
	}
	if c.KVHeads <= 0 || c.Heads%c.KVHeads != 0 {
		return nil, fmt.Errorf("%s: head_count %d is not a multiple of head_count_kv %d", arch, c.Heads, c.KVHeads)
	}
	if c.HeadDim <= 0 || c.RopeDim <= 0 || c.RopeDim > c.HeadDim || c.RopeDim%2 != 0 {
		return nil, fmt.Errorf("%s: head dim %d and rope dimension %d do not fit", arch, c.HeadDim, c.RopeDim)
	}
	if a.Hyper != nil {
		a.Hyper(&r, c)
		if r.err != nil {
			return nil, r.err
		}
	}
	embd := TensorName(TokenEmbd, 0)
	emb, ok := f.Tensor(embd)
	if !ok || len(emb.Dims) != 2 {
		return nil, fmt.Errorf("%s: tensor %s is missing or not a matrix", arch, embd)
	}
	if int(emb.Dims[0]) != c.Dim {
		return nil, fmt.Errorf("%s: %s has rows of %d, embedding_length is %d", arch, embd, emb.Dims[0], c.Dim)
	}
	c.VocabSize = int(emb.Dims[1])
	_, hasOutput := f.Tensor(TensorName(Output, 0))
	c.TiedOutput = !hasOutput
	return c, nil
}

// KeyReader reads an architecture's "<arch>.<key>" values and keeps the
// first error, so that Architecture.Hyper reads its keys in a row and
// ReadConfig reports what went wrong first.
type KeyReader struct {
	f    *gguf.File
	arch string
	err  error
}

func (r *KeyReader) key(k string) string { return r.arch + "." + k }

// Int reads an integer key; def < 0 makes the key required.
func (r *KeyReader) Int(k string, def int) int { return r.int(k, def) }

// Float reads a number key; a missing key gives def.
func (r *KeyReader) Float(k string, def float64) float32 { return r.float(k, def) }

// Bool reads a boolean key; a missing key gives def.
func (r *KeyReader) Bool(k string, def bool) bool {
	v, ok := r.f.Get(r.key(k))
	if !ok {
		return def
	}
	b, ok := v.Bool()
	if !ok {
		r.Fail("key %s is not a boolean (%v)", r.key(k), v.Any())
	}
	return b
}

// String reads a string key; a missing key gives def.
func (r *KeyReader) String(k, def string) string {
	v, ok := r.f.Get(r.key(k))
	if !ok {
		return def
	}
	s, ok := v.Str()
	if !ok {
		r.Fail("key %s is not a string (%v)", r.key(k), v.Any())
	}
	return s
}

// Has reports whether the file has the key.
func (r *KeyReader) Has(k string) bool {
	_, ok := r.f.Get(r.key(k))
	return ok
}

// LayerPattern reads which of n layers a per-layer flag is set for, as
// llama.cpp reads attention.sliding_window_pattern: an array of one bool
// (or integer) per layer, or a period p, where every layer but the last
// of each p is flagged (p = 0 flags them all, p = 1 none). A missing key
// gives the period def.
func (r *KeyReader) LayerPattern(k string, n, def int) []bool {
	flags := make([]bool, n)
	v, ok := r.f.Get(r.key(k))
	if ok && v.Type == gguf.TypeArray {
		xs, isInts := v.Ints()
		bs, isBools := v.Any().([]bool)
		switch {
		case isBools && len(bs) == n:
			copy(flags, bs)
		case isInts && len(xs) == n:
			for i, x := range xs {
				flags[i] = x != 0
			}
		default:
			r.Fail("key %s is not an array of %d flags", r.key(k), n)
		}
		return flags
	}
	p := r.int(k, def)
	for l := range flags {
		flags[l] = p == 0 || l%p < p-1
	}
	return flags
}

// Fail records an error of the architecture's keys unless one is recorded.
func (r *KeyReader) Fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf(r.arch+": "+format, args...)
	}
}

func (r *KeyReader) int(k string, def int) int {
	v, ok := r.f.Get(r.key(k))
	if !ok {
		if def < 0 && r.err == nil {
			r.err = fmt.Errorf("%s: key %s is missing", r.arch, r.key(k))
		}
		return def
	}
	n, ok := v.Int()
	if !ok || n < 0 || n > math.MaxInt32 {
		if r.err == nil {
			r.err = fmt.Errorf("%s: key %s is not a valid count (%v)", r.arch, r.key(k), v.Any())
		}
		return def
	}
	return int(n)
}

// perLayer reads a key that may be one value or one value per layer, as
// llama.cpp's get_key_or_arr does; we run only uniform layers.
func (r *KeyReader) perLayer(k string, def int) int {
	v, ok := r.f.Get(r.key(k))
	if !ok || v.Type != gguf.TypeArray {
		return r.int(k, def)
	}
	xs, ok := v.Ints()
	if !ok || len(xs) == 0 {
		if r.err == nil {
			r.err = fmt.Errorf("%s: key %s is not an integer array", r.arch, r.key(k))
		}
		return def
	}
	for _, x := range xs {
		if x != xs[0] && r.err == nil {
			r.err = fmt.Errorf("%s: key %s differs between layers, which is not supported", r.arch, r.key(k))
		}
	}
	return int(xs[0])
}

func (r *KeyReader) float(k string, def float64) float32 {
	v, ok := r.f.Get(r.key(k))
	if !ok {
		return float32(def)
	}
	x, ok := v.Float()
	if !ok && r.err == nil {
		r.err = fmt.Errorf("%s: key %s is not a number (%v)", r.arch, r.key(k), v.Any())
	}
	return float32(x)
}
