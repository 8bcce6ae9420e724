package models

import (
	"fmt"
	"sort"
	"strings"

	"github.com/ruvllm/ruvllm/kernels"
)

// FileType is a whole-model quantization choice as llama-quantize names them
// ("Q4_K_M"): a default block format plus a mix that gives sensitive tensors
// more bits.
type FileType struct {
	Name string
	// Base is the format of most weight matrices.
	Base kernels.DType
	// size picks the mix variant of the k-quants: 'S', 'M', 'L' or 0.
	size byte
	// llama is llama.cpp's number for it, stored as general.file_type.
	llama uint32
}

var fileTypes = map[string]FileType{
	"F32": {"F32", kernels.F32, 0, 0}, "F16": {"F16", kernels.F16, 0, 1}, "BF16": {"BF16", kernels.BF16, 0, 32},
	"Q8_0": {"Q8_0", kernels.Q8_0, 0, 7}, "Q4_0": {"Q4_0", kernels.Q4_0, 0, 2}, "Q4_1": {"Q4_1", kernels.Q4_1, 0, 3},
	"Q5_0": {"Q5_0", kernels.Q5_0, 0, 8}, "Q5_1": {"Q5_1", kernels.Q5_1, 0, 9},
	"Q2_K":   {"Q2_K", kernels.Q2_K, 0, 10},
	"Q3_K_S": {"Q3_K_S", kernels.Q3_K, 'S', 11}, "Q3_K_M": {"Q3_K_M", kernels.Q3_K, 'M', 12}, "Q3_K_L": {"Q3_K_L", kernels.Q3_K, 'L', 13},
	"Q4_K_S": {"Q4_K_S", kernels.Q4_K, 'S', 14}, "Q4_K_M": {"Q4_K_M", kernels.Q4_K, 'M', 15},
	"Q5_K_S": {"Q5_K_S", kernels.Q5_K, 'S', 16}, "Q5_K_M": {"Q5_K_M", kernels.Q5_K, 'M', 17},
	"Q6_K":   {"Q6_K", kernels.Q6_K, 0, 18},
	"IQ4_NL": {"IQ4_NL", kernels.IQ4_NL, 0, 25}, "IQ4_XS": {"IQ4_XS", kernels.IQ4_XS, 0, 30},
	// Mixtures of experts: the experts in MXFP4, everything else in Q8_0,
	// as gpt-oss is released.
	"MXFP4_MOE": {"MXFP4_MOE", kernels.MXFP4, 0, 38},
}

// FileTypes lists the names ParseFileType accepts.
func FileTypes() []string {
	names := make([]string, 0, len(fileTypes))
	for n := range fileTypes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ParseFileType looks a file type up by name, case-insensitively; "Q4_K" and
// the like mean their _M variant, as llama-quantize takes them.
func ParseFileType(s string) (FileType, error) {
	u := strings.ToUpper(s)
	if ft, ok := fileTypes[u]; ok {
		return ft, nil
	}
	if ft, ok := fileTypes[u+"_M"]; ok {
		return ft, nil
	}
	return FileType{}, fmt.Errorf("unknown quantization type %q (known: %s)", s, strings.Join(FileTypes(), ", "))
}

// QuantPlan chooses the format of each tensor of a model being quantized.
type QuantPlan struct {
	Type FileType
	// Pure gives every quantized tensor the base format (llama-quantize --pure).
	Pure bool
	// Layers is the model's block count; GQA is heads / kv heads.
	Layers, GQA int
	// HasOutput is false when the output projection is tied to token_embd,
	// which then gets the output's format.
	HasOutput bool
	// Experts is the expert count of a mixture of experts (0: dense),
	// whose 8-expert models get more bits in attn_v, attn_k and
	// attn_output, as llama-quantize gives Mixtral's.
	Experts int
}

// Quantized reports whether a tensor is quantized at all: norms, biases and
// other vectors stay as they are, as llama-quantize leaves them, and so
// does a mixture of experts' router (ffn_gate_inp), which it keeps exact.
func Quantized(name string, dims []uint64) bool {
	return len(dims) >= 2 && strings.HasSuffix(name, "weight") && !strings.Contains(name, "_norm.weight") &&
		!strings.Contains(name, "ffn_gate_inp.weight")
}

// TensorType is the format of tensor name with row length rowLen, following
// llama.cpp's mixes for llama-like models: the output projection gets Q6_K,
// and attn_v / ffn_down of some layers get more bits in the _M/_L variants.
// A row length the chosen k-quant cannot divide falls back to a legacy format.
func (p QuantPlan) TensorType(name string, rowLen int) kernels.DType {
	t := p.Type.Base
	if p.Type.Base == kernels.F32 || p.Type.Base == kernels.F16 || p.Type.Base == kernels.BF16 {
		return t
	}
	if !p.Pure {
		t = p.mix(name, rowLen)
	}
	if rowLen%t.BlockSize() != 0 {
		switch t {
		case kernels.Q2_K, kernels.Q3_K:
			t = kernels.Q4_0
		case kernels.IQ4_XS:
			t = kernels.IQ4_NL
		case kernels.Q4_K:
			t = kernels.Q5_0
		case kernels.Q5_K:
			t = kernels.Q5_1
		case kernels.Q6_K:
			t = kernels.Q8_0
		}
		if rowLen%t.BlockSize() != 0 {
			t = kernels.F16
		}
	}
	return t
}

func (p QuantPlan) mix(name string, rowLen int) kernels.DType {
	ft, t := p.Type, p.Type.Base
	role, layer, known := ParseTensorName(name)
	if !known {
		return t
	}
	n := p.Layers
	moreBits := func() bool { return layer < n/8 || layer >= 7*n/8 || (layer-n/8)%3 == 2 }
	is := func(names ...string) bool {
		for _, s := range names {
			if ft.Name == s {
				return true
			}
		}
		return false
	}
	iq4 := is("IQ4_NL", "IQ4_XS")
	switch {
	case role == Output || (!p.HasOutput && role == TokenEmbd):
		if rowLen%kernels.QKK != 0 || ft.Name == "MXFP4_MOE" {
			return kernels.Q8_0
		}
		if t != kernels.Q8_0 {
			return kernels.Q6_K
		}
	case ft.Name == "MXFP4_MOE":
		if role.Spec().Experts {
			return kernels.MXFP4
		}
		return kernels.Q8_0
	case p.Experts == 8 && (role == AttnV || role == AttnK):
		// For the 8-expert model, bumping these to Q8_0 trades little
		// (llama-quantize).
		return kernels.Q8_0
	case role == AttnV && iq4 && p.GQA >= 4:
		return kernels.Q5_K
	case role == AttnV:
		switch {
		case is("Q2_K"):
			if p.GQA >= 4 {
				return kernels.Q4_K
			}
			return kernels.Q3_K
		case is("Q3_K_M"):
			if layer < 2 {
				return kernels.Q5_K
			}
			return kernels.Q4_K
		case is("Q3_K_L"):
			return kernels.Q5_K
		case is("Q4_K_M", "Q5_K_M") && moreBits():
			return kernels.Q6_K
		case is("Q4_K_S") && layer < 4:
			return kernels.Q5_K
		}
	case role == FFNDown || role == FFNDownExps:
		switch {
		case is("Q2_K"):
			return kernels.Q3_K
		case is("Q3_K_M"):
			if layer < n/16 {
				return kernels.Q5_K
			}
			return kernels.Q4_K
		case is("Q3_K_L"):
			return kernels.Q5_K
		case is("Q4_K_M") && moreBits():
			return kernels.Q6_K
		case is("Q5_K_M") && moreBits():
			return kernels.Q6_K
		case is("Q4_K_S") && layer < n/8:
			return kernels.Q5_K
		case iq4 && layer < n/8: // without an importance matrix
			return kernels.Q5_K
		}
	case role == AttnOut && p.Experts == 8:
		if is("Q2_K", "Q3_K_S", "Q3_K_M", "IQ4_NL", "Q4_K_S", "Q4_K_M", "IQ4_XS") {
			return kernels.Q5_K
		}
	case role == AttnQKV:
		switch {
		case is("Q3_K_M", "Q3_K_L"):
			return kernels.Q4_K
		case is("Q4_K_M"):
			return kernels.Q5_K
		case is("Q5_K_M"):
			return kernels.Q6_K
		}
	case role == AttnOut:
		switch {
		case is("Q2_K"):
			return kernels.Q3_K
		case is("Q3_K_M"):
			return kernels.Q4_K
		case is("Q3_K_L"):
			return kernels.Q5_K
		}
	}
	return t
}
