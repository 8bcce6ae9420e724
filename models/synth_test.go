package models

import (
	"path/filepath"
	"testing"

	"github.com/ruvllm/ruvllm/kernels"
	"github.com/ruvllm/ruvllm/models/gguf"
)

func TestSynthesizeAndQuantize(t *testing.T) {
	dir := t.TempDir()
	shape, err := ShapeByName("tiny")
	if err != nil {
		t.Fatal(err)
	}
	f32, _ := ParseFileType("F32")
	src := filepath.Join(dir, "tiny-f32.gguf")
	if err := Synthesize(src, shape, f32, 7, 2); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, err := ReadConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	if c.Dim != shape.Dim || c.Layers != shape.Layers || c.KVHeads != shape.KVHeads || c.VocabSize != shape.Vocab || c.TiedOutput {
		t.Fatalf("config %+v", c)
	}
	toks, _ := f.GetStrings("tokenizer.ggml.tokens")
	seen := map[string]bool{}
	for _, tok := range toks {
		if seen[tok] {
			t.Fatalf("duplicate token %q", tok)
		}
		seen[tok] = true
	}
	for _, typ := range []string{"Q8_0", "Q4_K_M", "Q4_0", "F16"} {
		t.Run(typ, func(t *testing.T) {
			ft, _ := ParseFileType(typ)
			out := filepath.Join(dir, "tiny-"+typ+".gguf")
			if err := QuantizeFile(f, out, QuantPlan{Type: ft, Layers: c.Layers, GQA: c.Heads / c.KVHeads, HasOutput: true}, 2); err != nil {
				t.Fatal(err)
			}
			q, err := gguf.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			// Every matrix dequantizes close to the F32 original.
			for i := range f.Tensors {
				a := &f.Tensors[i]
				b, ok := q.Tensor(a.Name)
				if !ok {
					t.Fatalf("%s missing", a.Name)
				}
				if len(a.Dims) == 1 {
					if b.Type != kernels.F32 {
						t.Errorf("%s: vector became %v", a.Name, b.Type)
					}
					continue
				}
				want, _ := f.TensorF32(a)
				tr, _ := kernels.TraitsOf(b.Type)
				got := make([]float32, a.Dims[0])
				row := b.Type.RowBytes(int(a.Dims[0]))
				data := q.TensorData(b)
				var maxErr float64
				for r := 0; r < int(a.Rows()); r += 37 {
					tr.DequantizeRow(data[r*row:(r+1)*row], got)
					for j, g := range got {
						maxErr = max(maxErr, float64(abs32(g-want[r*int(a.Dims[0])+j])))
					}
				}
				// Weights lie in ±0.035; 4-bit steps are ~0.005.
				if maxErr > 0.01 {
					t.Errorf("%s (%v): max error %g", a.Name, b.Type, maxErr)
				}
			}
		})
	}
}

func abs32(x float32) float32 {
	if x < 0 {
		return -x
	}
	return x
}
