package models

import "fmt"

// Names of the whole-model tensors.
const (
	TokenEmbd  = "token_embd.weight"  // (vocab, dim)
	OutputNorm = "output_norm.weight" // (dim)
	OutputName = "output.weight"      // (vocab, dim); absent when tied to TokenEmbd
)

// Kinds of per-block tensors, as GGUF names them after "blk.N.".
const (
	AttnNorm = "attn_norm"   // (dim)
	AttnQ    = "attn_q"      // (heads*head_dim, dim)
	AttnK    = "attn_k"      // (kv_heads*head_dim, dim)
	AttnV    = "attn_v"      // (kv_heads*head_dim_v, dim)
	AttnOut  = "attn_output" // (dim, heads*head_dim_v)
	FFNNorm  = "ffn_norm"    // (dim)
	FFNGate  = "ffn_gate"    // (ffn, dim)
	FFNUp    = "ffn_up"      // (ffn, dim)
	FFNDown  = "ffn_down"    // (dim, ffn)
)

// BlockTensor is the one place per-block tensor names are built:
// BlockTensor(3, AttnQ, "weight") == "blk.3.attn_q.weight".
func BlockTensor(layer int, kind, suffix string) string {
	return fmt.Sprintf("blk.%d.%s.%s", layer, kind, suffix)
}

// OutputTensor is the name of the output projection, which is the token
// embedding when the model ties them.
func (c *Config) OutputTensor() string {
	if c.TiedOutput {
		return TokenEmbd
	}
	return OutputName
}
