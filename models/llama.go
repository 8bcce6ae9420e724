package models

// llama is Llama 1–3 and the files that borrow its layout (Mistral,
// TinyLlama, SmolLM, ...): pre-norm blocks of grouped-query attention and a
// SwiGLU MLP, RoPE on adjacent pairs. The q/k/v biases and Llama 3's
// rope_freqs are optional, as llama.cpp reads them.
var llama = &Architecture{
	Name:       "llama",
	Rope:       RopeNormal,
	PermutedQK: true,
	Tensors: concat(
		embedTensors,
		[]TensorSpec{{Role: RopeFreqs, Shape: shapeRope, Optional: true}},
		attentionTensors,
		qkvBiases(true),
		gatedFFNTensors,
	),
	Sparse: blockLinear,
}

func init() { Register(llama) }
