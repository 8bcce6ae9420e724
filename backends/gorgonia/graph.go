package gorgonia

import (
	"fmt"
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
	// dt is the element type the graph computes in: F32, or F64 for
	// gradient checks, whose finite differences F32 is too coarse for.
	dt tensor.Dtype
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
	// roundKV rounds as an F16 cache stores keys and values (attention.round).
	roundKV bool
	// keepKV makes every layer's attention keep the pass's keys and values
	// for the caller's cache.
	keepKV bool
	past   pastKV
	// cos and sin (t, rope_dim/2) are the RoPE angles of the tokens, and
	// cosSWA and sinSWA those of the sliding-window layers' RoPE when it
	// differs (Model.ropeSWA).
	cos, sin       []float32
	cosSWA, sinSWA []float32
	ones           *G.Node // (t, 1): broadcasts rows
	// attn are the layers' attentions, which hold the pass's keys and
	// values after a run when keepKV is set.
	attn []*attention
	// hidden are the final normalised hidden states of the rows forward
	// returns logits of.
	hidden *G.Node
}

// newGraph makes an empty graph computing in F32.
func newGraph() *graph { return newGraphOf(tensor.Float32) }

// newGraphOf makes an empty graph computing in dt (F32 or F64).
func newGraphOf(dt tensor.Dtype) *graph { return &graph{g: G.NewGraph(), dt: dt} }

// matrix makes a (rows, cols) input node holding data: not copied in an
// F32 graph, converted in an F64 one (so that later changes to data are
// not seen there: seqInputs keeps F64 copies of what it refills).
func (gr *graph) matrix(data []float32, rows, cols int) *G.Node {
	if gr.dt == tensor.Float64 {
		d := make([]float64, len(data))
		convert(d, data)
		return gr.dense(tensor.New(tensor.WithShape(rows, cols), tensor.WithBacking(d)))
	}
	return gr.dense(tensor.New(tensor.WithShape(rows, cols), tensor.WithBacking(data)))
}

// dense makes an input node of t, of the graph's element type. Every input
// gets a name of its own: Gorgonia takes two unnamed inputs of one shape
// for the same node.
func (gr *graph) dense(t *tensor.Dense) *G.Node {
	s := t.Shape()
	gr.inputs++
	return G.NewMatrix(gr.g, gr.dt, G.WithShape(s[0], s[1]), G.WithValue(t), G.WithName("in"+strconv.Itoa(gr.inputs)))
}

// constant is v as a constant of the graph's element type.
func (gr *graph) constant(v float64) *G.Node {
	if gr.dt == tensor.Float64 {
		return G.NewConstant(v)
	}
	return G.NewConstant(float32(v))
}

// newNet prepares, in gr, the pass of t tokens from position pos after the
// past keys and values.
func newNet(gr *graph, m *Model, t, pos int, past pastKV) *net {
	n := &net{graph: gr, m: m, t: t, pos: pos, past: past}
	half := m.cfg.RopeDim / 2
	n.cos, n.sin = make([]float32, t*half), make([]float32, t*half)
	for r := range t {
		m.rope.Angles(pos+r, n.cos[r*half:(r+1)*half], n.sin[r*half:(r+1)*half])
	}
	if m.ropeSWA != nil {
		n.cosSWA, n.sinSWA = make([]float32, t*half), make([]float32, t*half)
		for r := range t {
			m.ropeSWA.Angles(pos+r, n.cosSWA[r*half:(r+1)*half], n.sinSWA[r*half:(r+1)*half])
		}
	}
	ones := make([]float32, t)
	for i := range ones {
		ones[i] = 1
	}
	n.ones = n.matrix(ones, t, 1)
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

// floats is the F32 data of a node's value after a run of a machine made
// with G.TraceExec, which keeps every node's value (without it the machine
// reuses the memory of intermediate values).
func floats(x *G.Node) []float32 { return x.Value().Data().([]float32) }

// row makes a (1, len(v)) node of v.
func (n *net) row(v []float32) *G.Node { return n.matrix(v, 1, len(v)) }

// norm is RMSNorm of each row of x (t, dim), scaled by w.
func (n *net) norm(x *G.Node, w []float32) *G.Node { return n.normGroups(x, w, 1) }

// normGroups is RMSNorm of each of the groups consecutive pieces of
// len(w) columns of every row of x (t, groups·len(w)), each scaled by w:
// x ⊙ (r·E) with r (t, groups) the pieces' inverse root mean squares and E
// (groups, groups·len(w)) putting w under each piece. One group is a whole
// row's norm; a head's columns are one group in Qwen3's query and key
// norms.
func (n *net) normGroups(x *G.Node, w []float32, groups int) *G.Node {
	size := len(w)
	mean := make([]float32, groups*size*groups) // (groups·size, groups)
	spread := make([]float32, groups*groups*size)
	for g := range groups {
		for i := range size {
			mean[(g*size+i)*groups+g] = 1 / float32(size)
			spread[g*groups*size+g*size+i] = w[i]
		}
	}
	ms := must(G.Mul(must(G.Square(x)), n.matrix(mean, groups*size, groups))) // (t, groups)
	eps := n.constant(float64(n.m.cfg.NormEps))
	r := must(G.Inverse(must(G.Sqrt(must(G.Add(ms, eps)))))) // Gorgonia's InverseSqrt has a wrong gradient
	return must(G.HadamardProd(x, must(G.Mul(r, n.matrix(spread, groups, groups*size)))))
}

// normHeads is the per-head RMS norm of the queries or keys x (t,
// heads·head_dim) by w (head_dim), when the block has one (Qwen3).
func (n *net) normHeads(x *G.Node, w []float32, heads int) *G.Node {
	if w == nil {
		return x
	}
	return n.normGroups(x, w, heads)
}

// linear is x·Wᵀ (+ bias) (+ the adapter's update of W).
func (n *net) linear(x *G.Node, l *linear, bias []float32) *G.Node {
	y := must(G.ApplyOp(linearOp{l}, x))
	if bias != nil {
		y = must(G.Add(y, must(G.Mul(n.ones, n.row(bias)))))
	}
	if f := n.lora[l.name]; f != nil {
		u := must(G.Mul(must(G.Mul(x, f.at)), f.bt))
		if f.scale != 1 {
			u = must(G.Mul(u, n.constant(float64(f.scale))))
		}
		y = must(G.Add(y, u))
	}
	return y
}

// projectQKV is the queries, keys and values of xn (t, dim): three
// products (with biases where the block has them), or one product by the
// fused attn_qkv (Phi-3) whose columns are sliced into q, k and v.
func (n *net) projectQKV(t *tensors, xn *G.Node) (q, k, v *G.Node) {
	if w := t.mat(models.AttnQKV); w != nil {
		c := n.m.cfg
		qDim, kvDim := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
		qkv := n.linear(xn, w, nil)
		return n.columns(qkv, 0, qDim), n.columns(qkv, qDim, qDim+kvDim), n.columns(qkv, qDim+kvDim, qDim+2*kvDim)
	}
	q = n.linear(xn, t.mat(models.AttnQ), t.vec(models.AttnQBias))
	k = n.linear(xn, t.mat(models.AttnK), t.vec(models.AttnKBias))
	v = n.linear(xn, t.mat(models.AttnV), t.vec(models.AttnVBias))
	return q, k, v
}

// columns is the columns [c0, c1) of x.
func (n *net) columns(x *G.Node, c0, c1 int) *G.Node { return must(G.Slice(x, nil, G.S(c0, c1))) }

// attention is block l's self-attention of its normalised input xn
// (t, dim): Wo·attend(rope(Wq·xn + bq), rope(Wk·xn + bk), Wv·xn + bv), each
// token seeing the past and the pass's tokens up to itself, or the last
// window of them in a sliding-window layer, its scores capped where the
// model caps them (ops.go). scaledQueries scales the queries rather than
// the scores, as Gemma's and Phi-3's graphs do.
func (n *net) attention(l int, t *tensors, xn *G.Node, scaledQueries bool) *G.Node {
	q, k, v := n.projectQKV(t, xn)
	q = n.normHeads(q, t.vec(models.AttnQNorm), n.m.cfg.Heads)
	k = n.normHeads(k, t.vec(models.AttnKNorm), n.m.cfg.KVHeads)
	cfg := n.m.cfg
	a := &attention{m: n.m, t: n.t, pos: n.pos, past: n.past.n, round: n.roundKV, rot: &n.m.rope, cos: n.cos, sin: n.sin,
		qScale: 1, sScale: cfg.AttnScale, softCap: cfg.AttnSoftCap}
	if scaledQueries {
		a.qScale, a.sScale = cfg.AttnScale, 1
	}
	if cfg.Windowed(l) {
		a.window = cfg.SlidingWindow
		if n.m.ropeSWA != nil {
			a.rot, a.cos, a.sin = n.m.ropeSWA, n.cosSWA, n.sinSWA
		}
	}
	if n.past.n > 0 {
		a.pastK, a.pastV = n.past.k[l], n.past.v[l]
	}
	if n.keepKV {
		kvDim := n.m.cfg.KVHeads * n.m.cfg.HeadDim
		a.newK, a.newV = make([]float32, n.t*kvDim), make([]float32, n.t*kvDim)
	}
	n.attn[l] = a
	att := must(G.ApplyOp(attnOp{a}, q, k, v))
	return n.linear(att, t.mat(models.AttnOut), nil)
}

// gatedMLP is block l's MLP: Wdown·(act(Wgate·xn) ⊙ Wup·xn), the gate and
// up from one fused matrix in Phi-3.
func (n *net) gatedMLP(t *tensors, xn *G.Node, act func(gate *G.Node) *G.Node) *G.Node {
	var gate, up *G.Node
	if wg := t.mat(models.FFNGate); wg != nil {
		gate, up = n.linear(xn, wg, nil), n.linear(xn, t.mat(models.FFNUp), nil)
	} else { // Phi-3's ffn_up holds the gate's rows, then the up's
		gateUp := n.linear(xn, t.mat(models.FFNUp), nil)
		ffn := n.m.cfg.FFN
		gate, up = n.columns(gateUp, 0, ffn), n.columns(gateUp, ffn, 2*ffn)
	}
	return n.linear(must(G.HadamardProd(act(gate), up)), t.mat(models.FFNDown), nil)
}

// silu is x ⊙ sigmoid(x), SwiGLU's activation.
func silu(x *G.Node) *G.Node { return must(G.HadamardProd(x, must(G.Sigmoid(x)))) }

// gelu is GeGLU's activation as ggml computes it (geluOp).
func gelu(x *G.Node) *G.Node { return must(G.ApplyOp(geluOp{}, x)) }

// llamaBlock is a pre-norm block of attention and a SwiGLU MLP; qwen2's is
// the same, its biases applied where the block has them, and qwen3's, its
// query and key norms applied before RoPE.
func llamaBlock(n *net, l int, x *G.Node) *G.Node {
	t := &n.m.w.blocks[l]
	x = must(G.Add(x, n.attention(l, t, n.norm(x, t.vec(models.AttnNorm)), false)))
	return must(G.Add(x, n.gatedMLP(t, n.norm(x, t.vec(models.FFNNorm)), silu)))
}

// phi3Block is llama's with the queries scaled before the scores, and q,
// k, v and the gate and up from fused matrices.
func phi3Block(n *net, l int, x *G.Node) *G.Node {
	t := &n.m.w.blocks[l]
	x = must(G.Add(x, n.attention(l, t, n.norm(x, t.vec(models.AttnNorm)), true)))
	return must(G.Add(x, n.gatedMLP(t, n.norm(x, t.vec(models.FFNNorm)), silu)))
}

// gemmaBlock is Gemma 2's and 3's: attention (queries scaled, scores
// capped in Gemma 2, windowed in the sliding-window layers, q/k norms in
// Gemma 3) and a GeGLU MLP, each normed before and after.
func gemmaBlock(n *net, l int, x *G.Node) *G.Node {
	t := &n.m.w.blocks[l]
	a := n.attention(l, t, n.norm(x, t.vec(models.AttnNorm)), true)
	x = must(G.Add(x, n.norm(a, t.vec(models.AttnPostNorm))))
	f := n.gatedMLP(t, n.norm(x, t.vec(models.FFNNorm)), gelu)
	return must(G.Add(x, n.norm(f, t.vec(models.FFNPostNorm))))
}

// blocks are the block functions by architecture.
var blocks = map[string]func(n *net, l int, x *G.Node) *G.Node{
	"llama":  llamaBlock,
	"qwen2":  llamaBlock,
	"qwen3":  llamaBlock,
	"phi3":   phi3Block,
	"gemma2": gemmaBlock,
	"gemma3": gemmaBlock,
}

// forward builds the pass over the embeddings x (t, dim) and returns the
// logits (r1−r0, vocab) of the rows [r0, r1) of the pass.
func (n *net) forward(x *G.Node, r0, r1 int) *G.Node {
	var sel *G.Node
	if r0 != 0 || r1 != n.t {
		// A product with rows of the identity picks the rows: a slice of
		// one row would drop the row axis.
		pick := make([]float32, (r1-r0)*n.t)
		for r := r0; r < r1; r++ {
			pick[(r-r0)*n.t+r] = 1
		}
		sel = n.matrix(pick, r1-r0, n.t)
	}
	return n.forwardRows(x, sel)
}

// forwardRows builds the pass over x (t, dim) and returns the logits of
// the rows sel (rows, t) picks, every row when sel is nil.
func (n *net) forwardRows(x, sel *G.Node) *G.Node {
	cfg := n.m.cfg
	n.attn = make([]*attention, cfg.Layers)
	block := blocks[cfg.Arch]
	for l := range cfg.Layers {
		x = block(n, l, x)
	}
	if sel != nil {
		x = must(G.Mul(sel, x))
	}
	n.hidden = n.norm(x, n.m.w.global.vec(models.OutputNorm))
	logits := n.linear(n.hidden, n.m.w.output, nil)
	if c := cfg.FinalSoftCap; c != 0 { // Gemma 2: c·tanh(logits/c)
		logits = must(G.Mul(must(G.Tanh(must(G.Mul(logits, n.constant(float64(1/c)))))), n.constant(float64(c))))
	}
	return logits
}

// seqInputs are the inputs of one sequence of a training graph, which a
// cached graph refills for each example of the same shape: the
// embeddings x (t, dim) of prompt and completion, zero past them; sel
// (rows, t) picking the rows that predict the completion's tokens; and
// their one-hots (rows, vocab). Rows and tokens past the example's are
// zero: padding at the end, which no earlier token attends to and whose
// zero one-hots add nothing to the log-probability.
type seqInputs struct {
	t, rows        int
	x, sel, onehot []float32
	// x64, sel64 and onehot64 are their F64 copies in an F64 graph, nil
	// otherwise.
	x64, sel64, onehot64 []float64
}

// padStep is what training shapes are rounded up to, so that examples of
// nearby lengths share one compiled graph.
const padStep = 8

func padded(n int) int { return (n + padStep - 1) / padStep * padStep }

func newSeqInputs(m *Model, t, rows int, dt tensor.Dtype) *seqInputs {
	s := &seqInputs{t: t, rows: rows, x: make([]float32, t*m.cfg.Dim), sel: make([]float32, rows*t), onehot: make([]float32, rows*m.cfg.VocabSize)}
	if dt == tensor.Float64 {
		s.x64, s.sel64, s.onehot64 = make([]float64, len(s.x)), make([]float64, len(s.sel)), make([]float64, len(s.onehot))
	}
	return s
}

// fill writes the example's tokens into the inputs.
func (s *seqInputs) fill(m *Model, prompt, completion []int32) {
	dim, vocab := m.cfg.Dim, m.cfg.VocabSize
	clear(s.x)
	clear(s.sel)
	clear(s.onehot)
	for i, id := range append(append([]int32(nil), prompt...), completion...) {
		m.embedRow(s.x[i*dim:(i+1)*dim], id)
	}
	for r, id := range completion {
		s.sel[r*s.t+len(prompt)-1+r] = 1
		s.onehot[r*vocab+int(id)] = 1
	}
	if s.x64 != nil {
		convert(s.x64, s.x)
		convert(s.sel64, s.sel)
		convert(s.onehot64, s.onehot)
	}
}

// input makes a (rows, cols) input node of d32, or of d64 in an F64
// graph, not copied: refilling them refills the node.
func (gr *graph) input(d32 []float32, d64 []float64, rows, cols int) *G.Node {
	if gr.dt == tensor.Float64 {
		return gr.dense(tensor.New(tensor.WithShape(rows, cols), tensor.WithBacking(d64)))
	}
	return gr.dense(tensor.New(tensor.WithShape(rows, cols), tensor.WithBacking(d32)))
}

// completionLogp builds the pass over the sequence's inputs and returns
// the scalar node log p(completion | prompt): the sum of the completion
// tokens' log-softmax under the rows that predict them.
func (n *net) completionLogp(in *seqInputs) *G.Node {
	logits := n.forwardRows(n.input(in.x, in.x64, in.t, n.m.cfg.Dim), n.input(in.sel, in.sel64, in.rows, in.t))
	ls := must(G.LogSoftMax(logits, 1))
	return must(G.Sum(must(G.HadamardProd(ls, n.input(in.onehot, in.onehot64, in.rows, n.m.cfg.VocabSize)))))
}

// embed makes the (t, dim) node of the tokens' embeddings.
func (n *net) embed(tokens []int32) *G.Node {
	dim := n.m.cfg.Dim
	x := make([]float32, len(tokens)*dim)
	for i, id := range tokens {
		n.m.embedRow(x[i*dim:(i+1)*dim], id)
	}
	return n.matrix(x, len(tokens), dim)
}
