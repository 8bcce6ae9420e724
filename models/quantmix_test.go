package models

import (
	"testing"

	"github.com/ruvllm/ruvllm/internal/shared"
	"github.com/ruvllm/ruvllm/models/gguf"
)

// TestQuantPlanMatchesLlamaCpp checks our per-tensor choices against the
// files llama.cpp's llama-quantize wrote from the same F32 model.
func TestQuantPlanMatchesLlamaCpp(t *testing.T) {
	cases := []struct {
		file, ftype string
		pure        bool
	}{
		{"mini-llama-Q4_K_M.gguf", "Q4_K_M", false},
		{"mini-llama-Q3_K_M.gguf", "Q3_K_M", false},
		{"mini-llama-Q5_K_M.gguf", "Q5_K_M", false},
		{"mini-llama-Q2_K.gguf", "Q2_K", false},
		{"mini-llama-Q6_K.gguf", "Q6_K", false},
		{"mini-llama-Q4_0.gguf", "Q4_0", false},
		{"mini-llama-Q8_0.gguf", "Q8_0", false},
		{"mini-llama-F16.gguf", "F16", false},
		{"mini-llama-Q4_K-pure.gguf", "Q4_K_M", true},
		{"mini-qwen2-Q4_K_M.gguf", "Q4_K_M", false},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			f, err := gguf.Open(shared.Path(t, "models", "mini", c.file))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			cfg, err := ReadConfig(f)
			if err != nil {
				t.Fatal(err)
			}
			ft, err := ParseFileType(c.ftype)
			if err != nil {
				t.Fatal(err)
			}
			p := QuantPlan{Type: ft, Pure: c.pure, Layers: cfg.Layers, GQA: cfg.Heads / cfg.KVHeads, HasOutput: !cfg.TiedOutput}
			for _, ti := range f.Tensors {
				if !Quantized(ti.Name, ti.Dims) {
					continue
				}
				if got := p.TensorType(ti.Name, int(ti.Dims[0])); got != ti.Type {
					t.Errorf("%s: we choose %v, llama.cpp chose %v", ti.Name, got, ti.Type)
				}
			}
		})
	}
}

func TestParseFileType(t *testing.T) {
	for _, s := range []string{"q4_k_m", "Q4_K", "f16", "Q8_0"} {
		if _, err := ParseFileType(s); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	if _, err := ParseFileType("Q9_X"); err == nil {
		t.Error("Q9_X accepted")
	}
}
