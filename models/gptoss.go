package models

// The roles gpt-oss brings: the attention output's bias and the learned
// attention sinks, one logit per query head that takes part in the
// softmax's normalisation as a position no value belongs to.
var (
	AttnOutBias = DefineRole(RoleSpec{Name: "attn_output", Suffix: "bias", Block: true})  // (dim)
	AttnSinks   = DefineRole(RoleSpec{Name: "attn_sinks", Suffix: "weight", Block: true}) // (heads)
)

// gptOSS is OpenAI's gpt-oss (20b, 120b): pre-norm blocks of attention with
// biases on q, k, v and the output, learned sinks, a sliding window of
// attention.sliding_window (128) in every other layer from the first, and
// YaRN RoPE (factor 32 over an original context of 4096, NeoX pairs); its
// MLP a mixture of experts behind the norm post_attention_norm, routed by
// a router with a bias: the expert_used_count (4) largest logits chosen and
// weighted by their own softmax, each expert a gate and up projection with
// biases into gpt-oss's clamped SwiGLU, x·σ(1.702x)·(y + 1) with x the
// gate clamped above at 7 and y the up clamped to ±7, and a down projection
// with a bias. The output projection is its own.
var gptOSS = &Architecture{
	Name: "gpt-oss",
	Rope: RopeNeoX,
	Tensors: concat(
		embedTensors,
		attentionTensors,
		qkvBiases(false),
		[]TensorSpec{
			{Role: AttnOutBias, Shape: shapeDim},
			{Role: AttnSinks, Shape: func(c *Config) []int { return []int{c.Heads} }},
			{Role: AttnPostNorm, Shape: shapeDim},
			{Role: FFNGateInp, Shape: shapeRouter},
			{Role: FFNGateInpBias, Shape: shapeRouterBias},
			{Role: FFNGateExps, Shape: shapeExpIn},
			{Role: FFNGateExpsB, Shape: shapeExpBiasFFN},
			{Role: FFNUpExps, Shape: shapeExpIn},
			{Role: FFNUpExpsB, Shape: shapeExpBiasFFN},
			{Role: FFNDownExps, Shape: shapeExpOut},
			{Role: FFNDownExpsB, Shape: shapeExpBiasDim},
		},
	),
	HF: map[Role]string{FFNGateInp: "mlp.router"},
	Hyper: func(r *KeyReader, c *Config) {
		readExperts(r, c)
		c.Gating = GatingSoftmaxChosen
		c.SlidingWindow = r.Int("attention.sliding_window", -1)
		c.SWALayers = r.LayerPattern("attention.sliding_window_pattern", c.Layers, 2)
		c.RopeBaseSWA = r.Float("rope.freq_base_swa", float64(c.RopeBase))
		c.RopeScaleSWA = c.RopeScale
	},
}

func init() { Register(gptOSS) }
