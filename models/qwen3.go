package models

// The roles Qwen3 brings: RMS norms of each query and key head, applied
// before RoPE (Gemma 3 has them too).
var (
	AttnQNorm = DefineRole(RoleSpec{Name: "attn_q_norm", Suffix: "weight", Block: true}) // (head_dim)
	AttnKNorm = DefineRole(RoleSpec{Name: "attn_k_norm", Suffix: "weight", Block: true}) // (head_dim)
)

// shapeHead is the shape of a per-head vector.
var shapeHead = func(c *Config) []int { return []int{c.HeadDim} }

// qkNormTensors are the per-head query and key norms.
var qkNormTensors = []TensorSpec{
	{Role: AttnQNorm, Shape: shapeHead},
	{Role: AttnKNorm, Shape: shapeHead},
}

// qwen3 is Qwen3 (dense): Qwen2's block without the q/k/v biases and with
// an RMS norm of each query and key head before RoPE; the head size is
// its own (attention.key_length: 128 in every size, so that q is wider
// than the embedding in the small ones). The output projection is tied to
// the embeddings in the small sizes.
var qwen3 = &Architecture{
	Name: "qwen3",
	Rope: RopeNeoX,
	Tensors: concat(
		embedTensors,
		attentionTensors,
		qkNormTensors,
		gatedFFNTensors,
	),
}

func init() { Register(qwen3) }
