package models

// The roles Phi-3 brings: q, k and v in one matrix, and the two sets of
// RoPE frequency factors of its 128k-context models (LongRoPE): short ones
// for contexts up to the original length, long ones past it.
var (
	AttnQKV          = DefineRole(RoleSpec{Name: "attn_qkv", Suffix: "weight", Block: true, Linear: true, HF: "self_attn.qkv_proj"}) // (heads*head_dim + 2*kv_heads*head_dim, dim)
	RopeFactorsLong  = DefineRole(RoleSpec{Name: "rope_factors_long", Suffix: "weight"})                                             // (rope_dim/2)
	RopeFactorsShort = DefineRole(RoleSpec{Name: "rope_factors_short", Suffix: "weight"})                                            // (rope_dim/2)
)

// phi3 is Phi-3, Phi-3.5 and Phi-4-mini: llama's pre-norm block with q, k
// and v in one matrix (attn_qkv, q then k then v rows) and the gate and up
// projections in one (ffn_up, the gate's rows first), NeoX RoPE. The files'
// sliding_window key is not applied, as llama.cpp does not apply it. The
// output projection may be tied (Phi-4-mini).
var phi3 = &Architecture{
	Name: "phi3",
	Rope: RopeNeoX,
	Tensors: concat(
		embedTensors,
		[]TensorSpec{
			{Role: RopeFactorsLong, Shape: shapeRope, Optional: true},
			{Role: RopeFactorsShort, Shape: shapeRope, Optional: true},
			{Role: AttnNorm, Shape: shapeDim},
			{Role: AttnQKV, Shape: func(c *Config) []int { return []int{(c.Heads+c.KVHeads)*c.HeadDim + c.KVHeads*c.HeadDimV, c.Dim} }},
			{Role: AttnOut, Shape: shapeO},
			{Role: FFNNorm, Shape: shapeDim},
			{Role: FFNUp, Shape: func(c *Config) []int { return []int{2 * c.FFN, c.Dim} }},
			{Role: FFNDown, Shape: shapeFFNOut},
		},
	),
	HF: map[Role]string{FFNUp: "mlp.gate_up_proj"},
}

func init() { Register(phi3) }
