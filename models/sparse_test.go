package models

import (
	"slices"
	"strings"
	"testing"
)

func TestSparseNames(t *testing.T) {
	cases := []struct {
		role   Role
		layer  int
		suffix string
		name   string
	}{
		{FFNDown, 3, ChannelMajorSuffix, "blk.3.ffn_down.icm"},
		{AttnQ, 0, ThresholdsSuffix, "blk.0.attn_q.thresholds"},
		{AttnOut, 21, ChannelMajorSuffix, "blk.21.attn_output.icm"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := SparseName(c.role, c.layer, c.suffix); got != c.name {
				t.Errorf("SparseName = %q", got)
			}
			r, l, s, ok := ParseSparseName(c.name)
			if !ok || r != c.role || l != c.layer || s != c.suffix {
				t.Errorf("ParseSparseName = %v %d %q %v", r, l, s, ok)
			}
		})
	}
	for _, bad := range []string{"blk.3.ffn_down.weight", "blk.3.ffn_norm.icm", "blk.3.attn_q.bias", "blk.x.attn_q.icm",
		"blk.3.attn_qq.thresholds", "output.icm.x", "icm", ""} {
		if r, l, s, ok := ParseSparseName(bad); ok {
			t.Errorf("ParseSparseName(%q) = %v %d %q, want not ok", bad, r, l, s)
		}
	}
	if Sparsified([]string{"blk.0.attn_q.weight", "output.weight"}) || !Sparsified([]string{"blk.0.attn_q.weight", "blk.0.attn_k.icm"}) {
		t.Error("Sparsified does not tell the files apart")
	}
}

func TestLayoutOfASparsifiedFile(t *testing.T) {
	c := &Config{Arch: "llama", Dim: 64, Layers: 2, FFN: 96, Heads: 4, KVHeads: 2, HeadDim: 16, HeadDimV: 16, VocabSize: 100, RopeDim: 16}
	a := c.Architecture()
	dims := map[string][]uint64{}
	for _, ts := range a.Tensors {
		if ts.Optional {
			continue
		}
		n := 1
		if ts.Role.Spec().Block {
			n = c.Layers
		}
		for l := range n {
			dims[TensorName(ts.Role, l)] = ggufDims(ts.Shape(c))
		}
	}
	// Block 0's q and down are sparsified; block 1's down is, but without
	// thresholds; block 1's gate is channel-major with the wrong dims.
	for _, s := range []struct {
		r  Role
		l  int
		th bool
	}{{AttnQ, 0, true}, {FFNDown, 0, true}, {FFNDown, 1, false}} {
		d := dims[TensorName(s.r, s.l)]
		delete(dims, TensorName(s.r, s.l))
		dims[SparseName(s.r, s.l, ChannelMajorSuffix)] = d
		if s.th {
			dims[SparseName(s.r, s.l, ThresholdsSuffix)] = []uint64{100}
		}
	}
	delete(dims, TensorName(FFNGate, 1))
	dims[SparseName(FFNGate, 1, ChannelMajorSuffix)] = []uint64{96, 64}
	dims[SparseName(FFNGate, 1, ThresholdsSuffix)] = []uint64{100}
	var names []string
	for n := range dims {
		names = append(names, n)
	}
	lay := a.Layout(c, names, func(n string) ([]uint64, bool) { d, ok := dims[n]; return d, ok })
	if len(lay.Unused) > 0 {
		t.Errorf("unused: %v", lay.Unused)
	}
	got := map[Role]LayoutEntry{}
	for _, e := range lay.Entries {
		got[e.Role] = e
	}
	if e := got[AttnQ]; e.Present != 2 || e.ChannelMajor != 1 || e.Missing != 0 || len(e.Wrong) != 0 {
		t.Errorf("attn_q: %+v", e)
	}
	if e := got[FFNDown]; e.Present != 1 || e.ChannelMajor != 1 || len(e.Wrong) != 1 || !strings.Contains(e.Wrong[0], "blk.1.ffn_down.thresholds") {
		t.Errorf("ffn_down: %+v", e)
	}
	if e := got[FFNGate]; e.Present != 1 || e.ChannelMajor != 0 || len(e.Wrong) != 1 {
		t.Errorf("ffn_gate: %+v", e)
	}
	if p := lay.Problems(); len(p) != 2 {
		t.Errorf("problems: %q", p)
	}
	// Roles the description does not list as sparsifiable are not looked
	// for in the channel-major form.
	if a.Sparsifiable(Output) || a.Sparsifiable(TokenEmbd) || !a.Sparsifiable(FFNUp) {
		t.Errorf("llama's Sparse: %v", a.Sparse)
	}
	if g, _ := a.SparseGroup(AttnK); !slices.Equal(a.Sparse[g], []Role{AttnQ, AttnK, AttnV}) {
		t.Errorf("k shares its input with %v", a.Sparse[g])
	}
}
