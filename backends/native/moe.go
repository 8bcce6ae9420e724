package native

import (
	"fmt"

	"github.com/ruvllm/ruvllm/kernels"
	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/models/gguf"
)

// The mixture-of-experts MLP (Qwen3-MoE, gpt-oss), as llama.cpp's
// build_moe_ffn computes it: the router's logits, the chosen experts and
// their weights per token; then every chosen expert's SwiGLU MLP on the
// tokens routed to it, in one product per expert and matrix over all its
// tokens (the experts' weights are read in place from the file mapping,
// and only the chosen experts' pages are ever touched); then each token's
// expert outputs, weighted, summed in the order of its choice.

// expertMatrix is the (experts, rows, cols) tensor of one role of a block's
// experts, viewed in place in the file mapping: expert e's (rows, cols)
// matrix is the stride bytes at e·stride.
type expertMatrix struct {
	name       string
	typ        kernels.DType
	experts    int
	rows, cols int
	stride     int
	data       []byte
}

// expert is expert e's matrix.
func (m *expertMatrix) expert(e int) []byte { return m.data[e*m.stride : (e+1)*m.stride] }

// moeLayer is one block's experts: the gate, up and down projections and,
// where the family has them (gpt-oss), their biases.
type moeLayer struct {
	gate, up, down    *expertMatrix // (experts, expert_ffn, dim), (experts, expert_ffn, dim), (experts, dim, expert_ffn)
	gateB, upB, downB []float32     // (experts, expert_ffn), (experts, expert_ffn), (experts, dim); nil without
}

// loadExperts views the experts' tensors of every block of a mixture of
// experts in f; nil for a dense model. The mixtures of experts run as the
// recent llama.cpp that knows them computes: the experts' products by
// kernels.ExpertMatMul, and the other matrices of w (attention, router,
// output) by kernels.MatMulRecent.
func loadExperts(f *gguf.File, cfg *models.Config, w *weights) ([]moeLayer, error) {
	if !cfg.IsMoE() {
		return nil, nil
	}
	for _, m := range w.matrices() {
		m.recent = true
	}
	ld := &loader{f: f}
	layers := make([]moeLayer, cfg.Layers)
	for _, spec := range cfg.Architecture().Tensors {
		if !spec.Role.Spec().Experts {
			continue
		}
		shape := spec.Shape(cfg)
		for l := range layers {
			name := models.TensorName(spec.Role, l)
			ti, ok := f.Tensor(name)
			if !ok {
				if !spec.Optional {
					ld.fail("tensor %s is missing (%s needs it)", name, cfg.Arch)
				}
				continue
			}
			ly := &layers[l]
			switch len(shape) {
			case 3:
				m := ld.experts(ti, shape)
				switch spec.Role {
				case models.FFNGateExps:
					ly.gate = m
				case models.FFNUpExps:
					ly.up = m
				case models.FFNDownExps:
					ly.down = m
				}
			case 2:
				v := ld.biases(ti, shape[0], shape[1])
				switch spec.Role {
				case models.FFNGateExpsB:
					ly.gateB = v
				case models.FFNUpExpsB:
					ly.upB = v
				case models.FFNDownExpsB:
					ly.downB = v
				}
			default:
				ld.fail("tensor %s: the %s description gives it shape %v", name, cfg.Arch, shape)
			}
		}
	}
	if ld.err != nil {
		return nil, ld.err
	}
	for l := range layers {
		if ly := &layers[l]; ly.gate == nil || ly.up == nil || ly.down == nil {
			return nil, fmt.Errorf("native: block %d of %s has no gate, up and down experts", l, cfg.Arch)
		}
	}
	return layers, nil
}

// experts views the (experts, rows, cols) tensor ti in place.
func (ld *loader) experts(ti *gguf.TensorInfo, shape []int) *expertMatrix {
	n, rows, cols := shape[0], shape[1], shape[2]
	if len(ti.Dims) != 3 || ti.Dims[0] != uint64(cols) || ti.Dims[1] != uint64(rows) || ti.Dims[2] != uint64(n) {
		ld.fail("tensor %s has dims %v, want [%d %d %d]", ti.Name, ti.Dims, cols, rows, n)
		return nil
	}
	if kernels.MatScratchBytes(ti.Type, cols, 1) < 0 {
		ld.fail("tensor %s is %v, which this backend cannot compute with", ti.Name, ti.Type)
		return nil
	}
	stride := rows * ti.Type.RowBytes(cols)
	data := ld.f.TensorData(ti)
	if len(data) != n*stride {
		ld.fail("tensor %s: %d bytes do not hold %d experts of %d rows of %d %v elements", ti.Name, len(data), n, rows, cols, ti.Type)
		return nil
	}
	return &expertMatrix{name: ti.Name, typ: ti.Type, experts: n, rows: rows, cols: cols, stride: stride, data: data}
}

// biases reads the (experts, n) biases ti as floats: a view of the mapping
// when they are F32, else a dequantized copy.
func (ld *loader) biases(ti *gguf.TensorInfo, experts, n int) []float32 {
	if len(ti.Dims) != 2 || ti.Dims[0] != uint64(n) || ti.Dims[1] != uint64(experts) {
		ld.fail("tensor %s has dims %v, want [%d %d]", ti.Name, ti.Dims, n, experts)
		return nil
	}
	tr, ok := kernels.TraitsOf(ti.Type)
	data := ld.f.TensorData(ti)
	if !ok || ti.Type.RowBytes(n) < 0 || len(data) != experts*ti.Type.RowBytes(n) {
		ld.fail("tensor %s: %v biases of %d experts of %d in %d bytes cannot be read", ti.Name, ti.Type, experts, n, len(data))
		return nil
	}
	if ti.Type == kernels.F32 {
		v, err := ld.f.TensorF32(ti)
		if err != nil {
			ld.fail("tensor %s: %v", ti.Name, err)
		}
		return v
	}
	v := make([]float32, experts*n)
	rb := ti.Type.RowBytes(n)
	for e := range experts {
		tr.DequantizeRow(data[e*rb:(e+1)*rb], v[e*n:(e+1)*n])
	}
	return v
}

// moeBuffers are a pass's routing and the experts' activations, allocated
// once for batches of up to maxBatch tokens.
type moeBuffers struct {
	logits []float32 // (batch, experts): the router's, then its probabilities
	chosen []int32   // (batch, used): each token's experts, best first
	weight []float32 // (batch, used): their weights
	// count, start: how many of the pass's (token, choice) slots each
	// expert has and where its run of slots begins in slots (experts+1);
	// slots (batch·used) the slots r·used + j grouped by expert.
	count, start []int32
	slots        []int32
	xg           []float32 // (batch, dim): an expert's tokens' inputs, gathered
	gate, up     []float32 // (batch, expert_ffn)
	down         []float32 // (batch, dim)
	out          []float32 // (batch·used, dim): each slot's expert output
	quant        []byte    // the activations quantized for one expert product
}

// size allocates the buffers for batches of n tokens.
func (mb *moeBuffers) size(cfg *models.Config, layers []moeLayer, n int) error {
	if len(layers) == 0 {
		return nil
	}
	e, k, f := cfg.Experts, cfg.ExpertsUsed, cfg.ExpertFFN
	if float64(n)*float64(e+k*(cfg.Dim+2)+2*cfg.Dim+2*f)*4 > 1<<36 {
		return fmt.Errorf("native: a batch of %d tokens needs too much memory for the experts' activations", n)
	}
	mb.logits = make([]float32, n*e)
	mb.chosen = make([]int32, n*k)
	mb.weight = make([]float32, n*k)
	mb.count, mb.start = make([]int32, e), make([]int32, e+1)
	mb.slots = make([]int32, n*k)
	mb.xg = make([]float32, n*cfg.Dim)
	mb.gate, mb.up = make([]float32, n*f), make([]float32, n*f)
	mb.down = make([]float32, n*cfg.Dim)
	mb.out = make([]float32, n*k*cfg.Dim)
	quant := 0
	for _, ly := range layers {
		for _, m := range []*expertMatrix{ly.gate, ly.up, ly.down} {
			quant = max(quant, kernels.MatScratchBytes(m.typ, m.cols, n))
		}
	}
	mb.quant = make([]byte, quant)
	return nil
}

// experts is the mixture-of-experts MLP sublayer:
//
//	proj = Σ_j w_j · down_{e_j}(act(gate_{e_j}·xn + bg, up_{e_j}·xn + bu)) + bd
//
// over each token's chosen experts e_j with weights w_j (route), act the
// family's gated activation.
func (b *Backend) experts(l, n int, t *tensors, xn, proj []float32, act func(dst, gate, up []float32)) {
	if b.moeFFN != nil {
		b.moeFFN(l, n, t, xn, proj, act)
		return
	}
	cfg, mb, ly := b.cfg, &b.moe, &b.moeLayers[l]
	dim, k, f := cfg.Dim, cfg.ExpertsUsed, cfg.ExpertFFN
	b.route(l, n, t, xn)
	// Group the (token, choice) slots by expert.
	clear(mb.count)
	for _, e := range mb.chosen[:n*k] {
		mb.count[e]++
	}
	mb.start[0] = 0
	for e, c := range mb.count {
		mb.start[e+1] = mb.start[e] + c
	}
	for s, e := range mb.chosen[:n*k] {
		mb.slots[mb.start[e]] = int32(s)
		mb.start[e]++
	}
	for e := len(mb.count) - 1; e >= 0; e-- { // back to the runs' starts
		mb.start[e+1] = mb.start[e]
	}
	mb.start[0] = 0
	for e, c := range mb.count {
		if c == 0 {
			continue
		}
		m := int(c)
		slots := mb.slots[mb.start[e] : mb.start[e]+c]
		xg := mb.xg[:m*dim]
		for i, s := range slots {
			r := int(s) / k
			copy(xg[i*dim:(i+1)*dim], xn[r*dim:(r+1)*dim])
		}
		gate, up, down := mb.gate[:m*f], mb.up[:m*f], mb.down[:m*dim]
		b.expertProduct(ly.gate, e, xg, m, gate, ly.gateB)
		b.expertProduct(ly.up, e, xg, m, up, ly.upB)
		for i := range m {
			act(gate[i*f:(i+1)*f], gate[i*f:(i+1)*f], up[i*f:(i+1)*f])
		}
		b.expertProduct(ly.down, e, gate, m, down, ly.downB)
		for i, s := range slots {
			copy(mb.out[int(s)*dim:(int(s)+1)*dim], down[i*dim:(i+1)*dim])
		}
	}
	b.observe("ffn_moe_down", l, mb.out[:n*k*dim])
	// Each token's outputs, weighted, in the order of its choice.
	for r := range n {
		p := proj[r*dim : (r+1)*dim]
		for j := range k {
			s := r*k + j
			o := mb.out[s*dim : (s+1)*dim]
			if j == 0 {
				for i, v := range o {
					p[i] = float32(mb.weight[s] * v)
				}
				continue
			}
			kernels.AddWeighted(p, mb.weight[s], o)
		}
	}
	b.observe("ffn_moe_out", l, proj[:n*dim])
}

// expertProduct sets out (n, rows) to the n rows of x times expert e's
// matrix of m, plus its bias when the block has one, as llama.cpp's
// expert products compute them (kernels.ExpertMatMul).
func (b *Backend) expertProduct(m *expertMatrix, e int, x []float32, n int, out, bias []float32) {
	kernels.ExpertMatMul(b.pool, m.typ, m.expert(e), m.rows, m.cols, x[:n*m.cols], n, out[:n*m.rows], b.moe.quant)
	if bias != nil {
		bias = bias[e*m.rows : (e+1)*m.rows]
		for r := range n {
			o := out[r*m.rows : (r+1)*m.rows]
			kernels.Add(o, o, bias)
		}
	}
}

// route sets each of the n tokens' chosen experts and their weights from
// the router of block l, as the model's gating says.
func (b *Backend) route(l, n int, t *tensors, xn []float32) {
	cfg, mb := b.cfg, &b.moe
	e, k := cfg.Experts, cfg.ExpertsUsed
	logits := mb.logits[:n*e]
	b.linear(t.mat(models.FFNGateInp), xn, n, logits, t.vec(models.FFNGateInpBias), b.buf.runs)
	b.observe("ffn_moe_logits", l, logits)
	for r := range n {
		row := logits[r*e : (r+1)*e]
		if cfg.Gating == models.GatingSoftmax {
			kernels.SoftmaxRow(row)
		}
		chosen, w := mb.chosen[r*k:(r+1)*k], mb.weight[r*k:(r+1)*k]
		topK(row, chosen)
		for j, c := range chosen {
			w[j] = row[c]
		}
		if cfg.Gating == models.GatingSoftmaxChosen {
			kernels.SoftmaxRow(w)
		}
		if cfg.NormTopK {
			var sum float64
			for _, v := range w {
				sum += float64(v)
			}
			// The sum clamped to the smallest normal half, as llama.cpp
			// does to avoid dividing by zero.
			s := max(float32(sum), 6.103515625e-5)
			for j := range w {
				w[j] /= s
			}
		}
		if s := cfg.WeightsScale; s != 0 && s != 1 {
			for j := range w {
				w[j] *= s
			}
		}
	}
	b.observe("ffn_moe_weights", l, mb.weight[:n*k])
}

// topK sets chosen to the indices of the len(chosen) largest values of x,
// largest first, the lower index first among equals (ggml's argsort, which
// real logits make unambiguous), by insertion into the list of the best
// so far: one pass over x.
func topK(x []float32, chosen []int32) {
	k, n := len(chosen), 0
	for i, v := range x {
		var j int
		switch {
		case n < k:
			j = n
			n++
		case v > x[chosen[k-1]]:
			j = k - 1
		default:
			continue
		}
		for j > 0 && v > x[chosen[j-1]] {
			chosen[j] = chosen[j-1]
			j--
		}
		chosen[j] = int32(i)
	}
}
