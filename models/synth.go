package models

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/ruvllm/ruvllm/kernels"
	"github.com/ruvllm/ruvllm/models/gguf"
)

// Shape is the size of a llama-architecture model, for random-weight models
// that let speed be measured on real shapes without a download.
type Shape struct {
	Name                                         string
	Dim, Layers, Heads, KVHeads, FFN, Vocab, Ctx int
}

// Shapes are the shapes synth can write.
var Shapes = []Shape{
	{Name: "llama-134m", Dim: 768, Layers: 12, Heads: 12, KVHeads: 12, FFN: 2048, Vocab: 32000, Ctx: 2048},
	{Name: "tinyllama-1.1b", Dim: 2048, Layers: 22, Heads: 32, KVHeads: 4, FFN: 5632, Vocab: 32000, Ctx: 2048},
	{Name: "tiny", Dim: 256, Layers: 2, Heads: 4, KVHeads: 2, FFN: 512, Vocab: 1024, Ctx: 512},
}

// ShapeByName finds a shape of Shapes.
func ShapeByName(name string) (Shape, error) {
	names := make([]string, len(Shapes))
	for i, s := range Shapes {
		if s.Name == name {
			return s, nil
		}
		names[i] = s.Name
	}
	return Shape{}, fmt.Errorf("unknown shape %q (known: %s)", name, strings.Join(names, ", "))
}

// Synthesize writes a llama model of shape s with random weights (seeded)
// in the file type ft, with a generated SentencePiece vocab of s.Vocab
// tokens. The weights are drawn per row from a seeded generator, so the file
// does not depend on the thread count.
func Synthesize(path string, s Shape, ft FileType, seed uint64, threads int) error {
	w := gguf.NewWriter()
	set := func(k string, v any) {
		if err := w.Set(k, v); err != nil {
			panic(err) // only literal values of valid types are set here
		}
	}
	set("general.architecture", "llama")
	set("general.name", "ruvllm synthetic "+s.Name)
	set("general.file_type", ft.llama)
	set("general.quantization_version", uint32(2))
	set("llama.context_length", uint32(s.Ctx))
	set("llama.embedding_length", uint32(s.Dim))
	set("llama.block_count", uint32(s.Layers))
	set("llama.feed_forward_length", uint32(s.FFN))
	set("llama.attention.head_count", uint32(s.Heads))
	set("llama.attention.head_count_kv", uint32(s.KVHeads))
	set("llama.rope.dimension_count", uint32(s.Dim/s.Heads))
	set("llama.rope.freq_base", float32(10000))
	set("llama.attention.layer_norm_rms_epsilon", float32(1e-5))
	tokens, scores, types := SyntheticSPMVocab(s.Vocab)
	set("tokenizer.ggml.model", "llama")
	set("tokenizer.ggml.tokens", tokens)
	set("tokenizer.ggml.scores", scores)
	set("tokenizer.ggml.token_type", types)
	set("tokenizer.ggml.unknown_token_id", uint32(0))
	set("tokenizer.ggml.bos_token_id", uint32(1))
	set("tokenizer.ggml.eos_token_id", uint32(2))
	set("tokenizer.ggml.add_bos_token", true)
	set("tokenizer.ggml.add_eos_token", false)

	plan := QuantPlan{Type: ft, Layers: s.Layers, GQA: s.Heads / s.KVHeads, HasOutput: true}
	headDim := s.Dim / s.Heads
	add := func(name string, cols, rows int, scale float32) error {
		dims := []uint64{uint64(cols), uint64(rows)}
		t := kernels.F32
		if rows > 1 {
			t = plan.TensorType(name, cols)
		} else {
			dims = dims[:1]
		}
		tr, ok := kernels.TraitsOf(t)
		if !ok {
			return fmt.Errorf("cannot write format %v", t)
		}
		h := fnv.New64a()
		h.Write([]byte(name))
		key := seed ^ h.Sum64()
		fill := func(row int, buf []float32, dst []byte) {
			if rows == 1 { // norm weights: ones, as a trained model's are near
				for i := range buf {
					buf[i] = 1
				}
			} else {
				rng := rand.New(rand.NewPCG(key, uint64(row)))
				for i := range buf {
					buf[i] = (float32(rng.Uint32())/math.MaxUint32*2 - 1) * scale
				}
			}
			tr.QuantizeRow(buf, dst)
		}
		return addRows(w, name, t, dims, rows, cols, t.RowBytes(cols), threads, fill)
	}
	// Uniform weights with the standard deviation 0.02 of llama's init
	// (a uniform on [-a, a] has deviation a/sqrt(3)); norm vectors are ones.
	const a = 0.02 * 1.7320508
	type spec struct {
		name       string
		cols, rows int
	}
	steps := []spec{{TokenEmbd, s.Dim, s.Vocab}}
	for l := 0; l < s.Layers; l++ {
		b := func(kind string) string { return BlockTensor(l, kind, "weight") }
		steps = append(steps,
			spec{b(AttnNorm), s.Dim, 1}, spec{b(AttnQ), s.Dim, s.Heads * headDim},
			spec{b(AttnK), s.Dim, s.KVHeads * headDim}, spec{b(AttnV), s.Dim, s.KVHeads * headDim},
			spec{b(AttnOut), s.Heads * headDim, s.Dim}, spec{b(FFNNorm), s.Dim, 1},
			spec{b(FFNGate), s.Dim, s.FFN}, spec{b(FFNUp), s.Dim, s.FFN}, spec{b(FFNDown), s.FFN, s.Dim})
	}
	steps = append(steps, spec{OutputNorm, s.Dim, 1}, spec{OutputName, s.Dim, s.Vocab})
	for _, st := range steps {
		if err := add(st.name, st.cols, st.rows, a); err != nil {
			return fmt.Errorf("%s: %w", st.name, err)
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
