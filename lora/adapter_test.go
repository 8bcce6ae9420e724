package lora

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ruvllm/ruvllm/kernels"
	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/models/gguf"
)

// smallConfig is a llama-like config for tests that need no model file.
func smallConfig(arch string) *models.Config {
	return &models.Config{Arch: arch, Dim: 64, Layers: 2, FFN: 96, Heads: 4, KVHeads: 2, HeadDim: 16, HeadDimV: 16, VocabSize: 100, RopeDim: 16}
}

// tinyModel writes a random F32 llama of models' "tiny" shape and opens it.
func tinyModel(t testing.TB) (*gguf.File, *models.Config, string) {
	t.Helper()
	s, err := models.ShapeByName("tiny")
	if err != nil {
		t.Fatal(err)
	}
	ft, _ := models.ParseFileType("F32")
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := models.Synthesize(path, s, ft, 7, 2); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	cfg, err := models.ReadConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	return f, cfg, path
}

func randomAdapter(t testing.TB, cfg *models.Config, s RandomSpec) *Adapter {
	t.Helper()
	a, err := Random(cfg, s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// sameAdapter fails unless a and b apply the same updates: same targets,
// A, and Scale·B within tol relative to the largest entry.
func sameAdapter(t *testing.T, a, b *Adapter, tol float64) {
	t.Helper()
	ta, tb := a.Targets(), b.Targets()
	if len(ta) != len(tb) {
		t.Fatalf("%d targets, want %d", len(tb), len(ta))
	}
	for i := range ta {
		x, y := ta[i], tb[i]
		if x.Name != y.Name || x.Rank != y.Rank || x.In != y.In || x.Out != y.Out {
			t.Fatalf("target %d: %s r%d (%d→%d), want %s r%d (%d→%d)", i, y.Name, y.Rank, y.In, y.Out, x.Name, x.Rank, x.In, x.Out)
		}
		closeTo(t, x.Name+" A", y.A, x.A, tol)
		sb := func(tg *Target) []float32 {
			b := tg.B()
			for j := range b {
				b[j] *= tg.Scale
			}
			return b
		}
		closeTo(t, x.Name+" scale·B", sb(y), sb(x), tol)
	}
}

func closeTo(t *testing.T, what string, got, want []float32, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	scale := 1e-30
	for _, w := range want {
		scale = max(scale, math.Abs(float64(w)))
	}
	for i := range got {
		if d := math.Abs(float64(got[i]) - float64(want[i])); d > tol*scale || math.IsNaN(float64(got[i])) {
			t.Fatalf("%s[%d] = %g, want %g (tolerance %g of %g)", what, i, got[i], want[i], tol, scale)
		}
	}
}

func TestApply(t *testing.T) {
	const in, out, rank, n = 37, 23, 3, 5
	rng := rand.New(rand.NewPCG(1, 2))
	rnd := func(k int) []float32 {
		xs := make([]float32, k)
		for i := range xs {
			xs[i] = rng.Float32()*2 - 1
		}
		return xs
	}
	A, B, x, y0 := rnd(rank*in), rnd(out*rank), rnd(n*in), rnd(n*out)
	tg, err := NewTarget("blk.0.attn_q.weight", in, out, rank, A, B, 0.75)
	if err != nil {
		t.Fatal(err)
	}
	a, err := New("t", "llama", 2.25, false, "", []*Target{tg})
	if err != nil {
		t.Fatal(err)
	}
	const userScale = 0.5
	want := make([]float32, n*out)
	for j := range n {
		for o := range out {
			sum := float64(y0[j*out+o])
			for k := range rank {
				ax := 0.0
				for i := range in {
					ax += float64(A[k*in+i]) * float64(x[j*in+i])
				}
				sum += 0.75 * userScale * float64(B[o*rank+k]) * ax
			}
			want[j*out+o] = float32(sum)
		}
	}
	y := append([]float32(nil), y0...)
	scratch := make([]float32, a.ScratchFloats(n))
	a.Apply(tg.Name, x, n, y, userScale, scratch)
	closeTo(t, "y", y, want, 1e-5)

	y = append(y[:0], y0...)
	a.Apply("blk.0.attn_k.weight", x, n, y, 1, scratch)
	closeTo(t, "untouched y", y, y0, 0)

	allocs := testing.AllocsPerRun(10, func() { a.Apply(tg.Name, x, n, y, 1, scratch) })
	if allocs != 0 {
		t.Errorf("Apply allocates %v times", allocs)
	}
}

func TestPermuteRoPERows(t *testing.T) {
	b := []float32{0, 1, 2, 3, 4, 5, 6, 7} // (8, 1): two heads of 4 rows
	p, err := permuteRoPERows(b, 8, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := []float32{0, 2, 1, 3, 4, 6, 5, 7}
	closeTo(t, "permuted", p, want, 0)
	u, _ := unpermuteRoPERows(p, 8, 1, 2)
	closeTo(t, "unpermuted", u, b, 0)
	if _, err := permuteRoPERows(b, 8, 1, 3); err == nil {
		t.Error("8 rows split into 3 heads: no error")
	}
}

// TestPermuteMatchesRoPE checks the reason for the permutation: rotating a
// Hugging Face q by NeoX pairs (halves) and then permuting its rows is the
// same as permuting first and rotating by adjacent pairs, as GGUF llama does.
func TestPermuteMatchesRoPE(t *testing.T) {
	const heads, d = 3, 8
	rng := rand.New(rand.NewPCG(3, 4))
	q := make([]float32, heads*d)
	for i := range q {
		q[i] = rng.Float32()*2 - 1
	}
	cos, sin := make([]float32, d/2), make([]float32, d/2)
	kernels.Rope{Dims: d}.Angles(5, cos, sin)
	hf := append([]float32(nil), q...)
	kernels.Rope{Dims: d, NeoX: true}.Apply(hf, d, cos, sin)
	hfThenPermute, _ := permuteRoPERows(hf, heads*d, 1, heads)
	permuted, _ := permuteRoPERows(q, heads*d, 1, heads)
	kernels.Rope{Dims: d}.Apply(permuted, d, cos, sin)
	closeTo(t, "rotated", permuted, hfThenPermute, 1e-6)
}

func TestGGUFName(t *testing.T) {
	cases := []struct{ module, want string }{
		{"model.layers.0.self_attn.q_proj", "blk.0.attn_q.weight"},
		{"model.layers.12.self_attn.k_proj", "blk.12.attn_k.weight"},
		{"model.layers.3.self_attn.v_proj", "blk.3.attn_v.weight"},
		{"model.layers.3.self_attn.o_proj", "blk.3.attn_output.weight"},
		{"model.layers.1.mlp.gate_proj", "blk.1.ffn_gate.weight"},
		{"model.layers.1.mlp.up_proj", "blk.1.ffn_up.weight"},
		{"model.layers.1.mlp.down_proj", "blk.1.ffn_down.weight"},
		{"lm_head", "output.weight"},
		{"model.embed_tokens", ""},
		{"model.layers.01.mlp.up_proj", ""},
		{"model.layers.-1.mlp.up_proj", ""},
		{"model.layers.x.mlp.up_proj", ""},
		{"model.layers.1.mlp.act", ""},
	}
	llama, _ := models.Lookup("llama")
	for _, c := range cases {
		t.Run(c.module, func(t *testing.T) {
			got, err := GGUFName(llama, c.module)
			if c.want == "" {
				if err == nil {
					t.Fatalf("got %q, want an error", got)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %q, %v; want %q", got, err, c.want)
			}
			back, err := hfModule(llama, got)
			if err != nil || back != c.module {
				t.Fatalf("back to %q, %v", back, err)
			}
		})
	}
}

// TestGGUFNamePhi3 checks the modules of Phi-3's fused layers, and that
// the separate ones it does not have are refused.
func TestGGUFNamePhi3(t *testing.T) {
	phi3, _ := models.Lookup("phi3")
	for module, want := range map[string]string{
		"model.layers.2.self_attn.qkv_proj": "blk.2.attn_qkv.weight",
		"model.layers.2.mlp.gate_up_proj":   "blk.2.ffn_up.weight",
		"model.layers.2.self_attn.o_proj":   "blk.2.attn_output.weight",
		"model.layers.2.mlp.down_proj":      "blk.2.ffn_down.weight",
		"model.layers.2.self_attn.q_proj":   "",
		"model.layers.2.mlp.up_proj":        "",
		"model.layers.2.mlp.gate_proj":      "",
	} {
		got, err := GGUFName(phi3, module)
		if want == "" {
			if err == nil {
				t.Errorf("%s: got %q, want an error", module, got)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("%s: got %q, %v; want %q", module, got, err, want)
		}
		if back, err := hfModule(phi3, got); err != nil || back != module {
			t.Errorf("%s: back to %q, %v", module, back, err)
		}
	}
}

func TestPEFTRoundTrip(t *testing.T) {
	mixed := func(cfg *models.Config) *Adapter {
		// Ranks and scales that differ per target need rank_pattern and
		// alpha_pattern.
		a := randomAdapter(t, cfg, RandomSpec{Rank: 4, Seed: 9, Targets: []string{"blk.0.attn_q.weight", "blk.1.ffn_down.weight"}})
		b := randomAdapter(t, cfg, RandomSpec{Rank: 2, Alpha: 3, Seed: 10, Targets: []string{"blk.1.attn_k.weight", "output.weight"}})
		m, err := New("", cfg.Arch, a.Alpha, false, "", append(a.Targets(), b.Targets()...))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	cases := []struct {
		name string
		arch string
		make func(cfg *models.Config) *Adapter
	}{
		{"llama r1", "llama", func(c *models.Config) *Adapter { return randomAdapter(t, c, RandomSpec{Rank: 1, Seed: 1}) }},
		{"llama r8", "llama", func(c *models.Config) *Adapter { return randomAdapter(t, c, RandomSpec{Rank: 8, Seed: 2}) }},
		{"qwen2 r4", "qwen2", func(c *models.Config) *Adapter { return randomAdapter(t, c, RandomSpec{Rank: 4, Seed: 3}) }},
		{"qwen3 r4", "qwen3", func(c *models.Config) *Adapter { return randomAdapter(t, c, RandomSpec{Rank: 4, Seed: 5}) }},
		{"gemma3 r4", "gemma3", func(c *models.Config) *Adapter { return randomAdapter(t, c, RandomSpec{Rank: 4, Seed: 6}) }},
		{"phi3 r4", "phi3", func(c *models.Config) *Adapter { return randomAdapter(t, c, RandomSpec{Rank: 4, Seed: 7}) }},
		{"rslora", "llama", func(c *models.Config) *Adapter {
			return randomAdapter(t, c, RandomSpec{Rank: 4, Seed: 4, RSLoRA: true, Alpha: 3})
		}},
		{"mixed ranks", "llama", mixed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := smallConfig(c.arch)
			a := c.make(cfg)
			dir := filepath.Join(t.TempDir(), "peft")
			if err := a.WritePEFT(dir, cfg); err != nil {
				t.Fatal(err)
			}
			b, err := readPEFTDir(dir, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if b.Format != FormatPEFT || b.RSLoRA != a.RSLoRA || b.Alpha != a.Alpha {
				t.Errorf("format %s, rslora %v, alpha %v", b.Format, b.RSLoRA, b.Alpha)
			}
			sameAdapter(t, a, b, 1e-6)
			if c.arch == "phi3" {
				// Phi-3's fused layers go by their own module names.
				st, _ := os.ReadFile(filepath.Join(dir, PEFTWeightsFile))
				sf, _ := ParseSafetensors(st)
				for _, m := range []string{"self_attn.qkv_proj", "mlp.gate_up_proj"} {
					if _, ok := sf.Tensor("base_model.model.model.layers.1." + m + ".lora_A.weight"); !ok {
						t.Errorf("%s lora_A missing from the file", m)
					}
				}
			}
			if c.arch == "llama" {
				// The file holds q and k in Hugging Face order: different
				// from ours unless the rows happen to agree.
				st, _ := os.ReadFile(filepath.Join(dir, PEFTWeightsFile))
				sf, _ := ParseSafetensors(st)
				tn, ok := sf.Tensor("base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight")
				if !ok {
					t.Fatal("q_proj lora_B missing from the file")
				}
				if tq, _ := a.Target("blk.0.attn_q.weight"); bytes.Equal(tn.Data, F32Bytes(tq.B())) {
					t.Error("q_proj B was written in GGUF row order")
				}
			}
		})
	}
}

// peftFiles returns the two files of a PEFT adapter as bytes, to be
// written back altered, for error cases.
func peftFiles(t *testing.T, cfg *models.Config, a *Adapter) (config, weights []byte) {
	t.Helper()
	dir := t.TempDir()
	if err := a.WritePEFT(dir, cfg); err != nil {
		t.Fatal(err)
	}
	config, _ = os.ReadFile(filepath.Join(dir, PEFTConfigFile))
	weights, _ = os.ReadFile(filepath.Join(dir, PEFTWeightsFile))
	return config, weights
}

func TestPEFTErrors(t *testing.T) {
	cfg := smallConfig("llama")
	a := randomAdapter(t, cfg, RandomSpec{Rank: 4, Seed: 5, Targets: []string{"blk.0.attn_q.weight"}})
	config, weights := peftFiles(t, cfg, a)
	safe := func(ts ...SafeTensor) []byte {
		var buf bytes.Buffer
		if err := WriteSafetensors(&buf, ts, nil); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	mat := func(name string, rows, cols int) SafeTensor {
		return SafeTensor{Name: name, DType: "F32", Shape: []int{rows, cols}, Data: make([]byte, 4*rows*cols)}
	}
	const q = "base_model.model.model.layers.0.self_attn.q_proj"
	cases := []struct {
		name            string
		config, weights []byte
		cfg             *models.Config
		want            string
	}{
		{"config r differs", bytes.Replace(config, []byte(`"r": 4`), []byte(`"r": 8`), 1), weights, cfg, "rank mismatch"},
		{"A and B ranks differ", config, safe(mat(q+".lora_A.weight", 4, 64), mat(q+".lora_B.weight", 64, 2)), cfg, "rank mismatch"},
		{"B missing", config, safe(mat(q+".lora_A.weight", 4, 64)), cfg, "only one of"},
		{"embeddings", config, safe(mat("base_model.model.model.embed_tokens.lora_embedding_A", 4, 100)), cfg, "token embeddings"},
		{"unknown module", config, safe(mat("base_model.model.model.layers.0.mlp.act.lora_A.weight", 4, 64), mat("base_model.model.model.layers.0.mlp.act.lora_B.weight", 64, 4)), cfg, "not one an adapter can update"},
		{"full weight", config, safe(mat("base_model.model.lm_head.weight", 100, 64)), cfg, "modules_to_save"},
		{"no alpha", bytes.Replace(config, []byte(`"lora_alpha"`), []byte(`"alpha"`), 1), weights, cfg, "lora_alpha is missing"},
		{"dora", bytes.Replace(config, []byte(`"use_dora": false`), []byte(`"use_dora": true`), 1), weights, cfg, "DoRA"},
		{"bad json", config[:10], weights, cfg, PEFTConfigFile},
		{"truncated weights", config, weights[:len(weights)-10], cfg, "truncated"},
		{"wrong base", config, weights, &models.Config{Arch: "llama", Dim: 32, Layers: 2, FFN: 96, Heads: 4, KVHeads: 2, HeadDim: 8, HeadDimV: 8, VocabSize: 100}, "wrong base model"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParsePEFT(c.config, c.weights, c.cfg)
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q, want ErrInvalid containing %q", err, c.want)
			}
		})
	}
}

func TestGGUFRoundTrip(t *testing.T) {
	cfg := smallConfig("llama")
	cases := []struct {
		name string
		spec RandomSpec
		typ  kernels.DType
		tol  float64
	}{
		{"F32 r1", RandomSpec{Rank: 1, Seed: 1}, kernels.F32, 0},
		{"F32 r8", RandomSpec{Rank: 8, Seed: 2}, kernels.F32, 0},
		{"F32 rslora", RandomSpec{Rank: 4, Seed: 3, RSLoRA: true}, kernels.F32, 1e-6},
		{"F16", RandomSpec{Rank: 4, Seed: 4}, kernels.F16, 1e-3},
		{"BF16", RandomSpec{Rank: 4, Seed: 5}, kernels.BF16, 1e-2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := randomAdapter(t, cfg, c.spec)
			a.Name = "x"
			path := filepath.Join(t.TempDir(), "a.gguf")
			if err := a.WriteGGUF(path, c.typ); err != nil {
				t.Fatal(err)
			}
			b, err := OpenGGUF(path)
			if err != nil {
				t.Fatal(err)
			}
			if b.Format != FormatGGUF || b.Arch != "llama" || b.Name != "x" || b.Alpha != a.Alpha {
				t.Errorf("format %s, arch %s, name %s, alpha %v", b.Format, b.Arch, b.Name, b.Alpha)
			}
			sameAdapter(t, a, b, c.tol)
		})
	}
}

// writeGGUF writes a GGUF file with the given keys and F32 tensors of the
// given dims (zeros).
func writeGGUF(t *testing.T, kv map[string]any, tensors map[string][]uint64) string {
	t.Helper()
	w := gguf.NewWriter()
	for k, v := range kv {
		if err := w.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	for name, dims := range tensors {
		n := uint64(1)
		for _, d := range dims {
			n *= d
		}
		if err := w.AddTensor(name, kernels.F32, dims, make([]byte, 4*n)); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "x.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestGGUFErrors(t *testing.T) {
	lora := map[string]any{"general.architecture": "llama", "general.type": "adapter", "adapter.type": "lora", "adapter.lora.alpha": float32(8)}
	with := func(k string, v any) map[string]any {
		m := map[string]any{}
		for a, b := range lora {
			m[a] = b
		}
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	q := "blk.0.attn_q.weight"
	pair := map[string][]uint64{q + ".lora_a": {64, 4}, q + ".lora_b": {4, 64}}
	cases := []struct {
		name    string
		kv      map[string]any
		tensors map[string][]uint64
		want    string
	}{
		{"a model", with("general.type", "model"), pair, "not \"adapter\""},
		{"no type", with("general.type", nil), pair, "not \"adapter\""},
		{"control vector", with("adapter.type", "control_vector"), pair, "not \"lora\""},
		{"alora", with("adapter.alora.invocation_tokens", []uint32{1, 2}), pair, "activated LoRA"},
		{"alpha not a number", with("adapter.lora.alpha", "big"), pair, "finite"},
		{"a without b", lora, map[string][]uint64{q + ".lora_a": {64, 4}}, "only one of"},
		{"rank mismatch", lora, map[string][]uint64{q + ".lora_a": {64, 4}, q + ".lora_b": {8, 64}}, "rank mismatch"},
		{"stray tensor", lora, map[string][]uint64{q: {64, 64}}, "neither"},
		{"no updates", lora, map[string][]uint64{"blk.0.attn_norm.weight": {64}}, "no weights"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := OpenGGUF(writeGGUF(t, c.kv, c.tensors))
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q, want ErrInvalid containing %q", err, c.want)
			}
		})
	}
	t.Run("alpha 0 means scale 1", func(t *testing.T) {
		a, err := OpenGGUF(writeGGUF(t, with("adapter.lora.alpha", nil), pair))
		if err != nil {
			t.Fatal(err)
		}
		if tg, _ := a.Target(q); tg.Scale != 1 || tg.Rank != 4 || tg.In != 64 || tg.Out != 64 {
			t.Fatalf("scale %v rank %d in %d out %d", tg.Scale, tg.Rank, tg.In, tg.Out)
		}
	})
}

func TestValidate(t *testing.T) {
	base, cfg, _ := tinyModel(t)
	good := randomAdapter(t, cfg, RandomSpec{Rank: 2, Seed: 1})
	if err := good.Validate(cfg, base); err != nil {
		t.Fatalf("a fitting adapter: %v", err)
	}
	other := *cfg
	other.FFN = 2 * cfg.FFN
	wide := randomAdapter(t, &other, RandomSpec{Rank: 2, Seed: 1, Targets: []string{"blk.0.ffn_up.weight"}})
	deeper := other
	deeper.FFN, deeper.Layers = cfg.FFN, cfg.Layers+1
	deep := randomAdapter(t, &deeper, RandomSpec{Rank: 2, Seed: 1, Targets: []string{models.TensorName(models.AttnQ, cfg.Layers)}})
	qwen := *cfg
	qwen.Arch = "qwen2"
	foreign := randomAdapter(t, &qwen, RandomSpec{Rank: 2, Seed: 1, Targets: []string{"blk.0.attn_q.weight"}})
	tied := *cfg
	tied.TiedOutput = true
	cases := []struct {
		name string
		a    *Adapter
		cfg  *models.Config
		want string
	}{
		{"shape", wide, cfg, "wrong base model"},
		{"layer", deep, cfg, "has 2 layers"},
		{"arch", foreign, cfg, "made for a qwen2 model"},
		{"tied output", good, &tied, "ties it"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.a.Validate(c.cfg, base)
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want ErrInvalid containing %q", err, c.want)
			}
		})
	}
}

func TestMerge(t *testing.T) {
	base, cfg, _ := tinyModel(t)
	a := randomAdapter(t, cfg, RandomSpec{Rank: 4, Seed: 11})
	cases := []struct {
		name  string
		opt   MergeOptions
		typ   kernels.DType
		scale float64
		tol   float64
	}{
		{"F32", MergeOptions{}, kernels.F32, 1, 1e-6},
		{"F32 half scale", MergeOptions{Scale: 0.5}, kernels.F32, 0.5, 1e-6},
		{"F16", MergeOptions{Type: "F16", Threads: 3}, kernels.F16, 1, 1e-3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "merged.gguf")
			if err := Merge(base, a, path, c.opt); err != nil {
				t.Fatal(err)
			}
			m, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if len(m.Tensors) != len(base.Tensors) || len(m.KV) != len(base.KV) {
				t.Fatalf("%d tensors and %d keys, want %d and %d", len(m.Tensors), len(m.KV), len(base.Tensors), len(base.KV))
			}
			for i := range base.Tensors {
				bt := &base.Tensors[i]
				mt, ok := m.Tensor(bt.Name)
				if !ok {
					t.Fatalf("%s missing", bt.Name)
				}
				tg, updated := a.Target(bt.Name)
				if !updated {
					if mt.Type != bt.Type || !bytes.Equal(m.TensorData(mt), base.TensorData(bt)) {
						t.Fatalf("%s changed", bt.Name)
					}
					continue
				}
				if mt.Type != c.typ {
					t.Fatalf("%s is %v, want %v", bt.Name, mt.Type, c.typ)
				}
				w, _ := base.TensorF32(bt)
				want := make([]float32, len(w))
				b := tg.B()
				for o := range tg.Out {
					for i := range tg.In {
						sum := float64(w[o*tg.In+i])
						for k := range tg.Rank {
							sum += c.scale * float64(tg.Scale) * float64(b[o*tg.Rank+k]) * float64(tg.A[k*tg.In+i])
						}
						want[o*tg.In+i] = float32(sum)
					}
				}
				got := make([]float32, len(w))
				tr, _ := kernels.TraitsOf(mt.Type)
				tr.DequantizeRow(m.TensorData(mt), got)
				closeTo(t, bt.Name, got, want, c.tol)
			}
		})
	}
	t.Run("misfit", func(t *testing.T) {
		other := *cfg
		other.Dim *= 2
		bad := randomAdapter(t, &other, RandomSpec{Rank: 2, Seed: 1, Targets: []string{"blk.0.attn_q.weight"}})
		path := filepath.Join(t.TempDir(), "merged.gguf")
		if err := Merge(base, bad, path, MergeOptions{}); !errors.Is(err, ErrInvalid) {
			t.Fatalf("error %v, want ErrInvalid", err)
		}
		if _, err := os.Stat(path); err == nil {
			t.Fatal("a merged file was written")
		}
	})
	t.Run("bad type", func(t *testing.T) {
		if err := Merge(base, a, filepath.Join(t.TempDir(), "m.gguf"), MergeOptions{Type: "Q9"}); err == nil {
			t.Fatal("no error")
		}
	})
}

// TestDigest: an adapter's digest is the same for a copy made apart (as
// loaded again in another process), and changes with any weight or scale.
func TestDigest(t *testing.T) {
	mk := func(a0, scale float32) *Adapter {
		tg, err := NewTarget("blk.0.attn_q.weight", 3, 2, 1, []float32{a0, 2, 3}, []float32{4, 5}, scale)
		if err != nil {
			t.Fatal(err)
		}
		a, err := New("x", "llama", 1, false, FormatPEFT, []*Target{tg})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	base := mk(1, 0.5)
	if base.ID() == mk(1, 0.5).ID() || base.Digest() != mk(1, 0.5).Digest() {
		t.Fatal("two loads of one adapter: the ids should differ and the digests agree")
	}
	if base.Digest() == mk(1.5, 0.5).Digest() || base.Digest() == mk(1, 0.25).Digest() {
		t.Fatal("adapters of other weights or scales have the same digest")
	}
}

// TestProbeRefusesAbsurdWeights: an adapter whose weights are finite but
// huge (the probe of issue 30 uploaded 3e38 everywhere, and every
// completion then gave <unk>) is refused when it is validated, as is one
// with a NaN; real adapters' weights pass.
func TestProbeRefusesAbsurdWeights(t *testing.T) {
	const in, out, rank = 64, 48, 4
	fill := func(v float32) []float32 {
		s := make([]float32, max(in, out)*rank)
		for i := range s {
			s[i] = v * float32(1+i%3) / 3
		}
		return s
	}
	for _, tc := range []struct {
		name string
		a, b float32
		ok   bool
	}{
		{"typical", 0.02, 0.01, true},
		{"large but sane", 1, 1, true},
		{"3e38", 3e38, 3e38, false},
		{"huge", 1e4, 1e4, false},
		{"NaN", float32(math.NaN()), 0.01, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg, err := NewTarget("blk.0.attn_q.weight", in, out, rank, fill(tc.a)[:rank*in], fill(tc.b)[:out*rank], 2)
			if err != nil {
				t.Fatal(err)
			}
			if err := tg.probe(); (err == nil) != tc.ok {
				t.Errorf("probe: %v, want ok %v", err, tc.ok)
			} else if err != nil && !errors.Is(err, ErrInvalid) {
				t.Errorf("probe: %v is not ErrInvalid", err)
			}
		})
	}
}

// TestGGUFTrainingState checks that a MicroLoRA's training state, its
// trainer's arrays and scalars included, survives a GGUF file, and that a
// file with a state that is not finite float32 arrays and numbers is
// refused.
func TestGGUFTrainingState(t *testing.T) {
	cfg := smallConfig("llama")
	state := &TrainState{
		Arrays:  map[string][]float32{"blk.0.attn_q.weight.a.m": {0.5, -1e-7, 3}, "blk.0.attn_q.weight.b.v": {1e-12, 2}},
		Scalars: map[string]float64{"adam.step": 17, "kto.kl": 0.125},
	}
	cases := []struct {
		name  string
		state *TrainState
		want  string // "" for no error
	}{
		{"no state", nil, ""},
		{"arrays and scalars", state, ""},
		{"not finite", &TrainState{Arrays: map[string][]float32{"m": {float32(math.Inf(1))}}}, "not finite"},
		{"scalar not finite", &TrainState{Scalars: map[string]float64{"adam.step": math.NaN()}}, "not a finite number"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := randomAdapter(t, cfg, RandomSpec{Rank: 2, Seed: 9})
			a.Name = "x"
			a.Training = &Training{Version: 7, Feedback: 9, Updates: 6, Loss: 0.25, State: c.state}
			path := filepath.Join(t.TempDir(), "a.gguf")
			if err := a.WriteGGUF(path, kernels.F32); err != nil {
				t.Fatal(err)
			}
			b, err := OpenGGUF(path)
			if c.want != "" {
				if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("error %v, want ErrInvalid containing %q", err, c.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tr := b.Training
			if tr == nil || tr.Version != 7 || tr.Feedback != 9 || tr.Updates != 6 || tr.Loss != 0.25 {
				t.Fatalf("training %+v", tr)
			}
			if !reflect.DeepEqual(tr.State, c.state) {
				t.Errorf("state %+v, want %+v", tr.State, c.state)
			}
			sameAdapter(t, a, b, 0)
		})
	}
}
