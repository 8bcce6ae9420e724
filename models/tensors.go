package models

import (
	"fmt"
	"strconv"
	"strings"
)

// Role is what a tensor does in a model, the same in every architecture
// that has it: its GGUF name, whether it belongs to each block, and, for the
// matrices a forward pass multiplies activations by, the Hugging Face module
// that a PEFT adapter names. Roles are defined once, here or in the file of
// the family that brings one, with DefineRole; architectures list which
// roles they have (Architecture.Tensors) and backends keep tensors by role.
type Role uint16

// RoleSpec is what DefineRole records about a role.
type RoleSpec struct {
	// Name is the GGUF name without the block prefix and the suffix:
	// "attn_q" ("blk.N.attn_q.weight"), "token_embd" ("token_embd.weight").
	Name string
	// Suffix is "weight" or "bias".
	Suffix string
	// Block says the tensor is per block, named "blk.N.<Name>.<Suffix>".
	Block bool
	// Linear says the tensor is a matrix the forward pass multiplies
	// activations by, so a LoRA adapter may update it.
	Linear bool
	// Experts says the tensor holds one slice per expert of a mixture of
	// experts (moe.go), its first dimension in row-major order: a forward
	// pass reads only the slices of the experts a token is routed to.
	Experts bool
	// HF is the module a Hugging Face checkpoint names the linear layer by:
	// under "model.layers.N." for a block's ("self_attn.q_proj"), the whole
	// path otherwise ("lm_head"); "" when adapters cannot address it.
	HF string
}

var (
	roles      []RoleSpec
	roleByName = map[string]Role{} // "attn_q.weight" -> AttnQ
)

// DefineRole adds a role. It is called while the package initialises, by
// the file that first needs the role; defining a name twice panics.
func DefineRole(s RoleSpec) Role {
	key := s.Name + "." + s.Suffix
	if _, dup := roleByName[key]; dup || s.Name == "" || (s.Suffix != "weight" && s.Suffix != "bias") {
		panic(fmt.Sprintf("models: role %q defined twice or without a name or suffix", key))
	}
	r := Role(len(roles))
	roles = append(roles, s)
	roleByName[key] = r
	return r
}

// Roles is the number of roles defined: backends size tables indexed by
// Role with it.
func Roles() int { return len(roles) }

// Spec describes the role.
func (r Role) Spec() RoleSpec { return roles[r] }

// String is the role's GGUF name with its suffix, "attn_q.weight".
func (r Role) String() string { return roles[r].Name + "." + roles[r].Suffix }

// TensorName is the GGUF name of the tensor of role r in block layer (which
// is ignored for a whole-model role): TensorName(AttnQ, 3) is
// "blk.3.attn_q.weight". It is the one place tensor names are built.
func TensorName(r Role, layer int) string {
	s := roles[r]
	if !s.Block {
		return s.Name + "." + s.Suffix
	}
	return "blk." + strconv.Itoa(layer) + "." + s.Name + "." + s.Suffix
}

// ParseTensorName is the inverse of TensorName: the role of a GGUF tensor
// name and its block (-1 for a whole-model tensor). ok is false for a name
// no role has.
func ParseTensorName(name string) (r Role, layer int, ok bool) {
	layer, name, ok = cutBlock(name, "blk.")
	if !ok {
		return 0, -1, false
	}
	r, ok = roleByName[name]
	if !ok || roles[r].Block != (layer >= 0) {
		return 0, -1, false
	}
	return r, layer, true
}

// cutBlock splits "<prefix>N.<rest>" into the block N and rest; a name
// without the prefix is a whole-model one, block -1. ok is false when the
// prefix is followed by anything but a block number in canonical form.
func cutBlock(name, prefix string) (layer int, rest string, ok bool) {
	after, isBlock := strings.CutPrefix(name, prefix)
	if !isBlock {
		return -1, name, true
	}
	num, rest, found := strings.Cut(after, ".")
	n, err := strconv.Atoi(num)
	if !found || err != nil || n < 0 || strconv.Itoa(n) != num {
		return -1, "", false
	}
	return n, rest, true
}

// The roles of the llama family, which most architectures share.
var (
	TokenEmbd  = DefineRole(RoleSpec{Name: "token_embd", Suffix: "weight"})                          // (vocab, dim)
	OutputNorm = DefineRole(RoleSpec{Name: "output_norm", Suffix: "weight"})                         // (dim)
	Output     = DefineRole(RoleSpec{Name: "output", Suffix: "weight", Linear: true, HF: "lm_head"}) // (vocab, dim); absent when tied to TokenEmbd
	RopeFreqs  = DefineRole(RoleSpec{Name: "rope_freqs", Suffix: "weight"})                          // (rope_dim/2): Llama 3's frequency divisors
	AttnNorm   = DefineRole(RoleSpec{Name: "attn_norm", Suffix: "weight", Block: true})              // (dim)
	AttnQ      = DefineRole(RoleSpec{Name: "attn_q", Suffix: "weight", Block: true, Linear: true, HF: "self_attn.q_proj"})
	AttnK      = DefineRole(RoleSpec{Name: "attn_k", Suffix: "weight", Block: true, Linear: true, HF: "self_attn.k_proj"})
	AttnV      = DefineRole(RoleSpec{Name: "attn_v", Suffix: "weight", Block: true, Linear: true, HF: "self_attn.v_proj"})
	AttnQBias  = DefineRole(RoleSpec{Name: "attn_q", Suffix: "bias", Block: true}) // (heads*head_dim)
	AttnKBias  = DefineRole(RoleSpec{Name: "attn_k", Suffix: "bias", Block: true}) // (kv_heads*head_dim)
	AttnVBias  = DefineRole(RoleSpec{Name: "attn_v", Suffix: "bias", Block: true}) // (kv_heads*head_dim_v)
	AttnOut    = DefineRole(RoleSpec{Name: "attn_output", Suffix: "weight", Block: true, Linear: true, HF: "self_attn.o_proj"})
	FFNNorm    = DefineRole(RoleSpec{Name: "ffn_norm", Suffix: "weight", Block: true}) // (dim)
	FFNGate    = DefineRole(RoleSpec{Name: "ffn_gate", Suffix: "weight", Block: true, Linear: true, HF: "mlp.gate_proj"})
	FFNUp      = DefineRole(RoleSpec{Name: "ffn_up", Suffix: "weight", Block: true, Linear: true, HF: "mlp.up_proj"})
	FFNDown    = DefineRole(RoleSpec{Name: "ffn_down", Suffix: "weight", Block: true, Linear: true, HF: "mlp.down_proj"})
)
