package models

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/ruvllm/ruvllm/internal/shared"
	"github.com/ruvllm/ruvllm/kernels"
	"github.com/ruvllm/ruvllm/models/gguf"
)

func TestSharedConfigs(t *testing.T) {
	cases := []struct {
		file string
		want Config
	}{
		// Shapes as ../shared/models/README.md states them.
		{"stories260K.gguf", Config{Arch: "llama", Dim: 64, Layers: 5, Heads: 8, KVHeads: 4, FFN: 172, HeadDim: 8, RopeDim: 8, VocabSize: 512, Rope: RopeNormal}},
		{"mini/mini-llama-Q4_K_M.gguf", Config{Arch: "llama", Dim: 256, Layers: 4, Heads: 8, KVHeads: 4, FFN: 768, HeadDim: 32, RopeDim: 32, VocabSize: 512, ContextLength: 512, Rope: RopeNormal}},
		{"mini/mini-qwen2-F32.gguf", Config{Arch: "qwen2", Dim: 256, Layers: 4, Heads: 8, KVHeads: 4, FFN: 768, HeadDim: 32, RopeDim: 32, VocabSize: 512, ContextLength: 512, Rope: RopeNeoX}},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			f, err := gguf.Open(shared.Path(t, "models", c.file))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			got, err := ReadConfig(f)
			if err != nil {
				t.Fatal(err)
			}
			w := c.want
			if got.Arch != w.Arch || got.Dim != w.Dim || got.Layers != w.Layers || got.Heads != w.Heads ||
				got.KVHeads != w.KVHeads || got.FFN != w.FFN || got.HeadDim != w.HeadDim || got.RopeDim != w.RopeDim ||
				got.VocabSize != w.VocabSize || got.Rope != w.Rope || got.Architecture().Name != w.Arch ||
				(w.ContextLength != 0 && got.ContextLength != w.ContextLength) {
				t.Errorf("got %+v\nwant %+v", *got, w)
			}
			if got.NormEps <= 0 || got.NormEps > 1e-3 || got.RopeBase <= 0 || got.RopeScale != 1 {
				t.Errorf("eps %g base %g scale %g", got.NormEps, got.RopeBase, got.RopeScale)
			}
			if _, ok := f.Tensor(TensorName(got.OutputRole(), 0)); !ok {
				t.Errorf("output tensor %s missing", TensorName(got.OutputRole(), 0))
			}
			// Every tensor the description names is there with its shape, and
			// the file holds nothing else.
			var names []string
			for _, ti := range f.Tensors {
				names = append(names, ti.Name)
			}
			lay := got.Architecture().Layout(got, names, func(n string) ([]uint64, bool) {
				if ti, ok := f.Tensor(n); ok {
					return ti.Dims, true
				}
				return nil, false
			})
			if p := lay.Problems(); len(p) > 0 || len(lay.Unused) > 0 {
				t.Errorf("layout problems %v, unused %v", p, lay.Unused)
			}
		})
	}
}

// synthetic writes a minimal model file with the given metadata.
func synthetic(t *testing.T, kv map[string]any) *gguf.File {
	t.Helper()
	w := gguf.NewWriter()
	for k, v := range kv {
		if err := w.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.AddTensor(TensorName(TokenEmbd, 0), kernels.F32, []uint64{8, 4}, make([]byte, 8*4*4)); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestConfigDefaultsAndErrors(t *testing.T) {
	base := func() map[string]any {
		return map[string]any{
			"general.architecture":                   "llama",
			"llama.context_length":                   uint32(64),
			"llama.embedding_length":                 uint32(8),
			"llama.block_count":                      uint32(1),
			"llama.feed_forward_length":              uint32(16),
			"llama.attention.head_count":             uint32(2),
			"llama.attention.layer_norm_rms_epsilon": float32(1e-5),
		}
	}
	t.Run("defaults", func(t *testing.T) {
		c, err := ReadConfig(synthetic(t, base()))
		if err != nil {
			t.Fatal(err)
		}
		if c.KVHeads != 2 || c.HeadDim != 4 || c.RopeDim != 4 || c.RopeBase != 10000 || !c.TiedOutput || c.OutputRole() != TokenEmbd {
			t.Errorf("%+v", *c)
		}
	})
	t.Run("per-layer array", func(t *testing.T) {
		kv := base()
		kv["llama.attention.head_count_kv"] = []int32{1}
		c, err := ReadConfig(synthetic(t, kv))
		if err != nil || c.KVHeads != 1 {
			t.Fatalf("%v %+v", err, c)
		}
	})
	t.Run("rope scaling", func(t *testing.T) {
		for _, c := range []struct {
			typ     string
			scale   float32
			factors bool
		}{{"", 0.25, false}, {"linear", 0.25, false}, {"none", 1, false}, {"llama3", 1, true}} {
			kv := base()
			kv["llama.rope.scaling.factor"] = float32(4)
			if c.typ != "" {
				kv["llama.rope.scaling.type"] = c.typ
			}
			got, err := ReadConfig(synthetic(t, kv))
			if err != nil || got.RopeScale != c.scale || (got.RopeFactors != nil) != c.factors {
				t.Fatalf("type %q: %v %+v", c.typ, err, got)
			}
		}
	})
	t.Run("sliding window pattern", func(t *testing.T) {
		for _, c := range []struct {
			pattern any
			want    []bool
		}{
			{nil, []bool{true, false, true, false}}, // gemma2's period 2
			{uint32(3), []bool{true, true, false, true}},
			{uint32(0), []bool{true, true, true, true}},
			{uint32(1), []bool{false, false, false, false}},
			{[]bool{false, true, true, false}, []bool{false, true, true, false}},
			{[]int32{1, 0, 0, 1}, []bool{true, false, false, true}},
		} {
			kv := base()
			kv["general.architecture"] = "gemma2"
			for k, v := range kv {
				if rest, ok := strings.CutPrefix(k, "llama."); ok {
					delete(kv, k)
					kv["gemma2."+rest] = v
				}
			}
			kv["gemma2.block_count"] = uint32(4)
			kv["gemma2.attention.sliding_window"] = uint32(16)
			if c.pattern != nil {
				kv["gemma2.attention.sliding_window_pattern"] = c.pattern
			}
			got, err := ReadConfig(synthetic(t, kv))
			if err != nil || !slices.Equal(got.SWALayers, c.want) || got.SlidingWindow != 16 || got.Windowed(0) != c.want[0] {
				t.Fatalf("pattern %v: %v %+v", c.pattern, err, got)
			}
		}
	})
	errs := []struct {
		name   string
		edit   func(map[string]any)
		expect string
	}{
		{"no arch", func(m map[string]any) { delete(m, "general.architecture") }, "general.architecture"},
		{"unknown arch", func(m map[string]any) { m["general.architecture"] = "mamba" }, "not supported"},
		{"no ctx", func(m map[string]any) { delete(m, "llama.context_length") }, "context_length is missing"},
		{"no eps", func(m map[string]any) { delete(m, "llama.attention.layer_norm_rms_epsilon") }, "layer_norm_rms_epsilon"},
		{"bad gqa", func(m map[string]any) { m["llama.attention.head_count_kv"] = uint32(3) }, "multiple"},
		{"string count", func(m map[string]any) { m["llama.block_count"] = "four" }, "not a valid count"},
		{"embd mismatch", func(m map[string]any) { m["llama.embedding_length"] = uint32(16) }, "has rows of 8"},
		{"ragged layers", func(m map[string]any) { m["llama.feed_forward_length"] = []int32{16, 32} }, "differs between layers"},
		{"rope type not a string", func(m map[string]any) { m["llama.rope.scaling.type"] = uint32(3) }, "not a string"},
	}
	for _, e := range errs {
		t.Run(e.name, func(t *testing.T) {
			kv := base()
			e.edit(kv)
			_, err := ReadConfig(synthetic(t, kv))
			if err == nil || !strings.Contains(err.Error(), e.expect) {
				t.Fatalf("error %v, want %q", err, e.expect)
			}
		})
	}
}
