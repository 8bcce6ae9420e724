package native

import (
	"fmt"

	"github.com/ruvllm/ruvllm/kernels"
	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/models/gguf"
)

// matrix is a weight matrix viewed in place in the file mapping: rows of cols
// elements of typ, row-major, each row typ.RowBytes(cols) bytes.
type matrix struct {
	name       string
	typ        kernels.DType
	rows, cols int
	data       []byte
}

// row is the encoded row r.
func (m *matrix) row(r int) []byte {
	rb := m.typ.RowBytes(m.cols)
	return m.data[r*rb : (r+1)*rb]
}

// layer holds the tensors of one transformer block.
type layer struct {
	attnNorm []float32 // (dim)
	wq       matrix    // (heads*head_dim, dim)
	wk, wv   matrix    // (kv_heads*head_dim, dim)
	bq       []float32 // (heads*head_dim); qwen2 only, else nil
	bk, bv   []float32 // (kv_heads*head_dim); qwen2 only, else nil
	wo       matrix    // (dim, heads*head_dim)
	ffnNorm  []float32 // (dim)
	gate, up matrix    // (ffn, dim)
	down     matrix    // (dim, ffn)
}

// weights are all tensors of a model.
type weights struct {
	tokEmbd     matrix    // (vocab, dim); rows are dequantized one per token
	layers      []layer   // (layers)
	outNorm     []float32 // (dim)
	output      matrix    // (vocab, dim); token_embd itself when tied
	freqFactors []float32 // (rope_dim/2) or nil: Llama 3's rope_freqs
}

// loader reads tensors of f and keeps the first error.
type loader struct {
	f   *gguf.File
	err error
}

func (ld *loader) fail(format string, args ...any) {
	if ld.err == nil {
		ld.err = fmt.Errorf("native: "+format, args...)
	}
}

// matrix views the (rows, cols) matrix name in place.
func (ld *loader) matrix(name string, rows, cols int) matrix {
	ti, ok := ld.f.Tensor(name)
	if !ok {
		ld.fail("tensor %s is missing", name)
		return matrix{}
	}
	if len(ti.Dims) != 2 || ti.Dims[0] != uint64(cols) || ti.Dims[1] != uint64(rows) {
		ld.fail("tensor %s has dims %v, want [%d %d]", name, ti.Dims, cols, rows)
		return matrix{}
	}
	if _, ok := kernels.TraitsOf(ti.Type); !ok {
		ld.fail("tensor %s is %v, which this backend cannot compute with", name, ti.Type)
		return matrix{}
	}
	rb := ti.Type.RowBytes(cols)
	data := ld.f.TensorData(ti)
	if rb < 0 || len(data) != rows*rb {
		ld.fail("tensor %s: %d bytes do not hold %d rows of %d %v elements", name, len(data), rows, cols, ti.Type)
		return matrix{}
	}
	return matrix{name: name, typ: ti.Type, rows: rows, cols: cols, data: data}
}

// vector reads the n-element vector name: a view of the mapping when it is
// F32, else a dequantized copy (norms and biases are tiny).
func (ld *loader) vector(name string, n int) []float32 {
	ti, ok := ld.f.Tensor(name)
	if !ok {
		ld.fail("tensor %s is missing", name)
		return nil
	}
	if ti.Elements() != uint64(n) || len(ti.Dims) == 0 || ti.Dims[0] != uint64(n) {
		ld.fail("tensor %s has dims %v, want [%d]", name, ti.Dims, n)
		return nil
	}
	if ti.Type == kernels.F32 {
		v, err := ld.f.TensorF32(ti)
		if err != nil {
			ld.fail("tensor %s: %v", name, err)
		}
		if len(v) != n {
			ld.fail("tensor %s holds %d floats, want %d", name, len(v), n)
			return nil
		}
		return v
	}
	tr, ok := kernels.TraitsOf(ti.Type)
	data := ld.f.TensorData(ti)
	if !ok || ti.Type.RowBytes(n) != len(data) {
		ld.fail("tensor %s: %v vector of %d elements in %d bytes cannot be read", name, ti.Type, n, len(data))
		return nil
	}
	v := make([]float32, n)
	tr.DequantizeRow(data, v)
	return v
}

// loadWeights views every tensor cfg names in f, checking its shape.
func loadWeights(f *gguf.File, cfg *models.Config) (*weights, error) {
	ld := &loader{f: f}
	qDim, kvDim := cfg.Heads*cfg.HeadDim, cfg.KVHeads*cfg.HeadDim
	w := &weights{
		tokEmbd: ld.matrix(models.TokenEmbd, cfg.VocabSize, cfg.Dim),
		outNorm: ld.vector(models.OutputNorm, cfg.Dim),
		output:  ld.matrix(cfg.OutputTensor(), cfg.VocabSize, cfg.Dim),
		layers:  make([]layer, cfg.Layers),
	}
	if _, ok := f.Tensor(ropeFreqs); ok {
		w.freqFactors = ld.vector(ropeFreqs, cfg.RopeDim/2)
	}
	for l := range w.layers {
		name := func(kind string) string { return models.BlockTensor(l, kind, "weight") }
		bias := func(kind string) string { return models.BlockTensor(l, kind, "bias") }
		ly := &w.layers[l]
		ly.attnNorm = ld.vector(name(models.AttnNorm), cfg.Dim)
		ly.wq = ld.matrix(name(models.AttnQ), qDim, cfg.Dim)
		ly.wk = ld.matrix(name(models.AttnK), kvDim, cfg.Dim)
		ly.wv = ld.matrix(name(models.AttnV), kvDim, cfg.Dim)
		if cfg.AttnBias {
			ly.bq = ld.vector(bias(models.AttnQ), qDim)
			ly.bk = ld.vector(bias(models.AttnK), kvDim)
			ly.bv = ld.vector(bias(models.AttnV), kvDim)
		}
		ly.wo = ld.matrix(name(models.AttnOut), cfg.Dim, qDim)
		ly.ffnNorm = ld.vector(name(models.FFNNorm), cfg.Dim)
		ly.gate = ld.matrix(name(models.FFNGate), cfg.FFN, cfg.Dim)
		ly.up = ld.matrix(name(models.FFNUp), cfg.FFN, cfg.Dim)
		ly.down = ld.matrix(name(models.FFNDown), cfg.Dim, cfg.FFN)
		if ld.err != nil {
			break
		}
	}
	if ld.err != nil {
		return nil, ld.err
	}
	return w, nil
}

// ropeFreqs is Llama 3's tensor of RoPE frequency divisors.
const ropeFreqs = "rope_freqs.weight"

// matrices lists every matrix a forward pass multiplies by, for sizing scratch.
func (w *weights) matrices() []*matrix {
	ms := []*matrix{&w.output}
	for l := range w.layers {
		ly := &w.layers[l]
		ms = append(ms, &ly.wq, &ly.wk, &ly.wv, &ly.wo, &ly.gate, &ly.up, &ly.down)
	}
	return ms
}
