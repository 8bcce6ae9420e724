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
	AttnBias      bool // q/k/v projections carry biases (qwen2)
	TiedOutput    bool // no output.weight: the embedding matrix is reused
}

// archInfo is what differs between the architectures we run.
type archInfo struct {
	rope     RopeType
	attnBias bool
}

var archs = map[string]archInfo{
	"llama": {rope: RopeNormal},
	"qwen2": {rope: RopeNeoX, attnBias: true},
}

// Supported reports whether arch can be run.
func Supported(arch string) bool { _, ok := archs[arch]; return ok }

// ReadConfig reads the hyperparameters of f. Keys llama.cpp requires are
// required here too; optional ones get llama.cpp's defaults.
func ReadConfig(f *gguf.File) (*Config, error) {
	arch, ok := f.GetString("general.architecture")
	if !ok {
		return nil, fmt.Errorf("model has no general.architecture")
	}
	info, ok := archs[arch]
	if !ok {
		return nil, fmt.Errorf("architecture %q is not supported (supported: llama, qwen2)", arch)
	}
	r := keyReader{f: f, arch: arch}
	c := &Config{Arch: arch, Rope: info.rope, AttnBias: info.attnBias}
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
	if s := r.float("rope.scaling.factor", 0); s > 0 {
		c.RopeScale = 1 / s
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
	emb, ok := f.Tensor(TokenEmbd)
	if !ok || len(emb.Dims) != 2 {
		return nil, fmt.Errorf("%s: tensor %s is missing or not a matrix", arch, TokenEmbd)
	}
	if int(emb.Dims[0]) != c.Dim {
		return nil, fmt.Errorf("%s: %s has rows of %d, embedding_length is %d", arch, TokenEmbd, emb.Dims[0], c.Dim)
	}
	c.VocabSize = int(emb.Dims[1])
	_, hasOutput := f.Tensor(OutputName)
	c.TiedOutput = !hasOutput
	return c, nil
}

// keyReader reads "<arch>.<key>" values and keeps the first error.
type keyReader struct {
	f    *gguf.File
	arch string
	err  error
}

func (r *keyReader) key(k string) string { return r.arch + "." + k }

// int reads an integer key; def < 0 makes the key required.
func (r *keyReader) int(k string, def int) int {
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
func (r *keyReader) perLayer(k string, def int) int {
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

func (r *keyReader) float(k string, def float64) float32 {
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
