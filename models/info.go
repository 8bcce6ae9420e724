package models

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strings"
	"time"

	"github.com/ruvllm/ruvllm/kernels"
	"github.com/ruvllm/ruvllm/models/gguf"
)

// Info is what a model file says of itself, for listings such as ollama's
// /api/tags and /api/show: its architecture, size, quantization and
// metadata.
type Info struct {
	// Arch is general.architecture ("llama", "qwen2", ...).
	Arch string
	// Parameters counts the weights: general.parameter_count when the
	// file gives it, else the elements of its tensors.
	Parameters uint64
	// FileType names the quantization ("Q4_K_M", "F16"): general.file_type
	// as llama.cpp names it, else the type most of the file's bytes have.
	FileType string
	// Size is the file's size in bytes; Modified its modification time.
	Size     int64
	Modified time.Time
	// Digest is the hex SHA-256 of the file's GGUF header (its metadata
	// and tensor table): it tells versions of a file apart without
	// reading its weights, which a hash of the whole file would.
	Digest string
	// ContextLength is the trained context; EmbeddingLength the model's
	// width.
	ContextLength, EmbeddingLength int
	// Embedding reports an embedding model: its file gives a pooling type.
	Embedding bool
	// Metadata are the file's key-value pairs, in file order; Tensors its
	// tensors. Both refer to the open file's parsed header.
	Metadata []gguf.KV
	Tensors  []gguf.TensorInfo
}

// llamaFileTypes are llama.cpp's names of general.file_type.
var llamaFileTypes = map[uint64]string{
	0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K",
	11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K",
	19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS", 23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL", 26: "IQ3_S",
	27: "IQ3_M", 28: "IQ2_S", 29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16", 36: "TQ1_0", 37: "TQ2_0", 38: "MXFP4_MOE",
}

// Info describes the model's file; the file must be open.
func (m *Model) Info() (Info, error) {
	f := m.File
	in := Info{Metadata: f.KV, Tensors: f.Tensors}
	in.Arch, _ = f.GetString("general.architecture")
	if st, err := os.Stat(m.Path); err == nil {
		in.Size, in.Modified = st.Size(), st.ModTime()
	} else {
		return Info{}, err
	}
	if b := f.Bytes(); f.DataOffset <= uint64(len(b)) {
		sum := sha256.Sum256(b[:f.DataOffset])
		in.Digest = hex.EncodeToString(sum[:])
	}
	var elems uint64
	bytesByType := map[kernels.DType]uint64{}
	for _, t := range f.Tensors {
		n := uint64(1)
		for _, d := range t.Dims {
			n *= d
		}
		elems += n
		if len(t.Dims) >= 2 {
			bytesByType[t.Type] += t.Size
		}
	}
	in.Parameters = elems
	if n, ok := f.GetUint("general.parameter_count"); ok && n > 0 {
		in.Parameters = n
	}
	if n, ok := f.GetUint("general.file_type"); ok {
		in.FileType = llamaFileTypes[n]
	}
	if in.FileType == "" {
		var most uint64
		for t, n := range bytesByType {
			if n > most || (n == most && t.String() < in.FileType) {
				most, in.FileType = n, t.String()
			}
		}
	}
	if m.Config != nil {
		in.ContextLength, in.EmbeddingLength = m.Config.ContextLength, m.Config.Dim
	}
	for _, kv := range f.KV {
		if strings.HasSuffix(kv.Key, ".pooling_type") {
			in.Embedding = true
		}
	}
	return in, nil
}
