package models

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Architecture describes one model family, a value of general.architecture:
// how its hyperparameters are read and which tensors its files hold, with
// their shapes. It is the one description the backends' loaders, LoRA's
// target names, quantize's mixes, synth and inspect read. A family is one
// file in this package that registers its Architecture, and one file in
// each backend with its block.
type Architecture struct {
	// Name is the general.architecture value, which also prefixes the
	// family's metadata keys ("llama.embedding_length").
	Name string
	// Rope is the pairing of dimensions RoPE rotates.
	Rope RopeType
	// PermutedQK says the conversion to GGUF reordered the rows of q and k
	// within each head (RoPE pairs adjacent dimensions in GGUF, halves in
	// Hugging Face), so that a PEFT adapter's q and k updates are reordered
	// the same way when read.
	PermutedQK bool
	// Hyper reads the family's own keys after the common ones and checks
	// what it needs; nil when the common keys are all. Errors go to r.
	Hyper func(r *KeyReader, c *Config)
	// Tensors are the tensors of a file, whole-model and per block.
	Tensors []TensorSpec
	// HF names the Hugging Face modules of linear roles that this family's
	// checkpoints name otherwise than the role does (RoleSpec.HF): Phi-3's
	// ffn_up is "mlp.gate_up_proj".
	HF map[Role]string
	// Sparse are the linear roles whose inputs activation sparsity
	// thresholds (package sparse), in groups of the roles that multiply one
	// input (q, k and v the block's normalised input): a sparsified file
	// may store their matrices input-channel-major, each with its input's
	// thresholds (see SparseName), and calibration gives a group one
	// sparsity per block. nil: the family cannot be sparsified.
	Sparse [][]Role
}

// Module is the Hugging Face module path of the linear layer of role r in
// block layer (ignored for a whole-model role) of a model of this family,
// as a PEFT adapter names it; "" when the family has no such layer or
// adapters cannot address it.
func (a *Architecture) Module(r Role, layer int) string {
	s := r.Spec()
	m, ok := a.HF[r]
	if !ok {
		m = s.HF
	}
	switch {
	case !s.Linear || m == "" || !a.Has(r):
		return ""
	case s.Block:
		return "model.layers." + strconv.Itoa(layer) + "." + m
	}
	return m
}

// RoleOfModule is the inverse of Module: the linear role of this family a
// Hugging Face module path names, and its block (-1 for a whole-model
// one): "model.layers.3.self_attn.q_proj" is AttnQ in block 3, "lm_head"
// is Output.
func (a *Architecture) RoleOfModule(module string) (r Role, layer int, ok bool) {
	layer, _, ok = cutBlock(module, "model.layers.")
	if !ok {
		return 0, -1, false
	}
	for _, t := range a.Tensors {
		if a.Module(t.Role, max(layer, 0)) == module && t.Role.Spec().Block == (layer >= 0) {
			return t.Role, layer, true
		}
	}
	return 0, -1, false
}

// TensorSpec is one tensor of an architecture.
type TensorSpec struct {
	Role Role
	// Shape is the tensor's shape in row-major order for a model of c:
	// (rows, cols) of a matrix, whose GGUF dims are {cols, rows}, or (n) of
	// a vector.
	Shape func(c *Config) []int
	// Optional tensors may be absent: biases some files have, Llama 3's
	// rope_freqs, an output projection tied to the token embeddings.
	Optional bool
}

var architectures = map[string]*Architecture{}

// Register makes an architecture known; files of its family can then be
// read. It is called while the package initialises; a name registered twice
// panics.
func Register(a *Architecture) {
	if _, dup := architectures[a.Name]; dup || a.Name == "" {
		panic(fmt.Sprintf("models: architecture %q registered twice or without a name", a.Name))
	}
	architectures[a.Name] = a
}

// Lookup finds a registered architecture by its general.architecture name.
func Lookup(name string) (*Architecture, bool) {
	a, ok := architectures[name]
	return a, ok
}

// Architectures lists the names of the registered architectures, sorted.
func Architectures() []string {
	names := make([]string, 0, len(architectures))
	for n := range architectures {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Supported reports whether files of architecture arch can be run.
func Supported(arch string) bool { _, ok := architectures[arch]; return ok }

// Tensor finds the spec of role r.
func (a *Architecture) Tensor(r Role) (TensorSpec, bool) {
	for _, t := range a.Tensors {
		if t.Role == r {
			return t, true
		}
	}
	return TensorSpec{}, false
}

// Has reports whether the architecture has tensors of role r.
func (a *Architecture) Has(r Role) bool {
	_, ok := a.Tensor(r)
	return ok
}

// Linear lists the GGUF names of the matrices a LoRA adapter may update in
// a model of c: every linear role of every block, then the output
// projection unless it is tied to the token embeddings.
func (a *Architecture) Linear(c *Config) []string {
	var names []string
	for l := range c.Layers {
		for _, t := range a.Tensors {
			if s := t.Role.Spec(); s.Block && s.Linear {
				names = append(names, TensorName(t.Role, l))
			}
		}
	}
	for _, t := range a.Tensors {
		if s := t.Role.Spec(); !s.Block && s.Linear && !(t.Role == Output && c.TiedOutput) {
			names = append(names, TensorName(t.Role, 0))
		}
	}
	return names
}

// TensorShape is the row-major shape of the tensor named name in a model of
// c, and its spec; ok is false when the architecture has no such tensor
// (or block).
func (c *Config) TensorShape(name string) (shape []int, spec TensorSpec, ok bool) {
	r, layer, ok := ParseTensorName(name)
	if !ok || layer >= c.Layers {
		return nil, TensorSpec{}, false
	}
	a := c.Architecture()
	if a == nil {
		return nil, TensorSpec{}, false
	}
	spec, ok = a.Tensor(r)
	if !ok {
		return nil, TensorSpec{}, false
	}
	return spec.Shape(c), spec, true
}

// LinearShape is the (in, out) of the linear layer named name in a model of
// c: W (out, in) maps in features to out. ok is false for a name that is
// not a linear layer of c, or the tied output.
func (c *Config) LinearShape(name string) (in, out int, ok bool) {
	shape, spec, ok := c.TensorShape(name)
	if !ok || !spec.Role.Spec().Linear || len(shape) != 2 || (spec.Role == Output && c.TiedOutput) {
		return 0, 0, false
	}
	return shape[1], shape[0], true
}

// OutputRole is the role whose matrix projects hidden states to logits:
// Output, or TokenEmbd when the model ties them.
func (c *Config) OutputRole() Role {
	if c.TiedOutput {
		return TokenEmbd
	}
	return Output
}

// Shapes of the tensors most families share, for their TensorSpecs.
var (
	shapeDim    = func(c *Config) []int { return []int{c.Dim} }
	shapeVocab  = func(c *Config) []int { return []int{c.VocabSize, c.Dim} }
	shapeQ      = func(c *Config) []int { return []int{c.Heads * c.HeadDim, c.Dim} }
	shapeK      = func(c *Config) []int { return []int{c.KVHeads * c.HeadDim, c.Dim} }
	shapeV      = func(c *Config) []int { return []int{c.KVHeads * c.HeadDimV, c.Dim} }
	shapeO      = func(c *Config) []int { return []int{c.Dim, c.Heads * c.HeadDimV} }
	shapeQBias  = func(c *Config) []int { return []int{c.Heads * c.HeadDim} }
	shapeKBias  = func(c *Config) []int { return []int{c.KVHeads * c.HeadDim} }
	shapeVBias  = func(c *Config) []int { return []int{c.KVHeads * c.HeadDimV} }
	shapeFFNIn  = func(c *Config) []int { return []int{c.FFN, c.Dim} }
	shapeFFNOut = func(c *Config) []int { return []int{c.Dim, c.FFN} }
	shapeRope   = func(c *Config) []int { return []int{c.RopeDim / 2} }
)

// Tensor lists of the llama layout that families compose theirs from.
var (
	// embedTensors are the token embeddings, the final norm and the output
	// projection (absent when tied).
	embedTensors = []TensorSpec{
		{Role: TokenEmbd, Shape: shapeVocab},
		{Role: OutputNorm, Shape: shapeDim},
		{Role: Output, Shape: shapeVocab, Optional: true},
	}
	// attentionTensors are a pre-norm grouped-query attention.
	attentionTensors = []TensorSpec{
		{Role: AttnNorm, Shape: shapeDim},
		{Role: AttnQ, Shape: shapeQ},
		{Role: AttnK, Shape: shapeK},
		{Role: AttnV, Shape: shapeV},
		{Role: AttnOut, Shape: shapeO},
	}
	// gatedFFNTensors are a pre-norm gated MLP: SwiGLU in llama, GeGLU in
	// Gemma.
	gatedFFNTensors = []TensorSpec{
		{Role: FFNNorm, Shape: shapeDim},
		{Role: FFNGate, Shape: shapeFFNIn},
		{Role: FFNUp, Shape: shapeFFNIn},
		{Role: FFNDown, Shape: shapeFFNOut},
	}
)

// blockLinear are the matrices of attentionTensors and swigluTensors by
// the input they multiply: in a SwiGLU block every projection's input is
// the kind whose small entries activation sparsity zeroes (TEAL thresholds
// all seven).
var blockLinear = [][]Role{{AttnQ, AttnK, AttnV}, {AttnOut}, {FFNGate, FFNUp}, {FFNDown}}

// qkvBiases are the biases of the q, k and v projections.
func qkvBiases(optional bool) []TensorSpec {
	return []TensorSpec{
		{Role: AttnQBias, Shape: shapeQBias, Optional: optional},
		{Role: AttnKBias, Shape: shapeKBias, Optional: optional},
		{Role: AttnVBias, Shape: shapeVBias, Optional: optional},
	}
}

// String is the architecture's name.
func (a *Architecture) String() string { return a.Name }

// Layout checks the tensors of a file against the architecture: for every
// tensor the description names (every block's), whether it is present and
// has its shape, and which tensors of the file it does not name. dims looks
// a tensor of the file up by name (GGUF order, {cols, rows}); names lists
// the file's tensors.
func (a *Architecture) Layout(c *Config, names []string, dims func(name string) ([]uint64, bool)) Layout {
	var lay Layout
	named := map[string]bool{}
	for _, t := range a.Tensors {
		want := t.Shape(c)
		n := 1
		if t.Role.Spec().Block {
			n = c.Layers
		}
		e := LayoutEntry{Role: t.Role, Shape: want, Optional: t.Optional}
		for l := range n {
			name := TensorName(t.Role, l)
			named[name] = true
			got, ok := dims(name)
			switch {
			case !ok && a.Sparsifiable(t.Role) && sparseLayout(&e, t.Role, l, want, named, dims):
			case !ok:
				e.Missing++
			case !sameShape(got, want):
				e.Wrong = append(e.Wrong, fmt.Sprintf("%s has dims %v, want %v", name, got, ggufDims(want)))
			default:
				e.Present++
			}
		}
		lay.Entries = append(lay.Entries, e)
	}
	for _, name := range names {
		if !named[name] {
			lay.Unused = append(lay.Unused, name)
		}
	}
	return lay
}

// Layout is how a file's tensors fit an architecture.
type Layout struct {
	Entries []LayoutEntry
	// Unused are tensors of the file the architecture does not name.
	Unused []string
}

// LayoutEntry is one role of a Layout: how many of its tensors (one, or
// one per block) are present, missing, or of the wrong shape.
type LayoutEntry struct {
	Role     Role
	Shape    []int // row-major, as the architecture wants it
	Optional bool
	Present  int
	// ChannelMajor are the present tensors a sparsified file stores
	// input-channel-major (SparseName), with their thresholds.
	ChannelMajor int
	Missing      int
	Wrong        []string
}

// Problems lists what makes a file unrunnable: required tensors missing,
// tensors of the wrong shape.
func (l Layout) Problems() []string {
	var p []string
	for _, e := range l.Entries {
		if e.Missing > 0 && !(e.Optional && e.Present == 0) {
			p = append(p, fmt.Sprintf("%d %s tensors missing", e.Missing, e.Role))
		}
		p = append(p, e.Wrong...)
	}
	return p
}

// ggufDims turns a row-major shape into GGUF's dims, innermost first.
func ggufDims(shape []int) []uint64 {
	d := make([]uint64, len(shape))
	for i, s := range shape {
		d[len(shape)-1-i] = uint64(s)
	}
	return d
}

func sameShape(dims []uint64, shape []int) bool {
	return slices.Equal(dims, ggufDims(shape))
}

// archList is the registered names for error messages.
func archList() string { return strings.Join(Architectures(), ", ") }

// concat joins tensor lists into a new one.
func concat(lists ...[]TensorSpec) []TensorSpec { return slices.Concat(lists...) }
