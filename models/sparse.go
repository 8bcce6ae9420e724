package models

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/ruvllm/ruvllm/models/gguf"
)

// A sparsified file (written by `ruvllm-serve sparsify`, run through package
// sparse) is the file it was made from with some matrices stored another
// way. Each matrix of a role its architecture lists in Sparse may be stored
// input-channel-major (package sparse's layout, in which the weights one
// input channel multiplies lie together, so that a zeroed input skips them):
// it is then named with the suffix ChannelMajorSuffix in place of "weight",
// keeps its type and dims (and so its size), and has beside it the F32
// vector of its input's magnitude thresholds, named with ThresholdsSuffix.
// A role's tensor is in a file one way or the other, never both: the sparse
// layout replaces the row-major one.
const (
	// ChannelMajorSuffix names a matrix stored input-channel-major:
	// "blk.3.ffn_down.icm" holds what "blk.3.ffn_down.weight" would.
	ChannelMajorSuffix = "icm"
	// ThresholdsSuffix names the thresholds of a matrix's input, one per
	// sparsity level: "blk.3.ffn_down.thresholds".
	ThresholdsSuffix = "thresholds"
)

// SparseName is the name of a sparsified file's tensor of role r in block
// layer with suffix (ChannelMajorSuffix or ThresholdsSuffix):
// SparseName(FFNDown, 3, ChannelMajorSuffix) is "blk.3.ffn_down.icm". Only
// the roles an architecture lists in Sparse have such tensors.
func SparseName(r Role, layer int, suffix string) string {
	s := roles[r]
	if !s.Block {
		return s.Name + "." + suffix
	}
	return "blk." + strconv.Itoa(layer) + "." + s.Name + "." + suffix
}

// ParseSparseName is the inverse of SparseName: the role, block and suffix
// of a sparsified file's tensor; ok is false for any other name.
func ParseSparseName(name string) (r Role, layer int, suffix string, ok bool) {
	i := strings.LastIndexByte(name, '.')
	if i < 0 {
		return 0, -1, "", false
	}
	suffix = name[i+1:]
	if suffix != ChannelMajorSuffix && suffix != ThresholdsSuffix {
		return 0, -1, "", false
	}
	r, layer, ok = ParseTensorName(name[:i+1] + "weight")
	if !ok || !roles[r].Linear {
		return 0, -1, "", false
	}
	return r, layer, suffix, true
}

// Sparsifiable reports whether the architecture lets a sparsified file
// store role r's matrices input-channel-major with input thresholds.
func (a *Architecture) Sparsifiable(r Role) bool {
	_, ok := a.SparseGroup(r)
	return ok
}

// SparseGroup is the index in Sparse of the group of role r.
func (a *Architecture) SparseGroup(r Role) (int, bool) {
	for g, roles := range a.Sparse {
		if slices.Contains(roles, r) {
			return g, true
		}
	}
	return -1, false
}

// Sparsified reports whether a file with these tensor names is sparsified:
// whether any of them is a channel-major matrix or a thresholds vector.
// Tools that rewrite weights row by row (quantize, lora-merge) refuse such
// files.
func Sparsified(names []string) bool {
	for _, n := range names {
		if _, _, _, ok := ParseSparseName(n); ok {
			return true
		}
	}
	return false
}

// FindMatrix finds the tensor that holds the matrix named name (a linear
// role's GGUF name, "blk.3.ffn_down.weight") in f: that tensor or, in a
// sparsified file, its channel-major form, whose type and dims are the
// same.
func FindMatrix(f *gguf.File, name string) (*gguf.TensorInfo, bool) {
	if ti, ok := f.Tensor(name); ok {
		return ti, true
	}
	r, layer, ok := ParseTensorName(name)
	if !ok || !r.Spec().Linear {
		return nil, false
	}
	return f.Tensor(SparseName(r, layer, ChannelMajorSuffix))
}

// NotSparsified is an error for a sparsified file, which tools that
// convert weights row by row cannot read: quantize or merge the dense
// file, then sparsify it again.
func NotSparsified(f *gguf.File) error {
	names := make([]string, len(f.Tensors))
	for i := range f.Tensors {
		names[i] = f.Tensors[i].Name
	}
	if Sparsified(names) {
		return fmt.Errorf("the file is sparsified (input-channel-major matrices): convert the dense file it was made from, then sparsify the result")
	}
	return nil
}

// sparseLayout fills in e for role t.Role's matrices that a sparsified file
// holds channel-major in place of name (row-major, absent): it reports
// whether block layer's is there with the right dims, and marks its
// thresholds as named. Channel-major matrices count as present.
func sparseLayout(e *LayoutEntry, r Role, layer int, want []int, named map[string]bool, dims func(string) ([]uint64, bool)) bool {
	cm, th := SparseName(r, layer, ChannelMajorSuffix), SparseName(r, layer, ThresholdsSuffix)
	got, ok := dims(cm)
	if !ok {
		return false
	}
	named[cm], named[th] = true, true
	switch tdims, hasTh := dims(th); {
	case !sameShape(got, want):
		e.Wrong = append(e.Wrong, fmt.Sprintf("%s has dims %v, want %v", cm, got, ggufDims(want)))
	case !hasTh || len(tdims) != 1 || tdims[0] == 0:
		e.Wrong = append(e.Wrong, fmt.Sprintf("%s has no thresholds vector %s", cm, th))
	default:
		e.Present++
		e.ChannelMajor++
	}
	return true
}
