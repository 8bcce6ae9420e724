package native

import (
	"math"

	"github.com/ruvllm/ruvllm/kernels"
	"github.com/ruvllm/ruvllm/models"
)

// naive is a plain reference forward pass, written for clarity rather than
// speed: weights dequantized to float32, sums in float64, one token at a
// time. It shares only the weight views and the RoPE angles with Backend.
type naive struct {
	cfg       *models.Config
	w         *weights
	rope      kernels.Rope
	quantActs bool          // round activations through each weight's dot format
	roundKV   bool          // round cached keys and values to F16
	k, v      [][][]float32 // (layer, pos, kv_heads*head_dim)
}

func newNaive(b *Backend, quantActs, roundKV bool) *naive {
	return &naive{cfg: b.cfg, w: b.w, rope: b.rotary[0].Rope, quantActs: quantActs, roundKV: roundKV,
		k: make([][][]float32, b.cfg.Layers), v: make([][][]float32, b.cfg.Layers)}
}

// matvec returns W·x, computing each row from dequantized weights.
func (nv *naive) matvec(m *matrix, x []float32) []float32 {
	tr, _ := kernels.TraitsOf(m.typ)
	if nv.quantActs && tr.VecDotType != kernels.F32 {
		at, _ := kernels.TraitsOf(tr.VecDotType)
		q := make([]byte, tr.VecDotType.RowBytes(len(x)))
		kernels.QuantizeActivations(tr.VecDotType, x, q)
		x = make([]float32, len(x))
		at.DequantizeRow(q, x)
	}
	out := make([]float32, m.rows)
	row := make([]float32, m.cols)
	enc := make([]byte, m.typ.RowBytes(m.cols))
	for r := range out {
		if m.sparse != nil {
			m.sparse.PackRows(r, r+1, enc)
		} else {
			enc = m.row(r)
		}
		tr.DequantizeRow(enc, row)
		var s float64
		for c, w := range row {
			s += float64(w) * float64(x[c])
		}
		out[r] = float32(s)
	}
	return out
}

func naiveNorm(x, w []float32, eps float32) []float32 {
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	s := 1 / math.Sqrt(ss/float64(len(x))+float64(eps))
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = float32(float64(v)*s) * w[i]
	}
	return out
}

func (nv *naive) round(x []float32) []float32 {
	if !nv.roundKV {
		return x
	}
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = kernels.FP16ToFP32(kernels.FP32ToFP16(v))
	}
	return out
}

// step runs token tok at the next position and returns the logits and the
// final normalised hidden state.
func (nv *naive) step(tok int) (logits, hidden []float32) {
	cfg := nv.cfg
	pos := len(nv.k[0])
	hd, group := cfg.HeadDim, cfg.Heads/cfg.KVHeads
	x := make([]float32, cfg.Dim)
	embd := nv.w.global.mat(models.TokenEmbd)
	tr, _ := kernels.TraitsOf(embd.typ)
	tr.DequantizeRow(embd.row(tok), x)
	cos, sin := make([]float32, cfg.RopeDim/2), make([]float32, cfg.RopeDim/2)
	nv.rope.Angles(pos, cos, sin)
	rotate := func(v []float32) {
		for h := 0; h < len(v); h += hd {
			for i := range cos {
				a, b := 2*i, 2*i+1
				if nv.rope.NeoX {
					a, b = i, i+cfg.RopeDim/2
				}
				x0, x1 := float64(v[h+a]), float64(v[h+b])
				v[h+a] = float32(x0*float64(cos[i]) - x1*float64(sin[i]))
				v[h+b] = float32(x0*float64(sin[i]) + x1*float64(cos[i]))
			}
		}
	}
	addBias := func(v, b []float32) {
		for i := range b {
			v[i] += b[i]
		}
	}
	for l := range nv.w.blocks {
		ly := &nv.w.blocks[l]
		xn := naiveNorm(x, ly.vec(models.AttnNorm), cfg.NormEps)
		q, k, v := nv.matvec(ly.mat(models.AttnQ), xn), nv.matvec(ly.mat(models.AttnK), xn), nv.matvec(ly.mat(models.AttnV), xn)
		addBias(q, ly.vec(models.AttnQBias))
		addBias(k, ly.vec(models.AttnKBias))
		addBias(v, ly.vec(models.AttnVBias))
		rotate(q)
		rotate(k)
		nv.k[l] = append(nv.k[l], nv.round(k))
		nv.v[l] = append(nv.v[l], nv.round(v))
		att := make([]float32, len(q))
		scale := 1 / math.Sqrt(float64(hd))
		for h := range cfg.Heads {
			g := h / group
			qh := q[h*hd : (h+1)*hd]
			if nv.roundKV {
				qh = nv.round(qh)
			}
			w := make([]float64, pos+1)
			m := math.Inf(-1)
			for t := range w {
				var s float64
				for i, qv := range qh {
					s += float64(qv) * float64(nv.k[l][t][g*hd+i])
				}
				w[t] = s * scale
				m = max(m, w[t])
			}
			var sum float64
			for t := range w {
				w[t] = math.Exp(w[t] - m)
				sum += w[t]
			}
			for i := range hd {
				var s float64
				for t := range w {
					p := float32(w[t] / sum)
					if nv.roundKV {
						p = kernels.FP16ToFP32(kernels.FP32ToFP16(p))
					}
					s += float64(p) * float64(nv.v[l][t][g*hd+i])
				}
				att[h*hd+i] = float32(s)
			}
		}
		o := nv.matvec(ly.mat(models.AttnOut), att)
		for i := range x {
			x[i] += o[i]
		}
		xn = naiveNorm(x, ly.vec(models.FFNNorm), cfg.NormEps)
		gate, up := nv.matvec(ly.mat(models.FFNGate), xn), nv.matvec(ly.mat(models.FFNUp), xn)
		for i, g := range gate {
			gate[i] = float32(float64(g) / (1 + math.Exp(-float64(g))) * float64(up[i]))
		}
		d := nv.matvec(ly.mat(models.FFNDown), gate)
		for i := range x {
			x[i] += d[i]
		}
	}
	hidden = naiveNorm(x, nv.w.global.vec(models.OutputNorm), cfg.NormEps)
	return nv.matvec(nv.w.output, hidden), hidden
}
