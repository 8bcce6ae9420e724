package models

import (
	"cmp"
	"math"
	"path/filepath"
	"slices"
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

// TestSynthesizeFamilies writes every tiny family shape and reads it back:
// the description's tensors, nothing else, and the family's
// hyperparameters as the shape gives them.
func TestSynthesizeFamilies(t *testing.T) {
	dir := t.TempDir()
	f32, _ := ParseFileType("F32")
	read := func(t *testing.T, name string) (*gguf.File, *Config) {
		s, err := ShapeByName(name)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name+".gguf")
		if err := Synthesize(path, s, f32, 7, 2); err != nil {
			t.Fatal(err)
		}
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		c, err := ReadConfig(f)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, ti := range f.Tensors {
			names = append(names, ti.Name)
		}
		lay := c.Architecture().Layout(c, names, func(n string) ([]uint64, bool) {
			if ti, ok := f.Tensor(n); ok {
				return ti.Dims, true
			}
			return nil, false
		})
		if p := lay.Problems(); len(p) > 0 || len(lay.Unused) > 0 {
			t.Errorf("layout problems %v, unused %v", p, lay.Unused)
		}
		if c.Arch != cmp.Or(s.Arch, "llama") || c.Dim != s.Dim || c.HeadDim != cmp.Or(s.HeadDim, s.Dim/s.Heads) || c.TiedOutput != s.Tied {
			t.Errorf("config %+v", c)
		}
		return f, c
	}
	t.Run("tiny-qwen3", func(t *testing.T) {
		_, c := read(t, "tiny-qwen3")
		if c.RopeBase != 1e6 || c.NormEps != 1e-6 || c.SWALayers != nil || c.EmbedScale != 0 {
			t.Errorf("%+v", c)
		}
	})
	t.Run("tiny-gemma2", func(t *testing.T) {
		_, c := read(t, "tiny-gemma2")
		if c.EmbedScale != 8 || c.AttnSoftCap != tinyAttnCap || c.FinalSoftCap != tinyFinalCap || c.SlidingWindow != 8 ||
			!slices.Equal(c.SWALayers, []bool{true, false, true}) || c.RopeBaseSWA != c.RopeBase {
			t.Errorf("%+v", c)
		}
	})
	t.Run("tiny-gemma3", func(t *testing.T) {
		_, c := read(t, "tiny-gemma3")
		if c.EmbedScale != 8 || c.AttnSoftCap != 0 || c.FinalSoftCap != 0 || c.SlidingWindow != 8 ||
			!slices.Equal(c.SWALayers, []bool{true, true, false}) || c.RopeBase != 1e6 || c.RopeBaseSWA != 10000 {
			t.Errorf("%+v", c)
		}
	})
	t.Run("tiny-phi3", func(t *testing.T) { read(t, "tiny-phi3") })
	t.Run("tiny-phi3-longrope", func(t *testing.T) {
		f, c := read(t, "tiny-phi3-longrope")
		want := float32(math.Sqrt(1 + math.Log(2)/math.Log(256)))
		if c.RopeDim != 12 || c.RopeOrigCtx != 256 || c.RopeAttnFactor != want || c.RopeScale != 1 {
			t.Errorf("%+v", c)
		}
		for _, r := range []Role{RopeFactorsLong, RopeFactorsShort} {
			if ti, ok := f.Tensor(TensorName(r, 0)); !ok || ti.Dims[0] != 6 {
				t.Errorf("%v missing or not of rope_dim/2", r)
			}
		}
	})
	t.Run("tiny-llama3", func(t *testing.T) {
		// The factors llama.cpp reads from rope_freqs.weight are the ones
		// computed from the keys.
		f, _ := read(t, "tiny-llama3")
		_, keyed := read(t, "tiny-llama3-keys")
		ti, ok := f.Tensor(TensorName(RopeFreqs, 0))
		if !ok {
			t.Fatal("no rope_freqs.weight")
		}
		stored, _ := f.TensorF32(ti)
		if !slices.Equal(stored, keyed.RopeFactors) || keyed.RopeScale != 1 {
			t.Errorf("rope_freqs %v, from the keys %v (scale %g)", stored, keyed.RopeFactors, keyed.RopeScale)
		}
	})
}

func abs32(x float32) float32 {
	if x < 0 {
		return -x
	}
	return x
}
