package gorgonia

import (
	"fmt"
	"hash"
	"hash/fnv"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/ruvllm/ruvllm/kernels"
)

// roundF16Op rounds every element to the nearest F16 and back, as storing
// keys and values in an F16 KV cache does, so that the tokens of a pass
// attend to the same rounded keys and values as the tokens of later passes
// read from the cache. Its gradient passes straight through: rounding is
// treated as the identity when training.
type roundF16Op struct{}

func (roundF16Op) Arity() int { return 1 }

func (roundF16Op) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(a, a)
}

func (roundF16Op) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	s, ok := in[0].(tensor.Shape)
	if !ok {
		return nil, fmt.Errorf("gorgonia: roundF16 of a %T", in[0])
	}
	return s.Clone(), nil
}

func (roundF16Op) Do(in ...G.Value) (G.Value, error) {
	t, ok := in[0].(*tensor.Dense)
	if !ok || t.Dtype() != tensor.Float32 {
		return nil, fmt.Errorf("gorgonia: roundF16 of %T", in[0])
	}
	src := t.Float32s()
	dst := make([]float32, len(src))
	for i, x := range src {
		dst[i] = kernels.FP16ToFP32(kernels.FP32ToFP16(x))
	}
	return tensor.New(tensor.WithShape(t.Shape().Clone()...), tensor.WithBacking(dst)), nil
}

func (roundF16Op) ReturnsPtr() bool      { return false }
func (roundF16Op) CallsExtern() bool     { return false }
func (roundF16Op) OverwritesInput() int  { return -1 }
func (roundF16Op) WriteHash(h hash.Hash) { fmt.Fprint(h, "roundF16") }
func (op roundF16Op) Hashcode() uint32 {
	h := fnv.New32a()
	op.WriteHash(h)
	return h.Sum32()
}
func (roundF16Op) String() string { return "roundF16" }

// DiffWRT and SymDiff make the op differentiable: the identity.
func (roundF16Op) DiffWRT(int) []bool { return []bool{true} }
func (roundF16Op) SymDiff(_ G.Nodes, _, grad *G.Node) (G.Nodes, error) {
	return G.Nodes{grad}, nil
}
