package gorgonia

import (
	"fmt"
	"math"
	"strconv"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/ruvllm/ruvllm/models"
)

// The forward pass of one sequence as a Gorgonia graph, composed per
// architecture from the pieces in this file as the native backend's blocks
// are: every product is a node (x·Wᵀ with the weight held transposed), so
// that the same graph gives logits when run and, through Gorgonia's
// symbolic differentiation, the gradients of a LoRA adapter's factors. Only
// matrix products, element-wise ops, slices, concatenation and softmax are
// used; broadcasting is written as outer products (a column of ones times
// a row), which Gorgonia differentiates like any product.

// loraFactors are one target's update in a graph: y += scale·(x·at)·bt.
type loraFactors struct {
	at    *G.Node // (in, rank): A transposed
	bt    *G.Node // (rank, out): B transposed
	scale float32
}

// pastKV are the cached keys and values a pass attends to before its own:
// per layer, (past, kv_heads·head_dim) each.
type pastKV struct {
	n    int
	k, v [][]float32
}

// graph is a Gorgonia graph and the count of its inputs, by which they are
// named: one graph may hold several sequences' passes (the chosen and the
// rejected completion of a preference pair) sharing an adapter's nodes.
type graph struct {
	g      *G.ExprGraph
	inputs int
}

// net builds the graph of one pass over a sequence's tokens.
type net struct {
	*graph
	m   *Model
	t   int // tokens of the pass
	pos int // position of the first
	// lora are the adapter's factors by target name; nil runs the base
	// model.
	lora map[string]*loraFactors
	// roundKV rounds the pass's keys and values to F16 before attention,
	// as an F16 cache stores them, and the queries and attention weights
	// too, as ggml's products with F16 keys and values do (llama.cpp's
	// arithmetic, which the native backend follows).
	roundKV bool
	past    pastKV
	// cos and sin (t, head_dim) and rot (head_dim, head_dim) make RoPE
	// x⊙cos + (x·rot)⊙sin; ones (t, 1) broadcasts rows.
	cos, sin, rot, ones *G.Node
	mask                *G.Node // (t, past+t): 0 where a token may look, -inf elsewhere
	// newK and newV are each layer's keys and values of the pass (after
	// RoPE, before rounding), a node (t, head_dim) per kv head, for the
	// caller to store in its cache. (A concatenation of the heads came out
	// of Gorgonia's machine with the value of a later concatenation.)
	newK, newV [][]*G.Node
	// hidden are the final normalised hidden states of the rows forward
	// returns logits of.
	hidden *G.Node
}

// newGraph makes an empty graph.
func newGraph() *graph { return &graph{g: G.NewGraph()} }

// matrix makes a (rows, cols) input node holding data (not copied).
func (gr *graph) matrix(data []float32, rows, cols int) *G.Node {
	return gr.dense(tensor.New(tensor.WithShape(rows, cols), tensor.WithBacking(data)))
}

// dense makes an input node of t. Every input gets a name of its own:
// Gorgonia takes two unnamed inputs of one shape for the same node.
func (gr *graph) dense(t *tensor.Dense) *G.Node {
	s := t.Shape()
	gr.inputs++
	return G.NewMatrix(gr.g, tensor.Float32, G.WithShape(s[0], s[1]), G.WithValue(t), G.WithName("in"+strconv.Itoa(gr.inputs)))
}

// newNet prepares, in gr, the pass of t tokens from position pos after the
// past keys and values.
func newNet(gr *graph, m *Model, t, pos int, past pastKV) *net {
	n := &net{graph: gr, m: m, t: t, pos: pos, past: past}
	cfg := m.cfg
	hd, half := cfg.HeadDim, cfg.RopeDim/2
	cos, sin := make([]float32, t*hd), make([]float32, t*hd)
	c, s := make([]float32, half), make([]float32, half)
	for r := range t {
		m.rope.Angles(pos+r, c, s)
		row := r * hd
		for i := range hd {
			cos[row+i] = 1 // dimensions past the rotated ones stay
		}
		for i := range half {
			a, b := 2*i, 2*i+1
			if cfg.Rope == models.RopeNeoX {
				a, b = i, i+half
			}
			cos[row+a], cos[row+b] = c[i], c[i]
			sin[row+a], sin[row+b] = s[i], s[i]
		}
	}
	n.cos, n.sin = n.matrix(cos, t, hd), n.matrix(sin, t, hd)
	n.rot = n.dense(m.rot)
	ones := make([]float32, t)
	for i := range ones {
		ones[i] = 1
	}
	n.ones = n.matrix(ones, t, 1)
	cols := past.n + t
	mask := make([]float32, t*cols)
	for r := range t {
		for j := past.n + r + 1; j < cols; j++ {
			mask[r*cols+j] = float32(math.Inf(-1))
		}
	}
	n.mask = n.matrix(mask, t, cols)
	return n
}

// must panics with a graph-building error; build recovers it, so that a
// shape mistake is an error of the call, not a crash.
func must(x *G.Node, err error) *G.Node {
	if err != nil {
		panic(graphError{err})
	}
	return x
}

type graphError struct{ err error }

// build runs f, turning a panic of must into an error.
func build(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			ge, ok := r.(graphError)
			if !ok {
				panic(r)
			}
			err = fmt.Errorf("gorgonia: building the graph: %w", ge.err)
		}
	}()
	f()
	return nil
}

// interleave joins the values of heads, each (t, w), into rows of t
// tokens: (t, len(heads)·w).
func interleave(heads []*G.Node, t int) []float32 {
	w := len(floats(heads[0])) / t
	out := make([]float32, t*w*len(heads))
	for h, x := range heads {
		v := floats(x)
		for r := range t {
			copy(out[(r*len(heads)+h)*w:], v[r*w:(r+1)*w])
		}
	}
	return out
}

// floats is the F32 data of a node's value after a run of a machine made
// with G.TraceExec, which keeps every node's value (without it the machine
// reuses the memory of intermediate values).
func floats(x *G.Node) []float32 { return x.Value().Data().([]float32) }

// row makes a (1, len(v)) node of v.
func (n *net) row(v []float32) *G.Node { return n.matrix(v, 1, len(v)) }

// norm is RMSNorm of each row of x (t, dim), scaled by w:
// x ⊙ (r·w) with r (t, 1) the rows' inverse root mean squares.
func (n *net) norm(x *G.Node, w []float32) *G.Node {
	dim := len(w)
	mean := make([]float32, dim)
	for i := range mean {
		mean[i] = 1 / float32(dim)
	}
	ms := must(G.Mul(must(G.Square(x)), n.matrix(mean, dim, 1))) // (t, 1)
	eps := G.NewConstant(n.m.cfg.NormEps)
	r := must(G.Inverse(must(G.Sqrt(must(G.Add(ms, eps)))))) // Gorgonia's InverseSqrt has a wrong gradient
	return must(G.HadamardProd(x, must(G.Mul(r, n.row(w)))))
}

// linear is x·Wᵀ (+ bias) (+ the adapter's update of W).
func (n *net) linear(x *G.Node, l *linear, bias []float32) *G.Node {
	y := must(G.Mul(x, n.dense(l.wt)))
	if bias != nil {
		y = must(G.Add(y, must(G.Mul(n.ones, n.row(bias)))))
	}
	if f := n.lora[l.name]; f != nil {
		u := must(G.Mul(must(G.Mul(x, f.at)), f.bt))
		if f.scale != 1 {
			u = must(G.Mul(u, G.NewConstant(f.scale)))
		}
		y = must(G.Add(y, u))
	}
	return y
}

// roundF16 rounds x to F16 precision (the gradient passes through).
func (n *net) roundF16(x *G.Node) *G.Node { return must(G.ApplyOp(roundF16Op{}, x)) }

// rope rotates the head x (t, head_dim).
func (n *net) rope(x *G.Node) *G.Node {
	return must(G.Add(must(G.HadamardProd(x, n.cos)), must(G.HadamardProd(must(G.Mul(x, n.rot)), n.sin))))
}

// cols slices columns [c0, c1) of x.
func cols(x *G.Node, c0, c1 int) *G.Node { return must(G.Slice(x, nil, G.S(c0, c1))) }

// attention is block l's self-attention of its normalised input xn
// (t, dim): Wo·attend(rope(Wq·xn + bq), rope(Wk·xn + bk), Wv·xn + bv), each
// token seeing the past and the pass's tokens up to itself.
func (n *net) attention(l int, t *tensors, xn *G.Node) *G.Node {
	cfg := n.m.cfg
	hd, heads, kvHeads := cfg.HeadDim, cfg.Heads, cfg.KVHeads
	q := n.linear(xn, t.mat(models.AttnQ), t.vec(models.AttnQBias))
	k := n.linear(xn, t.mat(models.AttnK), t.vec(models.AttnKBias))
	v := n.linear(xn, t.mat(models.AttnV), t.vec(models.AttnVBias))
	ks, vs := make([]*G.Node, kvHeads), make([]*G.Node, kvHeads)
	for g := range kvHeads {
		ks[g] = n.rope(cols(k, g*hd, (g+1)*hd))
		vs[g] = cols(v, g*hd, (g+1)*hd)
	}
	n.newK[l], n.newV[l] = append([]*G.Node(nil), ks...), append([]*G.Node(nil), vs...)
	if n.roundKV {
		for g := range kvHeads {
			ks[g], vs[g] = n.roundF16(ks[g]), n.roundF16(vs[g])
		}
	}
	scale := G.NewConstant(1 / float32(math.Sqrt(float64(hd))))
	kT := make([]*G.Node, kvHeads)
	for g := range kvHeads {
		if n.past.n > 0 {
			kvDim := kvHeads * hd
			pk := n.matrix(pastHead(n.past.k[l], n.past.n, kvDim, g*hd, hd), n.past.n, hd)
			pv := n.matrix(pastHead(n.past.v[l], n.past.n, kvDim, g*hd, hd), n.past.n, hd)
			ks[g] = must(G.Concat(0, pk, ks[g]))
			vs[g] = must(G.Concat(0, pv, vs[g]))
		}
		kT[g] = must(G.Transpose(ks[g]))
	}
	outs := make([]*G.Node, heads)
	for h := range heads {
		g := h / (heads / kvHeads)
		qh := n.rope(cols(q, h*hd, (h+1)*hd))
		if n.roundKV {
			qh = n.roundF16(qh)
		}
		s := must(G.Mul(must(G.Mul(qh, kT[g])), scale)) // (t, past+t)
		p := must(G.SoftMax(must(G.Add(s, n.mask)), 1))
		if n.roundKV {
			p = n.roundF16(p)
		}
		outs[h] = must(G.Mul(p, vs[g])) // (t, head_dim)
	}
	att := outs[0]
	if heads > 1 {
		att = must(G.Concat(1, outs...))
	}
	return n.linear(att, t.mat(models.AttnOut), nil)
}

// pastHead copies the columns [c0, c0+w) of the (rows, stride) matrix m.
func pastHead(m []float32, rows, stride, c0, w int) []float32 {
	out := make([]float32, rows*w)
	for r := range rows {
		copy(out[r*w:(r+1)*w], m[r*stride+c0:r*stride+c0+w])
	}
	return out
}

// swiglu is block l's MLP: Wdown·(silu(Wgate·xn) ⊙ Wup·xn).
func (n *net) swiglu(t *tensors, xn *G.Node) *G.Node {
	gate := n.linear(xn, t.mat(models.FFNGate), nil)
	up := n.linear(xn, t.mat(models.FFNUp), nil)
	silu := must(G.HadamardProd(gate, must(G.Sigmoid(gate))))
	return n.linear(must(G.HadamardProd(silu, up)), t.mat(models.FFNDown), nil)
}

// llamaBlock is a pre-norm block of attention and a SwiGLU MLP; qwen2's is
// the same, its biases applied where the block has them.
func llamaBlock(n *net, l int, x *G.Node) *G.Node {
	t := &n.m.w.blocks[l]
	x = must(G.Add(x, n.attention(l, t, n.norm(x, t.vec(models.AttnNorm)))))
	return must(G.Add(x, n.swiglu(t, n.norm(x, t.vec(models.FFNNorm)))))
}

// blocks are the block functions by architecture.
var blocks = map[string]func(n *net, l int, x *G.Node) *G.Node{
	"llama": llamaBlock,
	"qwen2": llamaBlock,
}

// forward builds the pass over the embeddings x (t, dim) and returns the
// logits (r1−r0, vocab) of the rows [r0, r1) of the pass.
func (n *net) forward(x *G.Node, r0, r1 int) *G.Node {
	cfg := n.m.cfg
	n.newK, n.newV = make([][]*G.Node, cfg.Layers), make([][]*G.Node, cfg.Layers)
	block := blocks[cfg.Arch]
	for l := range cfg.Layers {
		x = block(n, l, x)
	}
	if r0 != 0 || r1 != n.t {
		// A product with rows of the identity picks the rows: a slice of
		// one row would drop the row axis.
		pick := make([]float32, (r1-r0)*n.t)
		for r := r0; r < r1; r++ {
			pick[(r-r0)*n.t+r] = 1
		}
		x = must(G.Mul(n.matrix(pick, r1-r0, n.t), x))
	}
	n.hidden = n.norm(x, n.m.w.global.vec(models.OutputNorm))
	return must(G.Mul(n.hidden, n.dense(n.m.w.output.wt)))
}

// completionLogp builds the pass over tokens, prompt then completion, and
// returns the scalar node log p(completion | prompt): the sum of the
// completion tokens' log-softmax under the rows that predict them.
func (n *net) completionLogp(tokens []int32, promptLen int) *G.Node {
	vocab := n.m.cfg.VocabSize
	rows := len(tokens) - promptLen
	logits := n.forward(n.embed(tokens), promptLen-1, len(tokens)-1)
	pick := make([]float32, rows*vocab)
	for r, id := range tokens[promptLen:] {
		pick[r*vocab+int(id)] = 1
	}
	ls := must(G.LogSoftMax(logits, 1))
	return must(G.Sum(must(G.HadamardProd(ls, n.matrix(pick, rows, vocab)))))
}

// embed makes the (t, dim) node of the tokens' embeddings.
func (n *net) embed(tokens []int32) *G.Node {
	dim := n.m.cfg.Dim
	x := make([]float32, len(tokens)*dim)
	for i, id := range tokens {
		copy(x[i*dim:(i+1)*dim], n.m.w.embd[int(id)*dim:(int(id)+1)*dim])
	}
	return n.matrix(x, len(tokens), dim)
}
