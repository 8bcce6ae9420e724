package models

// qwen2 is Qwen2 and Qwen2.5: llama's block with biases on q, k and v
// (required), and RoPE on the two halves of each head (NeoX style). Its
// GGUF conversion leaves q and k in Hugging Face order.
var qwen2 = &Architecture{
	Name: "qwen2",
	Rope: RopeNeoX,
	Tensors: concat(
		embedTensors,
		attentionTensors,
		qkvBiases(false),
		gatedFFNTensors,
	),
	Sparse: blockLinear,
}

func init() { Register(qwen2) }
