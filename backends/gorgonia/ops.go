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
func rope[T float](a *attention, x []T, r int, back bool) {
	half := a.m.cfg.RopeDim / 2
	ropeRow(a.rot, x, a.m.cfg.HeadDim, a.cos[r*half:(r+1)*half], a.sin[r*half:(r+1)*half], back)
}

// roundRow rounds x to F16 precision in place.
func roundRow[T float](x []T) {
	for i, v := range x {
		x[i] = T(kernels.FP16ToFP32(kernels.FP32ToFP16(float32(v))))
	}
}

// prepared are a pass's roped queries and all keys and values it sees.
type prepared[T float] struct {
	q    []T // (t, q_dim) after RoPE (and rounding)
	k, v []T // (past+t, kv_dim), the past's then the pass's
}

// prepare ropes q and k of the pass and joins the keys and values to the
// past's.
func prepare[T float](a *attention, q, k, v []T) *prepared[T] {
	_, _, _, qDim, kvDim := a.dims()
	n := a.past + a.t
	p := &prepared[T]{q: append([]T(nil), q...), k: make([]T, n*kvDim), v: make([]T, n*kvDim)}
	convert(p.k, a.pastK)
	convert(p.v, a.pastV)
	copy(p.k[a.past*kvDim:], k)
	copy(p.v[a.past*kvDim:], v)
	for r := range a.t {
		rope(a, p.q[r*qDim:(r+1)*qDim], r, false)
		rope(a, p.k[(a.past+r)*kvDim:(a.past+r+1)*kvDim], r, false)
	}
	if a.qScale != 1 {
		scaleVec(T(a.qScale), p.q)
	}
	if a.newK != nil {
		convert(a.newK, p.k[a.past*kvDim:])
		convert(a.newV, p.v[a.past*kvDim:])
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

// attnWeights sets w (past+r+1) to the softmax attention weights of head h of
// row r, 0 before its window; when capped is not nil it receives, at each
// position seen, the derivative of the cap, 1 − tanh²(s/c).
func attnWeights[T float](a *attention, p *prepared[T], r, h int, w, capped []T) {
	heads, kvHeads, hd, qDim, kvDim := a.dims()
	g := h / (heads / kvHeads)
	q := p.q[r*qDim+h*hd:][:hd]
	j0 := a.first(r)
	clear(w[:j0])
	for j := j0; j < len(w); j++ {
		w[j] = dot(q, p.k[j*kvDim+g*hd:][:hd]) * T(a.sScale)
	}
	if c := a.softCap; c != 0 {
		softCap(w[j0:], c)
		if capped != nil {
			for j := j0; j < len(w); j++ {
				th := w[j] / T(c)
				capped[j] = 1 - th*th
			}
		}
	}
	softmax(w[j0:])
	if a.round {
		roundRow(w[j0:])
	}
}

// attend computes the attention output (t, q_dim).
func attend[T float](a *attention, q, k, v []T) []T {
	heads, kvHeads, hd, qDim, kvDim := a.dims()
	p := prepare(a, q, k, v)
	out := make([]T, a.t*qDim)
	w := make([]T, a.past+a.t)
	for r := range a.t {
		for h := range heads {
			g := h / (heads / kvHeads)
			wr := w[:a.past+r+1]
			attnWeights(a, p, r, h, wr, nil)
			o := out[r*qDim+h*hd:][:hd]
			for j, x := range wr {
				axpy(x, p.v[j*kvDim+g*hd:][:hd], o)
			}
		}
	}
	return out
}

// attendBackward returns [dq | dk | dv] (t, q_dim + 2·kv_dim), the
// gradients of the pass's q, k and v (before RoPE) given dOut (t, q_dim),
// the gradient of the output. The past is constant.
func attendBackward[T float](a *attention, q, k, v, dOut []T) []T {
	heads, kvHeads, hd, qDim, kvDim := a.dims()
	p := prepare(a, q, k, v)
	n := a.past + a.t
	dq := make([]T, a.t*qDim)
	dk := make([]T, n*kvDim)
	dv := make([]T, n*kvDim)
	w := make([]T, n)
	dp := make([]T, n)
	capped := make([]T, n)
	if a.softCap == 0 {
		capped = nil
	}
	for r := range a.t {
		for h := range heads {
			g := h / (heads / kvHeads)
			wr, dpr := w[:a.past+r+1], dp[:a.past+r+1]
			attnWeights(a, p, r, h, wr, capped)
			do := dOut[r*qDim+h*hd:][:hd]
			var sum T
			for j, x := range wr {
				dpr[j] = dot(do, p.v[j*kvDim+g*hd:][:hd])
				sum += x * dpr[j]
				axpy(x, do, dv[j*kvDim+g*hd:][:hd])
			}
			qr := p.q[r*qDim+h*hd:][:hd]
			dqr := dq[r*qDim+h*hd:][:hd]
			for j, x := range wr {
				ds := x * (dpr[j] - sum) * T(a.sScale)
				if capped != nil {
					ds *= capped[j]
				}
				axpy(ds, p.k[j*kvDim+g*hd:][:hd], dqr)
				axpy(ds, qr, dk[j*kvDim+g*hd:][:hd])
			}
		}
	}
	if a.qScale != 1 {
		scaleVec(T(a.qScale), dq)
	}
	out := make([]T, a.t*(qDim+2*kvDim))
	for r := range a.t {
		rope(a, dq[r*qDim:(r+1)*qDim], r, true)
		kr := dk[(a.past+r)*kvDim : (a.past+r+1)*kvDim]
		rope(a, kr, r, true)
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

// matrixType is the type of the ops' inputs and outputs: matrices of one
// element type, F32 or F64, as the graph's.
func matrixType() hm.Type { return G.TensorType{Dims: 2, Of: hm.TypeVariable('a')} }

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

// data reads the data of op inputs, all of element type T.
func data[T float](in []G.Value) ([][]T, error) {
	out := make([][]T, len(in))
	for i, v := range in {
		t, ok := v.(*tensor.Dense)
		if !ok {
			return nil, fmt.Errorf("gorgonia: op input %d is %T", i, v)
		}
		d, ok := t.Data().([]T)
		if !ok {
			return nil, fmt.Errorf("gorgonia: op input %d is %v, input 0 %v", i, t.Dtype(), in[0].Dtype())
		}
		out[i] = d
	}
	return out, nil
}

// apply runs f on the inputs' data in their element type, F32 or F64
// (the two instances of an op's computation), and makes the (rows, cols)
// result.
func apply(in []G.Value, rows, cols int, f32 func([][]float32) []float32, f64 func([][]float64) []float64) (G.Value, error) {
	switch in[0].Dtype() {
	case tensor.Float32:
		d, err := data[float32](in)
		if err != nil {
			return nil, err
		}
		return tensor.New(tensor.WithShape(rows, cols), tensor.WithBacking(f32(d))), nil
	case tensor.Float64:
		d, err := data[float64](in)
		if err != nil {
			return nil, err
		}
		return tensor.New(tensor.WithShape(rows, cols), tensor.WithBacking(f64(d))), nil
	}
	return nil, fmt.Errorf("gorgonia: an op of %v values", in[0].Dtype())
}

func (o attnOp) Do(in ...G.Value) (G.Value, error) {
	_, _, _, qDim, _ := o.a.dims()
	return apply(in, o.a.t, qDim,
		func(d [][]float32) []float32 { return attend(o.a, d[0], d[1], d[2]) },
		func(d [][]float64) []float64 { return attend(o.a, d[0], d[1], d[2]) })
}

func (o attnGradOp) Do(in ...G.Value) (G.Value, error) {
	_, _, _, qDim, kvDim := o.a.dims()
	return apply(in, o.a.t, qDim+2*kvDim,
		func(d [][]float32) []float32 { return attendBackward(o.a, d[0], d[1], d[2], d[3]) },
		func(d [][]float64) []float64 { return attendBackward(o.a, d[0], d[1], d[2], d[3]) })
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
// 100 MB an update). Both are rows of dot products and axpys (kernels' in
// F32).

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

// product is x (t, in) times Wᵀ.
func product[T float](l *linear, x []T) []T {
	t := len(x) / l.in
	y := make([]T, t*l.out)
	x32, f32 := any(x).([]float32)
	for r := range t {
		yr := y[r*l.out : (r+1)*l.out]
		for c := range l.out {
			w := l.w[c*l.in : (c+1)*l.in]
			if f32 {
				yr[c] = T(kernels.DotF32(w, x32[r*l.in:(r+1)*l.in]))
				continue
			}
			yr[c] = dotMixed(w, x[r*l.in:(r+1)*l.in])
		}
	}
	return y
}

// productGrad is dy (t, out) times W.
func productGrad[T float](l *linear, dy []T) []T {
	t := len(dy) / l.out
	dx := make([]T, t*l.in)
	dx32, f32 := any(dx).([]float32)
	for r := range t {
		dxr := dx[r*l.in : (r+1)*l.in]
		for c, g := range dy[r*l.out : (r+1)*l.out] {
			if g == 0 {
				continue
			}
			w := l.w[c*l.in : (c+1)*l.in]
			if f32 {
				kernels.Axpy(float32(g), w, dx32[r*l.in:(r+1)*l.in])
				continue
			}
			for i, v := range w {
				dxr[i] += g * T(v)
			}
		}
	}
	return dx
}

func (o linearOp) Do(in ...G.Value) (G.Value, error) {
	return apply(in, in[0].Shape()[0], o.l.out,
		func(d [][]float32) []float32 { return product(o.l, d[0]) },
		func(d [][]float64) []float64 { return product(o.l, d[0]) })
}

func (o linearGradOp) Do(in ...G.Value) (G.Value, error) {
	return apply(in, in[0].Shape()[0], o.l.in,
		func(d [][]float32) []float32 { return productGrad(o.l, d[0]) },
		func(d [][]float64) []float64 { return productGrad(o.l, d[0]) })
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

// GeGLU's GELU is ggml's in F32: the tanh approximation looked up in a
// table of every F16 input (kernels.GeGLU), which no composition of
// Gorgonia's ops reproduces to the bit. geluOp computes it so; its gradient
// is the tanh approximation's derivative at the unrounded input (the
// table's rounding passes straight through, as the F16 rounding of keys
// and values does). In F64 (gradient checks) it is the tanh approximation
// itself, of which that derivative is the exact gradient.

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

// The tanh approximation of GELU: 0.5·x·(1 + tanh(a·(x + b·x³))).
const geluA, geluB = 0.7978845608028654, 0.044715 // sqrt(2/π), and the cubic's coefficient

func (geluOp) Do(in ...G.Value) (G.Value, error) {
	s := in[0].Shape()
	return apply(in, s[0], s[1],
		func(d [][]float32) []float32 {
			x := d[0]
			ones := make([]float32, len(x))
			for i := range ones {
				ones[i] = 1
			}
			y := make([]float32, len(x))
			kernels.GeGLU(y, x, ones)
			return y
		},
		func(d [][]float64) []float64 {
			y := make([]float64, len(d[0]))
			for i, u := range d[0] {
				y[i] = 0.5 * u * (1 + math.Tanh(geluA*(u+geluB*u*u*u)))
			}
			return y
		})
}

// geluGrad is dy ⊙ gelu'(x), computed in float64.
func geluGrad[T float](x, dy []T) []T {
	dx := make([]T, len(x))
	for i, v := range x {
		u := float64(v)
		th := math.Tanh(geluA * (u + geluB*u*u*u))
		dx[i] = dy[i] * T(0.5*(1+th)+0.5*u*(1-th*th)*geluA*(1+3*geluB*u*u))
	}
	return dx
}

func (geluGradOp) Do(in ...G.Value) (G.Value, error) {
	s := in[0].Shape()
	return apply(in, s[0], s[1],
		func(d [][]float32) []float32 { return geluGrad(d[0], d[1]) },
		func(d [][]float64) []float64 { return geluGrad(d[0], d[1]) })
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

// The element type of the ops' computations: float32 when serving and
// training (kernels' SIMD dot products, axpys, softmax and RoPE), float64
// when gradients are checked (the same steps as plain loops), so that one
// implementation of each op and its gradient runs in both.
type float interface{ float32 | float64 }

// convert copies src into dst, converting each element.
func convert[D, S float](dst []D, src []S) {
	for i, v := range src {
		dst[i] = D(v)
	}
}

// dotMixed is Σ w[i]·x[i] in T, in four independent sums, which the CPU
// adds in parallel.
func dotMixed[T float](w []float32, x []T) T {
	var s0, s1, s2, s3 T
	i := 0
	for ; i+4 <= len(x); i += 4 {
		s0 += T(w[i]) * x[i]
		s1 += T(w[i+1]) * x[i+1]
		s2 += T(w[i+2]) * x[i+2]
		s3 += T(w[i+3]) * x[i+3]
	}
	for ; i < len(x); i++ {
		s0 += T(w[i]) * x[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// dot is Σ a[i]·b[i].
func dot[T float](a, b []T) T {
	if a32, ok := any(a).([]float32); ok {
		return T(kernels.DotF32(a32, any(b).([]float32)))
	}
	var s T
	for i, x := range a {
		s += x * b[i]
	}
	return s
}

// axpy is y += alpha·x.
func axpy[T float](alpha T, x, y []T) {
	if x32, ok := any(x).([]float32); ok {
		kernels.Axpy(float32(alpha), x32, any(y).([]float32))
		return
	}
	for i, v := range x {
		y[i] += alpha * v
	}
}

// scaleVec is x *= alpha.
func scaleVec[T float](alpha T, x []T) {
	if x32, ok := any(x).([]float32); ok {
		kernels.Scale(float32(alpha), x32)
		return
	}
	for i := range x {
		x[i] *= alpha
	}
}

// softmax replaces x by its softmax.
func softmax[T float](x []T) {
	if x32, ok := any(x).([]float32); ok {
		kernels.Softmax(x32)
		return
	}
	m := x[0]
	for _, v := range x {
		m = max(m, v)
	}
	var sum T
	for i, v := range x {
		x[i] = T(math.Exp(float64(v - m)))
		sum += x[i]
	}
	for i := range x {
		x[i] /= sum
	}
}

// softCap replaces x[i] by c·tanh(x[i]/c).
func softCap[T float](x []T, c float32) {
	if x32, ok := any(x).([]float32); ok {
		kernels.SoftCap(x32, c)
		return
	}
	for i, v := range x {
		x[i] = T(c) * T(math.Tanh(float64(v/T(c))))
	}
}

// ropeRow rotates every head (of head_dim) of x by the angles cos and sin
// as r rotates; back rotates by minus them, the transpose.
func ropeRow[T float](r *kernels.Rope, x []T, headDim int, cos, sin []float32, back bool) {
	if back {
		neg := make([]float32, len(sin))
		for i, s := range sin {
			neg[i] = -s
		}
		sin = neg
	}
	if x32, ok := any(x).([]float32); ok {
		r.Apply(x32, headDim, cos, sin)
		return
	}
	half := r.Dims / 2
	for h := 0; h < len(x); h += headDim {
		for i := range half {
			i0, i1 := h+2*i, h+2*i+1
			if r.NeoX {
				i0, i1 = h+i, h+i+half
			}
			c, s := T(cos[i]), T(sin[i])
			x0, x1 := x[i0], x[i1]
			x[i0], x[i1] = x0*c-x1*s, x0*s+x1*c
		}
	}
}
