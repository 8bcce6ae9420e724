package models

// qwen3moe is Qwen3's mixtures of experts (Qwen3-30B-A3B, Qwen3-235B-A22B,
// the Qwen3-Coder MoEs): Qwen3's attention (q/k norms, NeoX RoPE, head size
// 128) and, in place of its MLP, a router softmax over the experts (128),
// the expert_used_count (8) most probable of them run as SwiGLU MLPs, their
// outputs weighted by the probabilities renormalised to sum to 1 (the
// checkpoints' norm_topk_prob, which llama.cpp always applies; a file's
// expert_weights_norm key can turn it off).
var qwen3moe = &Architecture{
	Name: "qwen3moe",
	Rope: RopeNeoX,
	Tensors: concat(
		embedTensors,
		attentionTensors,
		qkNormTensors,
		moeTensors,
	),
	Hyper: func(r *KeyReader, c *Config) {
		readExperts(r, c)
		c.Gating = GatingSoftmax
		c.NormTopK = r.Bool("expert_weights_norm", true)
	},
}

func init() { Register(qwen3moe) }
