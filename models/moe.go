package models

import "math"

// MoE is the mixture of experts of a model whose blocks route each token's
// MLP input to a few of many expert MLPs (Qwen3-30B-A3B, gpt-oss): a router
// (ffn_gate_inp) scores the experts, the ExpertsUsed best run, and their
// outputs are summed weighted by the router. The zero value is a dense
// model.
type MoE struct {
	// Experts is expert_count; ExpertsUsed (expert_used_count) how many a
	// token is routed to; ExpertFFN (expert_feed_forward_length) the
	// hidden size of one expert's MLP.
	Experts, ExpertsUsed, ExpertFFN int
	// Gating is how the router's logits become the chosen experts'
	// weights.
	Gating Gating
	// NormTopK renormalises the chosen experts' weights to sum to 1
	// (Qwen3's norm_topk_prob; the file's expert_weights_norm when it has
	// the key), as llama.cpp does with the sum clamped to at least 2^-14.
	NormTopK bool
	// WeightsScale multiplies the weights when not 0 or 1
	// (expert_weights_scale).
	WeightsScale float32
}

// Gating is how a router's logits weigh the experts.
type Gating int

const (
	// GatingSoftmax takes the softmax over all experts, chooses the
	// largest probabilities and weighs the chosen by them (Qwen3-MoE).
	GatingSoftmax Gating = iota
	// GatingSoftmaxChosen chooses the largest logits and weighs the chosen
	// by the softmax over their logits alone (gpt-oss).
	GatingSoftmaxChosen
)

// IsMoE reports whether the model's blocks are mixtures of experts.
func (c *Config) IsMoE() bool { return c.Experts > 0 }

// The roles of a mixture of experts' blocks. The experts' tensors hold one
// slice per expert: (experts, rows, cols) matrices whose GGUF dims are
// {cols, rows, experts}, and (experts, n) biases; a forward pass reads only
// the slices of the experts a token is routed to.
var (
	FFNGateInp     = DefineRole(RoleSpec{Name: "ffn_gate_inp", Suffix: "weight", Block: true, Linear: true, HF: "mlp.gate"}) // (experts, dim): the router
	FFNGateInpBias = DefineRole(RoleSpec{Name: "ffn_gate_inp", Suffix: "bias", Block: true})                                 // (experts)
	FFNGateExps    = DefineRole(RoleSpec{Name: "ffn_gate_exps", Suffix: "weight", Block: true, Experts: true})               // (experts, expert_ffn, dim)
	FFNUpExps      = DefineRole(RoleSpec{Name: "ffn_up_exps", Suffix: "weight", Block: true, Experts: true})                 // (experts, expert_ffn, dim)
	FFNDownExps    = DefineRole(RoleSpec{Name: "ffn_down_exps", Suffix: "weight", Block: true, Experts: true})               // (experts, dim, expert_ffn)
	FFNGateExpsB   = DefineRole(RoleSpec{Name: "ffn_gate_exps", Suffix: "bias", Block: true, Experts: true})                 // (experts, expert_ffn)
	FFNUpExpsB     = DefineRole(RoleSpec{Name: "ffn_up_exps", Suffix: "bias", Block: true, Experts: true})                   // (experts, expert_ffn)
	FFNDownExpsB   = DefineRole(RoleSpec{Name: "ffn_down_exps", Suffix: "bias", Block: true, Experts: true})                 // (experts, dim)
)

// Shapes of the experts' tensors.
var (
	shapeRouter     = func(c *Config) []int { return []int{c.Experts, c.Dim} }
	shapeRouterBias = func(c *Config) []int { return []int{c.Experts} }
	shapeExpIn      = func(c *Config) []int { return []int{c.Experts, c.ExpertFFN, c.Dim} }
	shapeExpOut     = func(c *Config) []int { return []int{c.Experts, c.Dim, c.ExpertFFN} }
	shapeExpBiasFFN = func(c *Config) []int { return []int{c.Experts, c.ExpertFFN} }
	shapeExpBiasDim = func(c *Config) []int { return []int{c.Experts, c.Dim} }
)

// moeTensors are a pre-norm mixture of SwiGLU experts: its norm, router
// and the experts' gate, up and down projections.
var moeTensors = []TensorSpec{
	{Role: FFNNorm, Shape: shapeDim},
	{Role: FFNGateInp, Shape: shapeRouter},
	{Role: FFNGateExps, Shape: shapeExpIn},
	{Role: FFNUpExps, Shape: shapeExpIn},
	{Role: FFNDownExps, Shape: shapeExpOut},
}

// readExperts reads the keys of a mixture of experts: expert_count and
// expert_used_count are required, expert_feed_forward_length defaults to
// feed_forward_length / expert_used_count as in llama.cpp.
func readExperts(r *KeyReader, c *Config) {
	c.Experts = r.Int("expert_count", -1)
	c.ExpertsUsed = r.Int("expert_used_count", -1)
	if r.err != nil {
		return
	}
	if c.Experts <= 0 || c.ExpertsUsed <= 0 || c.ExpertsUsed > c.Experts {
		r.Fail("expert_count %d and expert_used_count %d do not fit", c.Experts, c.ExpertsUsed)
		return
	}
	c.ExpertFFN = r.Int("expert_feed_forward_length", c.FFN/c.ExpertsUsed)
	if c.ExpertFFN <= 0 {
		r.Fail("expert_feed_forward_length %d must be positive", c.ExpertFFN)
	}
	c.WeightsScale = r.Float("expert_weights_scale", 0)
}

// ActiveParameters counts the weights one token reads in a model of c
// with architecture a: every tensor but the token embeddings (of which a
// token reads one row) and, of each block's experts, the ExpertsUsed it is
// routed to: 3.3 billion of Qwen3-30B-A3B's 30.5.
func (c *Config) ActiveParameters(a *Architecture) int64 {
	var n int64
	for _, t := range a.Tensors {
		if t.Role == TokenEmbd || (t.Role == Output && c.TiedOutput) {
			continue
		}
		size := int64(1)
		for _, d := range t.Shape(c) {
			size *= int64(d)
		}
		if t.Role.Spec().Experts {
			size = size / int64(c.Experts) * int64(c.ExpertsUsed)
		}
		if t.Role.Spec().Block {
			size *= int64(c.Layers)
		}
		n += size
	}
	if c.TiedOutput {
		n += int64(c.VocabSize) * int64(c.Dim)
	}
	return n
}

// yarnScaling sets the YaRN terms of rope.scaling.type yarn as llama.cpp
// derives them (llama_context's yarn_attn_factor, ggml's rope defaults):
// the extrapolation mix 1 unless rope.scaling.yarn_ext_factor says
// otherwise, the correction betas 32 and 1, and the cos/sin factor that
// cancels YaRN's 1 + 0.1·ln(scale) magnitude growth, in float32 as
// llama.cpp computes it.
func yarnScaling(r *KeyReader, c *Config) {
	c.RopeExtFactor = r.Float("rope.scaling.yarn_ext_factor", 1)
	c.RopeBetaFast = r.Float("rope.scaling.yarn_beta_fast", 32)
	c.RopeBetaSlow = r.Float("rope.scaling.yarn_beta_slow", 1)
	if c.RopeExtFactor == 0 {
		return
	}
	factor := 1 / c.RopeScale
	mscale := func(m float32) float32 {
		if factor <= 1 {
			return 1
		}
		return float32(float32(0.1*m)*logf(factor)) + 1
	}
	attn := mscale(1)
	if logMul := r.Float("rope.scaling.yarn_log_multiplier", 0); logMul != 0 {
		attn = attn / mscale(logMul)
	}
	attn *= 1 / float32(1+float32(0.1*logf(factor)))
	c.RopeAttnFactor *= attn
}

// logf is the natural logarithm rounded to float32, as glibc's logf gives
// it for the values these formulas meet.
func logf(x float32) float32 { return float32(math.Log(float64(x))) }
