package lora

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/ruvllm/ruvllm/kernels"
	"github.com/ruvllm/ruvllm/models/gguf"
)

// The llama.cpp GGUF LoRA format (convert_lora_to_gguf.py, llama-adapter.cpp):
// general.type "adapter", adapter.type "lora", adapter.lora.alpha a float32,
// and for each updated weight W (ne {in, out}) two tensors named after it,
// "W.lora_a" with ne {in, rank} — PEFT's A (rank, in) as it is — and
// "W.lora_b" with ne {rank, out} — PEFT's B (out, rank). The scale is
// alpha/rank, rank being lora_b's ne[0], and 1 when alpha is 0.

// GGUF metadata keys of a LoRA adapter file.
const (
	keyGeneralType = "general.type"
	keyAdapterType = "adapter.type"
	keyLoRAAlpha   = "adapter.lora.alpha"
	keyALoRATokens = "adapter.alora.invocation_tokens"
	// The online training state of a MicroLoRA (Adapter.Training), which
	// other readers ignore.
	keyMicroVersion  = "ruvllm.micro_lora.version"
	keyMicroFeedback = "ruvllm.micro_lora.feedback"
	keyMicroUpdates  = "ruvllm.micro_lora.updates"
	keyMicroLoss     = "ruvllm.micro_lora.loss"
	// The trainer's state (Training.State): prefixes of its arrays' and
	// scalars' keys.
	keyMicroState  = "ruvllm.micro_lora.state."
	keyMicroScalar = "ruvllm.micro_lora.scalar."
)

// Suffixes of the two tensors of an update in a GGUF LoRA file.
const (
	suffixA = ".lora_a"
	suffixB = ".lora_b"
)

// ReadGGUF reads a llama.cpp GGUF LoRA adapter from an open file. The
// matrices are copied (as float32), so f may be closed afterwards.
func ReadGGUF(f *gguf.File) (*Adapter, error) {
	if t, _ := f.GetString(keyGeneralType); t != "adapter" {
		return nil, invalidf("GGUF file: %s is %q, not \"adapter\" (is this a model rather than a LoRA adapter?)", keyGeneralType, t)
	}
	if t, _ := f.GetString(keyAdapterType); t != "lora" {
		return nil, invalidf("GGUF file: %s is %q, not \"lora\"", keyAdapterType, t)
	}
	if _, ok := f.Get(keyALoRATokens); ok {
		return nil, invalidf("GGUF file: activated LoRA (%s) is not supported", keyALoRATokens)
	}
	arch, _ := f.GetString("general.architecture")
	alpha := 0.0
	if v, ok := f.Get(keyLoRAAlpha); ok {
		x, ok := v.Float()
		if !ok || math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, invalidf("GGUF file: %s is not a finite number (%v)", keyLoRAAlpha, v.Any())
		}
		alpha = x
	}
	type pair struct{ a, b *gguf.TensorInfo }
	pairs := map[string]*pair{}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		var base string
		var slot func(p *pair) **gguf.TensorInfo
		switch {
		case strings.HasSuffix(ti.Name, suffixA):
			base, slot = strings.TrimSuffix(ti.Name, suffixA), func(p *pair) **gguf.TensorInfo { return &p.a }
		case strings.HasSuffix(ti.Name, suffixB):
			base, slot = strings.TrimSuffix(ti.Name, suffixB), func(p *pair) **gguf.TensorInfo { return &p.b }
		case strings.HasSuffix(ti.Name, "_norm.weight"):
			continue // llama.cpp ignores norm vectors in adapters too
		default:
			return nil, invalidf("GGUF file: tensor %s is neither %s nor %s", ti.Name, suffixA, suffixB)
		}
		p := pairs[base]
		if p == nil {
			p = &pair{}
			pairs[base] = p
		}
		*slot(p) = ti
	}
	names := make([]string, 0, len(pairs))
	for n := range pairs {
		names = append(names, n)
	}
	sort.Strings(names)
	targets := make([]*Target, 0, len(names))
	for _, name := range names {
		p := pairs[name]
		if p.a == nil || p.b == nil {
			return nil, invalidf("GGUF file: %s has only one of %s and %s", name, suffixA, suffixB)
		}
		if len(p.a.Dims) != 2 || len(p.b.Dims) != 2 {
			return nil, invalidf("GGUF file: %s: %s %v and %s %v must be matrices", name, suffixA, p.a.Dims, suffixB, p.b.Dims)
		}
		in, rank, out := p.a.Dims[0], p.a.Dims[1], p.b.Dims[1]
		if p.b.Dims[0] != rank {
			return nil, invalidf("GGUF file: %s: rank mismatch: %s has ne %v (in, rank), %s ne %v (rank, out)", name, suffixA, p.a.Dims, suffixB, p.b.Dims)
		}
		if in == 0 || rank == 0 || out == 0 || in > math.MaxInt32 || out > math.MaxInt32 || rank > 1<<16 {
			return nil, invalidf("GGUF file: %s: dims in %d, rank %d, out %d are out of range", name, in, rank, out)
		}
		a, err := tensorF32(f, p.a)
		if err != nil {
			return nil, err
		}
		b, err := tensorF32(f, p.b)
		if err != nil {
			return nil, err
		}
		scale := float32(1)
		if alpha != 0 {
			scale = scaleOf(alpha, int(rank), false)
		}
		t, err := NewTarget(name, int(in), int(out), int(rank), a, b, scale)
		if err != nil {
			return nil, err
		}
		targets = append(targets, t)
	}
	ad, err := New("", arch, float32(alpha), false, FormatGGUF, targets)
	if err != nil {
		return nil, err
	}
	ad.Name, _ = f.GetString("general.name")
	if v, ok := f.Get(keyMicroVersion); ok {
		tr := &Training{}
		tr.Version, _ = v.Int()
		if v, ok := f.Get(keyMicroFeedback); ok {
			tr.Feedback, _ = v.Int()
		}
		if v, ok := f.Get(keyMicroUpdates); ok {
			tr.Updates, _ = v.Int()
		}
		if v, ok := f.Get(keyMicroLoss); ok {
			tr.Loss, _ = v.Float()
		}
		st, err := readTrainState(f)
		if err != nil {
			return nil, err
		}
		tr.State = st
		ad.Training = tr
	}
	return ad, nil
}

// readTrainState reads a MicroLoRA's trainer state from f's metadata; nil
// when it has none.
func readTrainState(f *gguf.File) (*TrainState, error) {
	var st *TrainState
	state := func() *TrainState {
		if st == nil {
			st = &TrainState{Arrays: map[string][]float32{}, Scalars: map[string]float64{}}
		}
		return st
	}
	for _, kv := range f.KV {
		switch {
		case strings.HasPrefix(kv.Key, keyMicroState):
			xs, ok := kv.Value.Float32s()
			if !ok {
				return nil, invalidf("GGUF file: %s is not an array of float32", kv.Key)
			}
			for _, x := range xs {
				if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
					return nil, invalidf("GGUF file: %s holds a value that is not finite", kv.Key)
				}
			}
			state().Arrays[strings.TrimPrefix(kv.Key, keyMicroState)] = xs
		case strings.HasPrefix(kv.Key, keyMicroScalar):
			x, ok := kv.Value.Float()
			if !ok || math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, invalidf("GGUF file: %s is not a finite number", kv.Key)
			}
			state().Scalars[strings.TrimPrefix(kv.Key, keyMicroScalar)] = x
		}
	}
	return st, nil
}

// OpenGGUF reads the GGUF LoRA adapter at path.
func OpenGGUF(path string) (*Adapter, error) {
	f, err := gguf.Open(path)
	if errors.Is(err, gguf.ErrFormat) {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadGGUF(f)
}

// tensorF32 dequantizes a whole tensor, row by row.
func tensorF32(f *gguf.File, ti *gguf.TensorInfo) ([]float32, error) {
	tr, ok := kernels.TraitsOf(ti.Type)
	if !ok {
		return nil, invalidf("GGUF file: tensor %s is %v, which cannot be read", ti.Name, ti.Type)
	}
	cols, rows := int(ti.Dims[0]), int(ti.Rows())
	rb := ti.Type.RowBytes(cols)
	data := f.TensorData(ti)
	if rb < 0 || len(data) != rows*rb {
		return nil, invalidf("GGUF file: tensor %s: %d bytes do not hold %d rows of %d %v elements", ti.Name, len(data), rows, cols, ti.Type)
	}
	out := make([]float32, rows*cols)
	for r := range rows {
		tr.DequantizeRow(data[r*rb:(r+1)*rb], out[r*cols:(r+1)*cols])
	}
	for _, x := range out {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return nil, invalidf("GGUF file: tensor %s holds a value that is not finite", ti.Name)
		}
	}
	return out, nil
}

// WriteGGUF writes a as a llama.cpp GGUF LoRA file with matrices of type t
// (F32, F16 or BF16). The file carries one alpha, adapter.lora.alpha =
// a.Alpha, and llama.cpp applies alpha/rank (1 when alpha is 0); an update
// whose Scale differs from that (rank-stabilised LoRA, PEFT's alpha_pattern)
// has the ratio folded into its B, so the file applies exactly the same
// update in any reader.
func (a *Adapter) WriteGGUF(path string, t kernels.DType) error {
	if t != kernels.F32 && t != kernels.F16 && t != kernels.BF16 {
		return fmt.Errorf("lora: cannot write a GGUF adapter as %v (F32, F16 or BF16)", t)
	}
	if a.Arch == "" {
		return fmt.Errorf("lora: the adapter's architecture is unknown; GGUF adapters must name it")
	}
	tr, _ := kernels.TraitsOf(t)
	w := gguf.NewWriter()
	for _, kv := range []struct {
		k string
		v any
	}{
		{"general.architecture", a.Arch},
		{keyGeneralType, "adapter"},
		{keyAdapterType, "lora"},
		{keyLoRAAlpha, a.Alpha},
		{"general.name", a.Name},
	} {
		if err := w.Set(kv.k, kv.v); err != nil {
			return err
		}
	}
	if tr := a.Training; tr != nil {
		for _, kv := range []struct {
			k string
			v any
		}{
			{keyMicroVersion, tr.Version}, {keyMicroFeedback, tr.Feedback}, {keyMicroUpdates, tr.Updates}, {keyMicroLoss, float32(tr.Loss)},
		} {
			if err := w.Set(kv.k, kv.v); err != nil {
				return err
			}
		}
		if st := tr.State; st != nil {
			for _, k := range sortedKeys(st.Arrays) {
				if err := w.Set(keyMicroState+k, st.Arrays[k]); err != nil {
					return err
				}
			}
			for _, k := range sortedKeys(st.Scalars) {
				if err := w.Set(keyMicroScalar+k, st.Scalars[k]); err != nil {
					return err
				}
			}
		}
	}
	encode := func(xs []float32) []byte {
		b := make([]byte, t.RowBytes(len(xs)))
		tr.QuantizeRow(xs, b)
		return b
	}
	for _, tg := range a.Targets() {
		written := float32(1)
		if a.Alpha != 0 {
			written = scaleOf(float64(a.Alpha), tg.Rank, false)
		}
		b := tg.B()
		if f := tg.Scale / written; f != 1 {
			for i := range b {
				b[i] *= f
			}
		}
		if err := w.AddTensor(tg.Name+suffixA, t, []uint64{uint64(tg.In), uint64(tg.Rank)}, encode(tg.A)); err != nil {
			return err
		}
		if err := w.AddTensor(tg.Name+suffixB, t, []uint64{uint64(tg.Rank), uint64(tg.Out)}, encode(b)); err != nil {
			return err
		}
	}
	return w.WriteFile(path)
}

// sortedKeys lists m's keys in order, so that a file's metadata does not
// depend on map order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
