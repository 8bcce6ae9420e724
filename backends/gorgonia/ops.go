package gorgonia

import (
	"fmt"
	"hash"
	"hash/fnv"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/ruvllm/ruvllm/kernels"
)

// Attention is one Gorgonia op per layer rather than a subgraph of slices,
// products and softmaxes per head: a graph of a few dozen nodes a layer
// instead of a few hundred compiles and differentiates an order of
// magnitude faster, which an online update needs. The op computes with
// kernels (RoPE as the native backend rotates, ggml's softmax) and has its
// own gradient op, the textbook backward pass of softmax attention.

// attention is the shape and context of one layer's attention in a pass.
type attention struct {
	m    *Model
	t    int // tokens of the pass
	pos  int // position of the first
	past int // cached positions before it
	// pastK and pastV (past, kv_heads·head_dim) are the cached keys (after
	// RoPE) and values.
	pastK, pastV []float32
	// round rounds the pass's keys and values, the queries and the
	// attention weights to F16, as ggml's products over an F16 cache do.
	round bool
	// rot is the layer's RoPE, and cos and sin (t, rope_dim/2) its angles
	// at the tokens' positions.
	rot      *kernels.Rope
	cos, sin []float32
	// qScale multiplies the queries after RoPE, before they are rounded
	// (Gemma's and Phi-3's graphs scale them there), and sScale the scores:
	// one of the two is the model's attention scale, the other 1.
	qScale, sScale float32
	// softCap caps the scores by c·tanh(s/c) before the softmax (Gemma 2);
	// window, when not 0, is how many positions each token sees, its own
	// included (sliding-window layers).
	softCap float32
	window  int
	// newK and newV (t, kv_heads·head_dim) receive the pass's keys after
	// RoPE and its values, unrounded, for the caller's cache.
	newK, newV []float32
}

// dims are the attention's sizes.
func (a *attention) dims() (heads, kvHeads, hd, qDim, kvDim int) {
	c := a.m.cfg
	return c.Heads, c.KVHeads, c.HeadDim, c.Heads * c.HeadDim, c.KVHeads * c.HeadDim
}

// rope rotates row r of x (heads of head_dim) by its position's angles;
// back rotates by minus them, the transpose, for gradients.
func (a *attention) rope(x []float32, r int, back bool) {
	half := a.m.cfg.RopeDim / 2
	cos, sin := a.cos[r*half:(r+1)*half], a.sin[r*half:(r+1)*half]
	if back {
		neg := make([]float32, half)
		for i, s := range sin {
			neg[i] = -s
		}
		sin = neg
	}
	a.rot.Apply(x, a.m.cfg.HeadDim, cos, sin)
}

// roundRow rounds x to F16 precision in place.
func roundRow(x []float32) {
	for i, v := range x {
		x[i] = kernels.FP16ToFP32(kernels.FP32ToFP16(v))
	}
}

// prepared are a pass's roped queries and all keys and values it sees.
type prepared struct {
	q    []float32 // (t, q_dim) after RoPE (and rounding)
	k, v []float32 // (past+t, kv_dim), the past's then the pass's
}

// prepare ropes q and k of the pass and joins the keys and values to the
// past's.
func (a *attention) prepare(q, k, v []float32) *prepared {
	_, _, _, qDim, kvDim := a.dims()
	n := a.past + a.t
	p := &prepared{q: append([]float32(nil), q...), k: make([]float32, n*kvDim), v: make([]float32, n*kvDim)}
	copy(p.k, a.pastK)
	copy(p.v, a.pastV)
	copy(p.k[a.past*kvDim:], k)
	copy(p.v[a.past*kvDim:], v)
	for r := range a.t {
		a.rope(p.q[r*qDim:(r+1)*qDim], r, false)
		a.rope(p.k[(a.past+r)*kvDim:(a.past+r+1)*kvDim], r, false)
	}
	if a.qScale != 1 {
		kernels.Scale(a.qScale, p.q)
	}
	if a.newK != nil {
		copy(a.newK, p.k[a.past*kvDim:])
		copy(a.newV, p.v[a.past*kvDim:])
	}
	if a.round {
		roundRow(p.q)
		roundRow(p.k[a.past*kvDim:])
		roundRow(p.v[a.past*kvDim:])
	}
	return p
}

// first is the first position row r sees: 0, or the start of its window.
func (a *attention) first(r int) int {
	if a.window == 0 {
		return 0
	}
	return max(0, a.past+r+1-a.window)
}

// weights sets w (past+r+1) to the softmax attention weights of head h of
// row r, 0 before its window; when capped is not nil it receives, at each
// position seen, the derivative of the cap, 1 − tanh²(s/c).
func (a *attention) weights(p *prepared, r, h int, w, capped []float32) {
	heads, kvHeads, hd, qDim, kvDim := a.dims()
	g := h / (heads / kvHeads)
	q := p.q[r*qDim+h*hd:][:hd]
	j0 := a.first(r)
	clear(w[:j0])
	for j := j0; j < len(w); j++ {
		w[j] = kernels.DotF32(q, p.k[j*kvDim+g*hd:][:hd]) * a.sScale
	}
	if c := a.softCap; c != 0 {
		kernels.SoftCap(w[j0:], c)
		if capped != nil {
			for j := j0; j < len(w); j++ {
				th := w[j] / c
				capped[j] = 1 - th*th
			}
		}
	}
	kernels.Softmax(w[j0:])
	if a.round {
		roundRow(w[j0:])
	}
}

// forward computes the attention output (t, q_dim).
func (a *attention) forward(q, k, v []float32) []float32 {
	heads, kvHeads, hd, qDim, kvDim := a.dims()
	p := a.prepare(q, k, v)
	out := make([]float32, a.t*qDim)
	w := make([]float32, a.past+a.t)
	for r := range a.t {
		for h := range heads {
			g := h / (heads / kvHeads)
			wr := w[:a.past+r+1]
			a.weights(p, r, h, wr, nil)
			o := out[r*qDim+h*hd:][:hd]
			for j, x := range wr {
				kernels.Axpy(x, p.v[j*kvDim+g*hd:][:hd], o)
			}
		}
	}
	return out
}

// backward returns [dq | dk | dv] (t, q_dim + 2·kv_dim), the gradients of
// the pass's q, k and v (before RoPE) given dOut (t, q_dim), the gradient
// of the output. The past is constant.
func (a *attention) backward(q, k, v, dOut []float32) []float32 {
	heads, kvHeads, hd, qDim, kvDim := a.dims()
	p := a.prepare(q, k, v)
	n := a.past + a.t
	dq := make([]float32, a.t*qDim)
	dk := make([]float32, n*kvDim)
	dv := make([]float32, n*kvDim)
	w := make([]float32, n)
	dp := make([]float32, n)
	capped := make([]float32, n)
	if a.softCap == 0 {
		capped = nil
	}
	for r := range a.t {
		for h := range heads {
			g := h / (heads / kvHeads)
			wr, dpr := w[:a.past+r+1], dp[:a.past+r+1]
			a.weights(p, r, h, wr, capped)
			do := dOut[r*qDim+h*hd:][:hd]
			var dot float32
			for j, x := range wr {
				dpr[j] = kernels.DotF32(do, p.v[j*kvDim+g*hd:][:hd])
				dot += x * dpr[j]
				kernels.Axpy(x, do, dv[j*kvDim+g*hd:][:hd])
			}
			qr := p.q[r*qDim+h*hd:][:hd]
			dqr := dq[r*qDim+h*hd:][:hd]
			for j, x := range wr {
				ds := x * (dpr[j] - dot) * a.sScale
				if capped != nil {
					ds *= capped[j]
				}
				kernels.Axpy(ds, p.k[j*kvDim+g*hd:][:hd], dqr)
				kernels.Axpy(ds, qr, dk[j*kvDim+g*hd:][:hd])
			}
		}
	}
	if a.qScale != 1 {
		kernels.Scale(a.qScale, dq)
	}
	out := make([]float32, a.t*(qDim+2*kvDim))
	for r := range a.t {
		a.rope(dq[r*qDim:(r+1)*qDim], r, true)
		kr := dk[(a.past+r)*kvDim : (a.past+r+1)*kvDim]
		a.rope(kr, r, true)
		row := out[r*(qDim+2*kvDim):]
		copy(row, dq[r*qDim:(r+1)*qDim])
		copy(row[qDim:], kr)
		copy(row[qDim+kvDim:], dv[(a.past+r)*kvDim:(a.past+r+1)*kvDim])
	}
	return out
}

// attnOp is the attention as a Gorgonia op of q, k and v.
type attnOp struct{ a *attention }

// attnGradOp is its gradient: of q, k, v and the output's gradient, the
// joined [dq | dk | dv].
type attnGradOp struct{ a *attention }

func (attnOp) Arity() int     { return 3 }
func (attnGradOp) Arity() int { return 4 }

func matrixType() hm.Type { return G.TensorType{Dims: 2, Of: tensor.Float32} }

func (o attnOp) Type() hm.Type {
	t := matrixType()
	return hm.NewFnType(t, t, t, t)
}
func (o attnGradOp) Type() hm.Type {
	t := matrixType()
	return hm.NewFnType(t, t, t, t, t)
}

func (o attnOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	_, _, _, qDim, _ := o.a.dims()
	return tensor.Shape{o.a.t, qDim}, nil
}
func (o attnGradOp) InferShape(...G.DimSizer) (tensor.Shape, error) {
	_, _, _, qDim, kvDim := o.a.dims()
	return tensor.Shape{o.a.t, qDim + 2*kvDim}, nil
}

// data reads the F32 data of op inputs.
func data(in []G.Value) ([][]float32, error) {
	out := make([][]float32, len(in))
	for i, v := range in {
		t, ok := v.(*tensor.Dense)
		if !ok || t.Dtype() != tensor.Float32 {
			return nil, fmt.Errorf("gorgonia: attention input %d is %T", i, v)
		}
		out[i] = t.Float32s()
	}
	return out, nil
}

func (o attnOp) Do(in ...G.Value) (G.Value, error) {
	d, err := data(in)
	if err != nil {
		return nil, err
	}
	_, _, _, qDim, _ := o.a.dims()
	return tensor.New(tensor.WithShape(o.a.t, qDim), tensor.WithBacking(o.a.forward(d[0], d[1], d[2]))), nil
}

func (o attnGradOp) Do(in ...G.Value) (G.Value, error) {
	d, err := data(in)
	if err != nil {
		return nil, err
	}
	_, _, _, qDim, kvDim := o.a.dims()
	return tensor.New(tensor.WithShape(o.a.t, qDim+2*kvDim), tensor.WithBacking(o.a.backward(d[0], d[1], d[2], d[3]))), nil
}

func (attnOp) ReturnsPtr() bool         { return false }
func (attnGradOp) ReturnsPtr() bool     { return false }
func (attnOp) CallsExtern() bool        { return false }
func (attnGradOp) CallsExtern() bool    { return false }
func (attnOp) OverwritesInput() int     { return -1 }
func (attnGradOp) OverwritesInput() int { return -1 }

// Every op of a graph is its own: Gorgonia merges nodes whose ops hash
// alike, and two layers' attentions differ in their context.
func (o attnOp) WriteHash(h hash.Hash)     { fmt.Fprintf(h, "attention%p", o.a) }
func (o attnGradOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "attention-grad%p", o.a) }
func (o attnOp) Hashcode() uint32          { return hashOf(o) }
func (o attnGradOp) Hashcode() uint32      { return hashOf(o) }
func (o attnOp) String() string            { return "attention" }
func (o attnGradOp) String() string        { return "attention-grad" }

func hashOf(o G.Op) uint32 {
	h := fnv.New32a()
	o.WriteHash(h)
	return h.Sum32()
}

// DiffWRT and SymDiff make the attention differentiable in q, k and v.
func (attnOp) DiffWRT(int) []bool { return []bool{true, true, true} }

func (o attnOp) SymDiff(in G.Nodes, _, grad *G.Node) (G.Nodes, error) {
	joined, err := G.ApplyOp(attnGradOp(o), in[0], in[1], in[2], grad)
	if err != nil {
		return nil, err
	}
	_, _, _, qDim, kvDim := o.a.dims()
	dq, err := G.Slice(joined, nil, G.S(0, qDim))
	if err != nil {
		return nil, err
	}
	dk, err := G.Slice(joined, nil, G.S(qDim, qDim+kvDim))
	if err != nil {
		return nil, err
	}
	dv, err := G.Slice(joined, nil, G.S(qDim+kvDim, qDim+2*kvDim))
	if err != nil {
		return nil, err
	}
	return G.Nodes{dq, dk, dv}, nil
}

// The base model's weights are frozen: a product with one is an op of its
// input alone, y = x·Wᵀ with W (out, in) row-major as the file holds it,
// whose gradient is dy·W, so that differentiating never makes the weights'
// own gradients (for the output projection of a 32000-token vocabulary,
// 100 MB an update). Both are rows of kernels' dot products and axpys.

// linearOp is x (t, in) ↦ x·Wᵀ (t, out) for a frozen W.
type linearOp struct{ l *linear }

// linearGradOp is dy (t, out) ↦ dy·W (t, in).
type linearGradOp struct{ l *linear }

func (linearOp) Arity() int     { return 1 }
func (linearGradOp) Arity() int { return 1 }
func (linearOp) Type() hm.Type  { t := matrixType(); return hm.NewFnType(t, t) }
func (linearGradOp) Type() hm.Type {
	t := matrixType()
	return hm.NewFnType(t, t)
}

func rowsOf(in []G.DimSizer) (int, error) {
	s, ok := in[0].(tensor.Shape)
	if !ok || len(s) != 2 {
		return 0, fmt.Errorf("gorgonia: a linear layer of %v", in[0])
	}
	return s[0], nil
}

func (o linearOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	t, err := rowsOf(in)
	return tensor.Shape{t, o.l.out}, err
}
func (o linearGradOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	t, err := rowsOf(in)
	return tensor.Shape{t, o.l.in}, err
}

func (o linearOp) Do(in ...G.Value) (G.Value, error) {
	d, err := data(in)
	if err != nil {
		return nil, err
	}
	l := o.l
	t := len(d[0]) / l.in
	y := make([]float32, t*l.out)
	for r := range t {
		x := d[0][r*l.in : (r+1)*l.in]
		yr := y[r*l.out : (r+1)*l.out]
		for c := range l.out {
			yr[c] = kernels.DotF32(l.w[c*l.in:(c+1)*l.in], x)
		}
	}
	return tensor.New(tensor.WithShape(t, l.out), tensor.WithBacking(y)), nil
}

func (o linearGradOp) Do(in ...G.Value) (G.Value, error) {
	d, err := data(in)
	if err != nil {
		return nil, err
	}
	l := o.l
	t := len(d[0]) / l.out
	dx := make([]float32, t*l.in)
	for r := range t {
		dy := d[0][r*l.out : (r+1)*l.out]
		dxr := dx[r*l.in : (r+1)*l.in]
		for c, g := range dy {
			if g != 0 {
				kernels.Axpy(g, l.w[c*l.in:(c+1)*l.in], dxr)
			}
		}
	}
	return tensor.New(tensor.WithShape(t, l.in), tensor.WithBacking(dx)), nil
}

func (linearOp) ReturnsPtr() bool            { return false }
func (linearGradOp) ReturnsPtr() bool        { return false }
func (linearOp) CallsExtern() bool           { return false }
func (linearGradOp) CallsExtern() bool       { return false }
func (linearOp) OverwritesInput() int        { return -1 }
func (linearGradOp) OverwritesInput() int    { return -1 }
func (o linearOp) WriteHash(h hash.Hash)     { fmt.Fprintf(h, "linear%p", o.l) }
func (o linearGradOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "linear-grad%p", o.l) }
func (o linearOp) Hashcode() uint32          { return hashOf(o) }
func (o linearGradOp) Hashcode() uint32      { return hashOf(o) }
func (o linearOp) String() string            { return "linear " + o.l.name }
func (o linearGradOp) String() string        { return "linear-grad " + o.l.name }

func (linearOp) DiffWRT(int) []bool { return []bool{true} }

func (o linearOp) SymDiff(_ G.Nodes, _, grad *G.Node) (G.Nodes, error) {
	dx, err := G.ApplyOp(linearGradOp(o), grad)
	if err != nil {
		return nil, err
	}
	return G.Nodes{dx}, nil
}

// GeGLU's GELU is ggml's: the tanh approximation looked up in a table of
// every F16 input (kernels.GeGLU), which no composition of Gorgonia's ops
// reproduces to the bit. geluOp computes it so; its gradient is the tanh
// approximation's derivative at the unrounded input (the table's rounding
// passes straight through, as the F16 rounding of keys and values does).

// geluOp is x ↦ gelu(x), element-wise.
type geluOp struct{}

// geluGradOp is (x, dy) ↦ dy ⊙ gelu'(x).
type geluGradOp struct{}

func (geluOp) Arity() int     { return 1 }
func (geluGradOp) Arity() int { return 2 }
func (geluOp) Type() hm.Type  { t := matrixType(); return hm.NewFnType(t, t) }
func (geluGradOp) Type() hm.Type {
	t := matrixType()
	return hm.NewFnType(t, t, t)
}
func (geluOp) InferShape(in ...G.DimSizer) (tensor.Shape, error)     { return shapeOf(in[0]) }
func (geluGradOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) { return shapeOf(in[0]) }

// shapeOf is the shape of an element-wise op's first input.
func shapeOf(d G.DimSizer) (tensor.Shape, error) {
	s, ok := d.(tensor.Shape)
	if !ok || len(s) != 2 {
		return nil, fmt.Errorf("gorgonia: an element-wise op of %v", d)
	}
	return s.Clone(), nil
}

func (geluOp) Do(in ...G.Value) (G.Value, error) {
	d, err := data(in)
	if err != nil {
		return nil, err
	}
	x := d[0]
	ones := make([]float32, len(x))
	for i := range ones {
		ones[i] = 1
	}
	y := make([]float32, len(x))
	kernels.GeGLU(y, x, ones)
	return tensor.New(tensor.WithShape(in[0].Shape().Clone()...), tensor.WithBacking(y)), nil
}

func (geluGradOp) Do(in ...G.Value) (G.Value, error) {
	d, err := data(in)
	if err != nil {
		return nil, err
	}
	x, dy := d[0], d[1]
	dx := make([]float32, len(x))
	const a, b = 0.7978845608028654, 0.044715 // sqrt(2/π), and the cubic's coefficient
	for i, v := range x {
		u := float64(v)
		th := math.Tanh(a * (u + b*u*u*u))
		dx[i] = dy[i] * float32(0.5*(1+th)+0.5*u*(1-th*th)*a*(1+3*b*u*u))
	}
	return tensor.New(tensor.WithShape(in[0].Shape().Clone()...), tensor.WithBacking(dx)), nil
}

func (geluOp) ReturnsPtr() bool          { return false }
func (geluGradOp) ReturnsPtr() bool      { return false }
func (geluOp) CallsExtern() bool         { return false }
func (geluGradOp) CallsExtern() bool     { return false }
func (geluOp) OverwritesInput() int      { return -1 }
func (geluGradOp) OverwritesInput() int  { return -1 }
func (geluOp) WriteHash(h hash.Hash)     { fmt.Fprint(h, "gelu") }
func (geluGradOp) WriteHash(h hash.Hash) { fmt.Fprint(h, "gelu-grad") }
func (o geluOp) Hashcode() uint32        { return hashOf(o) }
func (o geluGradOp) Hashcode() uint32    { return hashOf(o) }
func (geluOp) String() string            { return "gelu" }
func (geluGradOp) String() string        { return "gelu-grad" }

// DiffWRT and SymDiff make geluOp differentiable.
func (geluOp) DiffWRT(int) []bool { return []bool{true} }

func (geluOp) SymDiff(in G.Nodes, _, grad *G.Node) (G.Nodes, error) {
	dx, err := G.ApplyOp(geluGradOp{}, in[0], grad)
	if err != nil {
		return nil, err
	}
	return G.Nodes{dx}, nil
}
