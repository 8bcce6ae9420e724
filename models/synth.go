package models

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/ruvllm/ruvllm/kernels"
	"github.com/ruvllm/ruvllm/models/gguf"
)

// Shape is the size of a model, for random-weight models that let speed be
// measured on real shapes without a download, and tests run on every
// family.
type Shape struct {
	Name string
	// Arch is the architecture; "" means llama.
	Arch                                         string
	Dim, Layers, Heads, KVHeads, FFN, Vocab, Ctx int
	// HeadDim is the size of a query and key head when it is not
	// Dim/Heads (Qwen3, Gemma); 0 means Dim/Heads.
	HeadDim int
	// Tied leaves the output projection out: the token embeddings project
	// to the logits, as in the small Qwen3, Gemma and Llama 3.2 models.
	Tied bool
	// Keys are the family's other hyperparameters, named without the
	// "<arch>." prefix ("attention.sliding_window", "rope.freq_base"): they
	// are written after synth's own, which they replace. Under another
	// --arch the ones it does not read are left unread.
	Keys map[string]any
	// Llama3, when set, is Llama 3.1's RoPE scaling, written as the
	// rope.scaling keys, or as rope_freqs.weight when RopeFreqs is set, as
	// llama.cpp's converter writes it (llama.cpp reads only that form).
	Llama3    *Llama3Scaling
	RopeFreqs bool
	// Std is the standard deviation of the random weights; 0 means 0.02,
	// llama's init. OutStd is that of the token embeddings and the output
	// projection; 0 means Std. The tiny family shapes use more, so that
	// their logits differ by margins that greedy parity can be judged on.
	Std, OutStd float64
	// Specials are the family's control tokens (chat turns), which take
	// the last places of the vocab, so that its chat template's prompts
	// tokenize as the family's do. llama.cpp wants some of them (Phi-3's
	// <|endoftext|>).
	Specials []string
	// ChatTemplate, when set, is written as tokenizer.chat_template.
	ChatTemplate string
	// RopeDim is how many dimensions of a head RoPE rotates when not all
	// (Phi-4-mini's partial rotary factor); 0 means all.
	RopeDim int
	// Experts, ExpertsUsed and ExpertFFN shape a mixture of experts
	// (qwen3moe, gpt-oss): written as expert_count, expert_used_count and
	// expert_feed_forward_length.
	Experts, ExpertsUsed, ExpertFFN int
	// LongRoPE, when set, is the original context of a LongRoPE model
	// (Phi-3.5, Phi-4-mini), written with made-up short and long factors
	// (rope_factors_short/long.weight: 1 to 2.5, and 1 to 32) and the
	// converter's attention factor sqrt(1 + ln(Ctx/LongRoPE)/ln(LongRoPE)).
	LongRoPE int
}

// The hyperparameters and control tokens of the real families' shapes.
var (
	qwen3Keys     = map[string]any{"rope.freq_base": float32(1e6), "attention.layer_norm_rms_epsilon": float32(1e-6)}
	llama3        = &Llama3Scaling{Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalCtx: 8192}
	llama3Special = []string{"<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"}
	qwen3Specials = []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>", "</tool_call>"}
	gemmaSpecials = []string{"<pad>", "<start_of_turn>", "<end_of_turn>"}
	phi3Specials  = []string{"<|endoftext|>", "<|assistant|>", "<|end|>", "<|system|>", "<|user|>"}
	// gpt-oss's harmony format: the tokens its chat template writes and
	// its answers hold.
	harmonySpecials = []string{"<|startoftext|>", "<|endoftext|>", "<|return|>", "<|constrain|>", "<|channel|>",
		"<|start|>", "<|end|>", "<|message|>", "<|call|>"}
	// gpt-oss's RoPE: YaRN over the original context of 4096, and its
	// window.
	gptOSSKeys = map[string]any{"rope.freq_base": float32(150000), "rope.scaling.type": "yarn", "rope.scaling.factor": float32(32),
		"rope.scaling.original_context_length": uint32(4096), "attention.sliding_window": uint32(128)}
)

// The weight deviation and soft-caps of the tiny family shapes.
const (
	tinyStd, tinyOutStd       = 0.25, 1
	tinyAttnCap, tinyFinalCap = 5, 5
	tinyMoEStd, tinyMoEOutStd = 0.125, 0.5 // for four times the width of the others
)

// Shapes are the shapes synth can write: real models' (the names say
// which) and tiny ones for tests. The tiny-FAMILY shapes (dim 64) make the
// files of testdata whose llama.cpp references the parity tests replay:
// their sliding windows (8) are tiny too, so that they act, and their
// weights larger (tinyStd), so that the logits differ by margins that
// greedy parity can be judged on and the soft-caps bend them.
var Shapes = []Shape{
	{Name: "llama-134m", Dim: 768, Layers: 12, Heads: 12, KVHeads: 12, FFN: 2048, Vocab: 32000, Ctx: 2048},
	{Name: "tinyllama-1.1b", Dim: 2048, Layers: 22, Heads: 32, KVHeads: 4, FFN: 5632, Vocab: 32000, Ctx: 2048},
	{Name: "tiny", Dim: 256, Layers: 2, Heads: 4, KVHeads: 2, FFN: 512, Vocab: 1024, Ctx: 512},
	{Name: "llama-3.2-1b", Dim: 2048, Layers: 16, Heads: 32, KVHeads: 8, FFN: 8192, Vocab: 128256, Ctx: 131072, Tied: true,
		Keys: map[string]any{"rope.freq_base": float32(500000)}, Llama3: llama3, RopeFreqs: true, Specials: llama3Special},
	{Name: "qwen3-0.6b", Arch: "qwen3", Dim: 1024, Layers: 28, Heads: 16, KVHeads: 8, HeadDim: 128, FFN: 3072, Vocab: 151936,
		Ctx: 40960, Tied: true, Keys: qwen3Keys, Specials: qwen3Specials},
	{Name: "gemma-2-2b", Arch: "gemma2", Dim: 2304, Layers: 26, Heads: 8, KVHeads: 4, HeadDim: 256, FFN: 9216, Vocab: 256000,
		Ctx: 8192, Tied: true, Keys: map[string]any{"attention.sliding_window": uint32(4096), "attention.layer_norm_rms_epsilon": float32(1e-6),
			"attn_logit_softcapping": float32(50), "final_logit_softcapping": float32(30)}, Specials: gemmaSpecials},
	{Name: "gemma-3-1b", Arch: "gemma3", Dim: 1152, Layers: 26, Heads: 4, KVHeads: 1, HeadDim: 256, FFN: 6912, Vocab: 262144,
		Ctx: 32768, Tied: true, Keys: map[string]any{"attention.sliding_window": uint32(512), "rope.freq_base": float32(1e6),
			"attention.layer_norm_rms_epsilon": float32(1e-6)}, Specials: gemmaSpecials},
	{Name: "phi-3-mini", Arch: "phi3", Dim: 3072, Layers: 32, Heads: 32, KVHeads: 32, FFN: 8192, Vocab: 32064, Ctx: 4096,
		Specials: phi3Specials, Keys: map[string]any{"attention.sliding_window": uint32(2047)}},
	{Name: "phi-4-mini", Arch: "phi3", Dim: 3072, Layers: 32, Heads: 24, KVHeads: 8, HeadDim: 128, RopeDim: 96, FFN: 8192,
		Vocab: 200064, Ctx: 131072, Tied: true, LongRoPE: 4096, Specials: phi3Specials, Keys: map[string]any{"rope.freq_base": float32(10000)}},
	{Name: "qwen3-30b-a3b", Arch: "qwen3moe", Dim: 2048, Layers: 48, Heads: 32, KVHeads: 4, HeadDim: 128, FFN: 6144, Vocab: 151936,
		Ctx: 40960, Experts: 128, ExpertsUsed: 8, ExpertFFN: 768, Keys: qwen3Keys, Specials: qwen3Specials},
	{Name: "gpt-oss-20b", Arch: "gpt-oss", Dim: 2880, Layers: 24, Heads: 64, KVHeads: 8, HeadDim: 64, FFN: 2880, Vocab: 201088,
		Ctx: 131072, Experts: 32, ExpertsUsed: 4, ExpertFFN: 2880, Keys: gptOSSKeys, Specials: harmonySpecials},
	{Name: "tiny-llama3", Dim: 64, Layers: 3, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 512, Ctx: 512, Std: tinyStd, OutStd: tinyOutStd,
		Keys: map[string]any{"rope.freq_base": float32(500000)}, Llama3: llama3, RopeFreqs: true, Specials: llama3Special},
	{Name: "tiny-llama3-keys", Dim: 64, Layers: 3, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 512, Ctx: 512, Std: tinyStd, OutStd: tinyOutStd,
		Keys: map[string]any{"rope.freq_base": float32(500000)}, Llama3: llama3, Specials: llama3Special},
	{Name: "tiny-qwen3", Arch: "qwen3", Dim: 64, Layers: 3, Heads: 4, KVHeads: 2, HeadDim: 32, FFN: 128, Vocab: 512, Ctx: 512,
		Std: tinyStd, OutStd: tinyOutStd, Tied: true, Keys: qwen3Keys, Specials: qwen3Specials},
	{Name: "tiny-qwen2", Arch: "qwen2", Dim: 64, Layers: 2, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 512, Ctx: 512,
		Std: tinyStd, OutStd: tinyOutStd, Tied: true, Keys: qwen3Keys, Specials: qwen3Specials},
	{Name: "tiny-gemma2", Arch: "gemma2", Dim: 64, Layers: 3, Heads: 4, KVHeads: 2, HeadDim: 32, FFN: 128, Vocab: 512, Ctx: 512,
		Std: tinyStd, Tied: true, Keys: map[string]any{"attention.sliding_window": uint32(8), "attention.layer_norm_rms_epsilon": float32(1e-6),
			"attn_logit_softcapping": float32(tinyAttnCap), "final_logit_softcapping": float32(tinyFinalCap)}, Specials: gemmaSpecials},
	{Name: "tiny-gemma3", Arch: "gemma3", Dim: 64, Layers: 3, Heads: 4, KVHeads: 1, HeadDim: 32, FFN: 128, Vocab: 512, Ctx: 512,
		Std: tinyStd, Tied: true, Keys: map[string]any{"attention.sliding_window": uint32(8), "attention.sliding_window_pattern": uint32(3),
			"rope.freq_base": float32(1e6), "rope.freq_base_swa": float32(10000), "attention.layer_norm_rms_epsilon": float32(1e-6)},
		Specials: gemmaSpecials},
	{Name: "tiny-phi3", Arch: "phi3", Dim: 64, Layers: 3, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 512, Ctx: 512, Std: tinyStd, OutStd: tinyOutStd,
		Specials: phi3Specials},
	{Name: "tiny-phi3-longrope", Arch: "phi3", Dim: 64, Layers: 3, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 512, Ctx: 512, Std: tinyStd,
		OutStd: tinyOutStd, Specials: phi3Specials, RopeDim: 12, LongRoPE: 256, Tied: true},
	// The mixtures of experts are 256 wide, so that their k-quant and
	// IQ4_XS files hold those formats (a row of 64 holds no 256-block).
	{Name: "tiny-qwen3moe", Arch: "qwen3moe", Dim: 256, Layers: 3, Heads: 4, KVHeads: 2, HeadDim: 64, FFN: 1024, Vocab: 512, Ctx: 512,
		Experts: 16, ExpertsUsed: 4, ExpertFFN: 256, Std: tinyMoEStd, OutStd: tinyMoEOutStd, Keys: qwen3Keys, Specials: qwen3Specials},
	{Name: "tiny-gpt-oss", Arch: "gpt-oss", Dim: 256, Layers: 3, Heads: 4, KVHeads: 2, HeadDim: 64, FFN: 256, Vocab: 512, Ctx: 512,
		Experts: 8, ExpertsUsed: 4, ExpertFFN: 256, Std: tinyMoEStd, OutStd: tinyMoEOutStd, Specials: harmonySpecials,
		Keys: map[string]any{"rope.freq_base": float32(150000), "rope.scaling.type": "yarn", "rope.scaling.factor": float32(32),
			"rope.scaling.original_context_length": uint32(4096), "attention.sliding_window": uint32(8)}},
}

// TinyShape is the narrowest tiny shape (named "tiny…") of architecture
// arch in Shapes, the first of equals, for tests that run every
// architecture.
func TinyShape(arch string) (Shape, bool) {
	var best Shape
	for _, s := range Shapes {
		if strings.HasPrefix(s.Name, "tiny") && cmp.Or(s.Arch, "llama") == arch && (best.Name == "" || s.Dim < best.Dim) {
			best = s
		}
	}
	return best, best.Name != ""
}

// ShapeByName finds a shape of Shapes.
func ShapeByName(name string) (Shape, error) {
	for _, s := range Shapes {
		if s.Name == name {
			return s, nil
		}
	}
	return Shape{}, fmt.Errorf("unknown shape %q (known: %s)", name, strings.Join(ShapeNames(), ", "))
}

// ShapeNames lists the names of Shapes, in order.
func ShapeNames() []string {
	names := make([]string, len(Shapes))
	for i, s := range Shapes {
		names[i] = s.Name
	}
	return names
}

// Synthesize writes a model of shape s with random weights (seeded) in the
// file type ft, with a generated SentencePiece vocab of s.Vocab tokens: the
// tensors its architecture's description requires, and the output
// projection. The weights are drawn per row from a seeded generator, so the
// file does not depend on the thread count.
func Synthesize(path string, s Shape, ft FileType, seed uint64, threads int) error {
	if s.Arch == "" {
		s.Arch = "llama"
	}
	arch, ok := Lookup(s.Arch)
	if !ok {
		return fmt.Errorf("synth: architecture %q is not supported (supported: %s)", s.Arch, archList())
	}
	if s.Heads <= 0 || s.KVHeads <= 0 || s.Dim%s.Heads != 0 || s.Heads%s.KVHeads != 0 {
		return fmt.Errorf("synth: %d heads, %d kv heads and dim %d do not fit", s.Heads, s.KVHeads, s.Dim)
	}
	headDim := s.Dim / s.Heads
	if s.HeadDim > 0 {
		headDim = s.HeadDim
	}
	ropeDim := cmp.Or(s.RopeDim, headDim)
	cfg := &Config{Arch: s.Arch, ContextLength: s.Ctx, Dim: s.Dim, Layers: s.Layers, FFN: s.FFN,
		Heads: s.Heads, KVHeads: s.KVHeads, HeadDim: headDim, HeadDimV: headDim, VocabSize: s.Vocab, RopeDim: ropeDim,
		MoE: MoE{Experts: s.Experts, ExpertsUsed: s.ExpertsUsed, ExpertFFN: s.ExpertFFN}}
	w := gguf.NewWriter()
	set := func(k string, v any) {
		if err := w.Set(k, v); err != nil {
			panic(err) // only literal values of valid types are set here
		}
	}
	key := func(k string) string { return s.Arch + "." + k }
	set("general.architecture", s.Arch)
	set("general.name", "ruvllm synthetic "+s.Name)
	set("general.file_type", ft.llama)
	set("general.quantization_version", uint32(2))
	set(key("context_length"), uint32(s.Ctx))
	set(key("embedding_length"), uint32(s.Dim))
	set(key("block_count"), uint32(s.Layers))
	set(key("feed_forward_length"), uint32(s.FFN))
	set(key("attention.head_count"), uint32(s.Heads))
	set(key("attention.head_count_kv"), uint32(s.KVHeads))
	set(key("rope.dimension_count"), uint32(ropeDim))
	if s.Experts > 0 {
		set(key("expert_count"), uint32(s.Experts))
		set(key("expert_used_count"), uint32(s.ExpertsUsed))
		set(key("expert_feed_forward_length"), uint32(s.ExpertFFN))
	}
	if s.LongRoPE > 0 {
		set(key("rope.scaling.type"), "longrope")
		set(key("rope.scaling.original_context_length"), uint32(s.LongRoPE))
		scale := float64(s.Ctx) / float64(s.LongRoPE)
		set(key("rope.scaling.attn_factor"), float32(math.Sqrt(1+math.Log(scale)/math.Log(float64(s.LongRoPE)))))
	}
	if headDim != s.Dim/s.Heads {
		set(key("attention.key_length"), uint32(headDim))
		set(key("attention.value_length"), uint32(headDim))
	}
	set(key("rope.freq_base"), float32(10000))
	set(key("attention.layer_norm_rms_epsilon"), float32(1e-5))
	if l := s.Llama3; l != nil && !s.RopeFreqs {
		set(key("rope.scaling.type"), "llama3")
		set(key("rope.scaling.factor"), l.Factor)
		set(key("rope.scaling.low_freq_factor"), l.LowFreqFactor)
		set(key("rope.scaling.high_freq_factor"), l.HighFreqFactor)
		set(key("rope.scaling.original_context_length"), uint32(l.OriginalCtx))
	}
	keys := make([]string, 0, len(s.Keys))
	for k := range s.Keys {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		set(key(k), s.Keys[k])
	}
	tokens, scores, types := SyntheticSPMVocab(s.Vocab)
	if len(s.Specials) > s.Vocab-3-256 {
		return fmt.Errorf("synth: %d control tokens do not fit a vocab of %d", len(s.Specials), s.Vocab)
	}
	for i, sp := range s.Specials {
		at := s.Vocab - len(s.Specials) + i
		tokens[at], scores[at], types[at] = sp, 0, 3
	}
	set("tokenizer.ggml.model", "llama")
	set("tokenizer.ggml.tokens", tokens)
	set("tokenizer.ggml.scores", scores)
	set("tokenizer.ggml.token_type", types)
	set("tokenizer.ggml.unknown_token_id", uint32(0))
	set("tokenizer.ggml.bos_token_id", uint32(1))
	set("tokenizer.ggml.eos_token_id", uint32(2))
	set("tokenizer.ggml.add_bos_token", true)
	set("tokenizer.ggml.add_eos_token", false)
	if s.ChatTemplate != "" {
		set("tokenizer.chat_template", s.ChatTemplate)
	}

	plan := QuantPlan{Type: ft, Layers: s.Layers, GQA: s.Heads / s.KVHeads, HasOutput: !s.Tied, Experts: s.Experts}
	// add writes a tensor of the row-major shape: norm vectors are ones, as
	// a trained model's are near, and everything else (matrices, biases) is
	// uniform with the standard deviation 0.02 of llama's init (a uniform on
	// [-a, a] has deviation a/sqrt(3)).
	a := float32(cmp.Or(s.Std, 0.02) * 1.7320508)
	add := func(name string, shape []int, norm bool) error {
		a := a
		if r, _, _ := ParseTensorName(name); (r == TokenEmbd || r == Output) && s.OutStd > 0 {
			a = float32(s.OutStd * 1.7320508)
		}
		cols, rows := shape[len(shape)-1], 1
		dims := ggufDims(shape)
		for _, d := range shape[:len(shape)-1] {
			rows *= d // a matrix's rows, or all experts' rows
		}
		t := kernels.F32
		if Quantized(name, dims) {
			t = plan.TensorType(name, cols)
		}
		tr, ok := kernels.TraitsOf(t)
		if !ok {
			return fmt.Errorf("cannot write format %v", t)
		}
		h := fnv.New64a()
		h.Write([]byte(name))
		key := seed ^ h.Sum64()
		fill := func(_, row int, buf []float32, dst []byte) {
			if norm {
				for i := range buf {
					buf[i] = 1
				}
			} else {
				rng := rand.New(rand.NewPCG(key, uint64(row)))
				for i := range buf {
					buf[i] = (float32(rng.Uint32())/math.MaxUint32*2 - 1) * a
				}
			}
			tr.QuantizeRow(buf, dst)
		}
		return AddRows(w, name, t, dims, rows, cols, t.RowBytes(cols), threads, fill)
	}
	// Whole-model tensors first, then block by block, in llama.cpp's order
	// (embeddings, blocks, final norm and output).
	var global, block []TensorSpec
	for _, t := range arch.Tensors {
		switch {
		case t.Role == Output && s.Tied:
		case t.Optional && t.Role != Output:
		case t.Role.Spec().Block:
			block = append(block, t)
		default:
			global = append(global, t)
		}
	}
	write := func(t TensorSpec, layer int) error {
		name := TensorName(t.Role, layer)
		shape := t.Shape(cfg)
		if err := add(name, shape, len(shape) == 1 && strings.HasSuffix(name, "_norm.weight")); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	}
	rank := func(t TensorSpec) int { // token_embd leads
		if t.Role == TokenEmbd {
			return 0
		}
		return 1
	}
	slices.SortStableFunc(global, func(x, y TensorSpec) int { return rank(x) - rank(y) })
	if err := write(global[0], 0); err != nil {
		return err
	}
	for l := range s.Layers {
		for _, t := range block {
			if err := write(t, l); err != nil {
				return err
			}
		}
	}
	for _, t := range global[1:] {
		if err := write(t, 0); err != nil {
			return err
		}
	}
	vector := func(r Role, xs []float32) error {
		data := make([]byte, 4*len(xs))
		for i, f := range xs {
			binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(f))
		}
		return w.AddTensor(TensorName(r, 0), kernels.F32, []uint64{uint64(len(xs))}, data)
	}
	if s.Llama3 != nil && s.RopeFreqs {
		base, ok := s.Keys["rope.freq_base"].(float32)
		if !ok {
			base = 10000
		}
		if err := vector(RopeFreqs, Llama3RopeFactors(ropeDim, base, *s.Llama3)); err != nil {
			return err
		}
	}
	if s.LongRoPE > 0 {
		half := ropeDim / 2
		short, long := make([]float32, half), make([]float32, half)
		for i := range half {
			x := float32(i) / float32(max(half-1, 1))
			short[i], long[i] = 1+1.5*x, 1+31*x*x
		}
		if err := vector(RopeFactorsLong, long); err != nil {
			return err
		}
		if err := vector(RopeFactorsShort, short); err != nil {
			return err
		}
	}
	return w.WriteFile(path)
}

// SyntheticSPMVocab makes a SentencePiece vocab of n tokens: <unk>, <s>,
// </s>, the 256 byte tokens, then pieces of growing length over a small
// alphabet, each piece's prefix earlier in the list so that merges can build
// every piece, with scores falling with length as SentencePiece's do.
func SyntheticSPMVocab(n int) (tokens []string, scores []float32, types []int32) {
	add := func(s string, score float32, typ int32) {
		tokens = append(tokens, s)
		scores = append(scores, score)
		types = append(types, typ)
	}
	add("<unk>", 0, 2)
	add("<s>", 0, 3)
	add("</s>", 0, 3)
	for b := 0; b < 256 && len(tokens) < n; b++ {
		add(fmt.Sprintf("<0x%02X>", b), 0, 6)
	}
	alphabet := []string{"▁"}
	for c := 'a'; c <= 'z'; c++ {
		alphabet = append(alphabet, string(c))
	}
	for c := 'A'; c <= 'Z'; c++ {
		alphabet = append(alphabet, string(c))
	}
	for _, c := range "0123456789.,!?'\"-:;()" {
		alphabet = append(alphabet, string(c))
	}
	level := []string{""}
	for len(tokens) < n {
		var next []string
		for _, p := range level {
			for _, c := range alphabet {
				if len(tokens) >= n {
					break
				}
				if c == "▁" && p != "" { // ▁ (a space) only leads a piece
					continue
				}
				piece := p + c
				add(piece, -float32(len(tokens)), 1)
				next = append(next, piece)
			}
		}
		level = next
	}
	return tokens, scores, types
}
