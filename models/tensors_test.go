package models

import "testing"

func TestTensorNames(t *testing.T) {
	cases := []struct {
		role   Role
		layer  int
		name   string
		module string // "" when adapters cannot address it
	}{
		{AttnQ, 3, "blk.3.attn_q.weight", "model.layers.3.self_attn.q_proj"},
		{AttnKBias, 0, "blk.0.attn_k.bias", ""},
		{FFNDown, 21, "blk.21.ffn_down.weight", "model.layers.21.mlp.down_proj"},
		{TokenEmbd, -1, "token_embd.weight", ""},
		{Output, -1, "output.weight", "lm_head"},
		{RopeFreqs, -1, "rope_freqs.weight", ""},
	}
	llama, _ := Lookup("llama")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := TensorName(c.role, c.layer); got != c.name {
				t.Errorf("TensorName = %q", got)
			}
			r, l, ok := ParseTensorName(c.name)
			if !ok || r != c.role || l != c.layer {
				t.Errorf("ParseTensorName = %v %d %v", r, l, ok)
			}
			if got := llama.Module(c.role, c.layer); got != c.module {
				t.Errorf("Module = %q", got)
			}
			if c.module != "" {
				r, l, ok := llama.RoleOfModule(c.module)
				if !ok || r != c.role || l != c.layer {
					t.Errorf("RoleOfModule = %v %d %v", r, l, ok)
				}
			}
		})
	}
	for _, bad := range []string{"blk.x.attn_q.weight", "blk.-1.attn_q.weight", "blk.01.attn_q.weight", "blk.3.token_embd.weight",
		"attn_q.weight", "blk.3.attn_q", "blk.3.attn_qq.weight", "output.bias", ""} {
		if r, l, ok := ParseTensorName(bad); ok {
			t.Errorf("ParseTensorName(%q) = %v %d, want not ok", bad, r, l)
		}
	}
	for _, bad := range []string{"model.layers.3.self_attn.rotary_emb", "model.layers.x.mlp.up_proj", "lm_head.weight", "model.layers.3"} {
		if r, l, ok := llama.RoleOfModule(bad); ok {
			t.Errorf("RoleOfModule(%q) = %v %d, want not ok", bad, r, l)
		}
	}
}

func TestArchitecturesDescribeTheirTensors(t *testing.T) {
	for _, name := range Architectures() {
		t.Run(name, func(t *testing.T) {
			a, _ := Lookup(name)
			c := &Config{Arch: name, Dim: 64, Layers: 2, FFN: 96, Heads: 4, KVHeads: 2, HeadDim: 16, HeadDimV: 16, VocabSize: 100, RopeDim: 16,
				MoE: MoE{Experts: 8, ExpertsUsed: 2, ExpertFFN: 32}}
			seen := map[Role]bool{}
			for _, ts := range a.Tensors {
				if seen[ts.Role] {
					t.Errorf("%v listed twice", ts.Role)
				}
				seen[ts.Role] = true
				shape := ts.Shape(c)
				if len(shape) < 1 || len(shape) > 2 && !ts.Role.Spec().Experts || len(shape) > 3 {
					t.Errorf("%v: shape %v", ts.Role, shape)
				}
				if ts.Role.Spec().Experts && shape[0] != c.Experts {
					t.Errorf("%v: expert tensor of shape %v", ts.Role, shape)
				}
				for _, d := range shape {
					if d <= 0 {
						t.Errorf("%v: shape %v", ts.Role, shape)
					}
				}
				if s := ts.Role.Spec(); s.Linear && len(shape) != 2 {
					t.Errorf("%v is linear but not a matrix", ts.Role)
				}
			}
			for _, r := range []Role{TokenEmbd, OutputNorm} {
				if !seen[r] {
					t.Errorf("no %v", r)
				}
			}
			for _, n := range a.Linear(c) {
				if in, out, ok := c.LinearShape(n); !ok || in <= 0 || out <= 0 {
					t.Errorf("LinearShape(%s) = %d %d %v", n, in, out, ok)
				}
			}
		})
	}
}
