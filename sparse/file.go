package sparse

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"sync"

	"github.com/ruvllm/ruvllm/kernels"
	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/models/gguf"
)

// Metadata keys of a sparsified file.
const (
	// KeySparsity (float32) is the sparsity the file was calibrated for,
	// the level it runs at unless told otherwise.
	KeySparsity = "ruvllm.sparsity"
	// KeyAllocation (string) says how the levels were shared between the
	// matrices: "uniform" (each zeroes the level's fraction of its inputs).
	KeyAllocation = "ruvllm.sparsity.allocation"
	// KeyTokens (uint32) is the number of calibration tokens.
	KeyTokens = "ruvllm.sparsity.calibration_tokens"
)

// Info is what a sparsified file says about its calibration.
type Info struct {
	Sparsity   float64
	Allocation string
	Tokens     int
}

// ReadInfo reads a sparsified file's calibration; ok is false for a file
// that is not sparsified.
func ReadInfo(f *gguf.File) (info Info, ok bool) {
	s, ok := f.GetFloat(KeySparsity)
	if !ok {
		return Info{}, false
	}
	info.Sparsity = math.Round(s*1e6) / 1e6 // stored as float32
	info.Allocation, _ = f.GetString(KeyAllocation)
	if n, ok := f.GetUint(KeyTokens); ok {
		info.Tokens = int(n)
	}
	return info, true
}

// Write writes the model of f (described by cfg) to path (atomically)
// with each matrix that tables has a table for (by its GGUF name,
// "blk.3.ffn_down.weight") stored input-channel-major under its sparse name
// and its thresholds beside it; every other tensor is copied, and the
// metadata gets info. It returns the matrices it left row-major because
// their format or shape has no channel-major layout. threads ≤ 0 means
// all cores.
func Write(f *gguf.File, cfg *models.Config, tables map[string]Table, info Info, path string, threads int) (kept []string, err error) {
	if err := models.NotSparsified(f); err != nil {
		return nil, err
	}
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	w := gguf.NewWriter()
	w.CopyKV(f)
	for _, kv := range []struct {
		k string
		v any
	}{{KeySparsity, float32(info.Sparsity)}, {KeyAllocation, info.Allocation}, {KeyTokens, uint32(info.Tokens)}} {
		if err := w.Set(kv.k, kv.v); err != nil {
			return nil, err
		}
	}
	arch := cfg.Architecture()
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		src := f.TensorData(ti)
		tab, ok := tables[ti.Name]
		r, layer, named := models.ParseTensorName(ti.Name)
		if !ok || !named || !arch.Sparsifiable(r) || len(ti.Dims) != 2 {
			if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, src); err != nil {
				return nil, err
			}
			continue
		}
		rows, cols := int(ti.Dims[1]), int(ti.Dims[0])
		if Supported(ti.Type, rows, cols) != nil {
			kept = append(kept, ti.Name)
			if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, src); err != nil {
				return nil, err
			}
			continue
		}
		if err := tab.check(); err != nil {
			return nil, fmt.Errorf("%s: %w", ti.Name, err)
		}
		t := ti.Type
		encode := func(out io.Writer) error {
			dst := make([]byte, len(src))
			encodeParallel(t, rows, cols, src, dst, threads)
			_, err := out.Write(dst)
			return err
		}
		if err := w.AddTensorFunc(models.SparseName(r, layer, models.ChannelMajorSuffix), t, ti.Dims, encode, uint64(len(src))); err != nil {
			return nil, err
		}
		th := make([]byte, 4*len(tab))
		for k, v := range tab {
			le.PutUint32(th[4*k:], math.Float32bits(v))
		}
		if err := w.AddTensor(models.SparseName(r, layer, models.ThresholdsSuffix), kernels.F32, []uint64{uint64(len(tab))}, th); err != nil {
			return nil, err
		}
	}
	return kept, w.WriteFile(path)
}

// encodeParallel is Encode with the blocks (columns, for the float
// formats) split between threads goroutines.
func encodeParallel(t kernels.DType, rows, cols int, src, dst []byte, threads int) {
	unit := kernels.QK // columns per piece: a block
	if t == kernels.F32 || t == kernels.F16 {
		unit = 1
	}
	pieces := cols / unit
	per := (pieces + threads - 1) / threads
	var wg sync.WaitGroup
	for p0 := 0; p0 < pieces; p0 += per {
		p1 := min(p0+per, pieces)
		wg.Add(1)
		go func() {
			defer wg.Done()
			encodeColumns(t, rows, cols, src, dst, p0*unit, p1*unit)
		}()
	}
	wg.Wait()
}
