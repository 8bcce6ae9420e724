package gorgonia

import (
	"fmt"

	"gorgonia.org/tensor"

	"github.com/ruvllm/ruvllm/kernels"
	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/models/gguf"
)

// linear is one weight matrix W (out, in) of the model in F32, row-major as
// the file holds it, which the graph multiplies by with linearOp.
type linear struct {
	name    string // the GGUF name, which LoRA targets are keyed by
	in, out int
	w       []float32 // (out, in)
}

// tensors are the tensors of one block, or the whole-model ones, by role;
// a role the file lacks has a nil entry.
type tensors struct {
	mats []*linear   // (roles)
	vecs [][]float32 // (roles): norms' weights, biases
}

func (t *tensors) mat(r models.Role) *linear   { return t.mats[r] }
func (t *tensors) vec(r models.Role) []float32 { return t.vecs[r] }

// weights are every tensor of a model in F32, dequantized once from the
// file through kernels (the block formats' own dequantizers), since the
// graph computes in F32.
type weights struct {
	global tensors
	blocks []tensors
	// embd (vocab, dim) are the token embeddings, looked up by row.
	embd []float32
	// output projects final hidden states to logits: output.weight, or the
	// token embeddings when the model ties them.
	output *linear
}

// loadWeights dequantizes every tensor cfg's architecture names in f,
// checking shapes against the description.
func loadWeights(f *gguf.File, cfg *models.Config) (*weights, error) {
	roles := models.Roles()
	newTensors := func() tensors { return tensors{mats: make([]*linear, roles), vecs: make([][]float32, roles)} }
	w := &weights{global: newTensors(), blocks: make([]tensors, cfg.Layers)}
	for l := range w.blocks {
		w.blocks[l] = newTensors()
	}
	for _, spec := range cfg.Architecture().Tensors {
		layers := []int{0}
		if spec.Role.Spec().Block {
			layers = layers[:0]
			for l := range cfg.Layers {
				layers = append(layers, l)
			}
		}
		for _, l := range layers {
			t := &w.global
			if spec.Role.Spec().Block {
				t = &w.blocks[l]
			}
			if err := load(f, cfg, spec, l, t, w); err != nil {
				return nil, err
			}
		}
	}
	if w.embd == nil {
		return nil, fmt.Errorf("gorgonia: %s has no token embeddings", cfg.Arch)
	}
	w.output = w.global.mat(models.Output)
	if cfg.TiedOutput {
		vocab, dim := cfg.VocabSize, cfg.Dim
		w.output = &linear{name: models.TensorName(models.TokenEmbd, 0), in: dim, out: vocab, w: w.embd}
	}
	if w.output == nil {
		return nil, fmt.Errorf("gorgonia: %s has no output projection", cfg.Arch)
	}
	return w, nil
}

// load reads the tensor of spec in block layer into t.
func load(f *gguf.File, cfg *models.Config, spec models.TensorSpec, layer int, t *tensors, w *weights) error {
	name := models.TensorName(spec.Role, layer)
	ti, ok := f.Tensor(name)
	if !ok {
		if spec.Optional {
			return nil
		}
		return fmt.Errorf("gorgonia: tensor %s is missing (%s needs it)", name, cfg.Arch)
	}
	shape := spec.Shape(cfg)
	rows, cols := 1, shape[len(shape)-1]
	if len(shape) == 2 {
		rows = shape[0]
	}
	if len(ti.Dims) != len(shape) || ti.Dims[0] != uint64(cols) || (len(shape) == 2 && ti.Dims[1] != uint64(rows)) {
		return fmt.Errorf("gorgonia: tensor %s has dims %v, the %s description gives shape %v", name, ti.Dims, cfg.Arch, shape)
	}
	data, err := dequantize(f, ti, rows, cols)
	if err != nil {
		return err
	}
	switch {
	case spec.Role == models.TokenEmbd:
		w.embd = data
	case len(shape) == 1:
		t.vecs[spec.Role] = data
	default:
		t.mats[spec.Role] = &linear{name: name, in: cols, out: rows, w: data}
	}
	return nil
}

// dequantize reads the (rows, cols) tensor ti as F32, a row at a time with
// the kernels' dequantizer of its type.
func dequantize(f *gguf.File, ti *gguf.TensorInfo, rows, cols int) ([]float32, error) {
	tr, ok := kernels.TraitsOf(ti.Type)
	if !ok {
		return nil, fmt.Errorf("gorgonia: tensor %s is %v, which cannot be dequantized", ti.Name, ti.Type)
	}
	rb := ti.Type.RowBytes(cols)
	data := f.TensorData(ti)
	if rb < 0 || len(data) != rows*rb {
		return nil, fmt.Errorf("gorgonia: tensor %s: %d bytes do not hold %d rows of %d %v elements", ti.Name, len(data), rows, cols, ti.Type)
	}
	out := make([]float32, rows*cols)
	for r := range rows {
		tr.DequantizeRow(data[r*rb:(r+1)*rb], out[r*cols:(r+1)*cols])
	}
	return out, nil
}

// transposed makes the (cols, rows) tensor of the row-major (rows, cols)
// matrix m.
func transposed(m []float32, rows, cols int) *tensor.Dense {
	t := make([]float32, rows*cols)
	for r := range rows {
		for c, v := range m[r*cols : (r+1)*cols] {
			t[c*rows+r] = v
		}
	}
	return tensor.New(tensor.WithShape(cols, rows), tensor.WithBacking(t))
}

// linears lists every matrix a LoRA adapter may update, by GGUF name.
func (w *weights) linears() map[string]*linear {
	out := map[string]*linear{}
	for _, ts := range append([]tensors{w.global}, w.blocks...) {
		for _, m := range ts.mats {
			if m != nil {
				out[m.name] = m
			}
		}
	}
	return out
}
