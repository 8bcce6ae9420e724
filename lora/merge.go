package lora

import (
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/ruvllm/ruvllm/kernels"
	"github.com/ruvllm/ruvllm/models"
	"github.com/ruvllm/ruvllm/models/gguf"
)

// MergeOptions configure Merge; the zero value keeps every format and
// applies the adapter as trained.
type MergeOptions struct {
	// Type is the format of the updated weights ("F32", "F16", "Q8_0", ...);
	// "" keeps each weight's own format, re-quantizing quantized weights.
	// Weights the adapter does not update are copied unchanged.
	Type string
	// Scale multiplies every update, as a request's lora_scale does; 0
	// means 1.
	Scale float32
	// Threads converting rows; 0 means all cores.
	Threads int
}

// Merge writes the base model with the adapter's updates added into its
// weights, W' = W + scale·s·B·A, to path (atomically). Each updated weight
// is dequantized row by row to float32, the update added, and the row
// quantized again to the chosen format.
func Merge(base *gguf.File, a *Adapter, path string, o MergeOptions) error {
	cfg, err := models.ReadConfig(base)
	if err != nil {
		return err
	}
	if err := models.NotSparsified(base); err != nil {
		return fmt.Errorf("lora: %w", err)
	}
	if err := a.Validate(cfg, base); err != nil {
		return err
	}
	var outType kernels.DType
	if o.Type != "" {
		t, ok := kernels.ParseDType(o.Type)
		if !ok {
			return fmt.Errorf("lora: unknown tensor type %q", o.Type)
		}
		if _, ok := kernels.TraitsOf(t); !ok {
			return fmt.Errorf("lora: cannot write tensors as %v", t)
		}
		outType = t
	}
	scale := o.Scale
	if scale == 0 {
		scale = 1
	}
	threads := o.Threads
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	w := gguf.NewWriter()
	w.CopyKV(base)
	for i := range base.Tensors {
		ti := &base.Tensors[i]
		src := base.TensorData(ti)
		t, ok := a.Target(ti.Name)
		if !ok {
			if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, src); err != nil {
				return err
			}
			continue
		}
		to := ti.Type
		if o.Type != "" {
			to = outType
		}
		from, ok := kernels.TraitsOf(ti.Type)
		if !ok {
			return fmt.Errorf("lora: %s: cannot read format %v", ti.Name, ti.Type)
		}
		toTr, ok := kernels.TraitsOf(to)
		if !ok {
			return fmt.Errorf("lora: %s: cannot write format %v", ti.Name, to)
		}
		inRow, outRow := ti.Type.RowBytes(t.In), to.RowBytes(t.In)
		if outRow < 0 {
			return fmt.Errorf("lora: %s: rows of %d cannot be stored as %v (blocks of %d)", ti.Name, t.In, to, to.BlockSize())
		}
		if inRow < 0 || len(src) != t.Out*inRow {
			return fmt.Errorf("lora: %s: %d bytes do not hold %d rows of %d %v elements", ti.Name, len(src), t.Out, t.In, ti.Type)
		}
		m := merger{t: t, s: t.Scale * scale, src: src, inRow: inRow, outRow: outRow, from: from, to: toTr, threads: threads}
		if err := w.AddTensorFunc(ti.Name, to, ti.Dims, m.write, uint64(t.Out*outRow)); err != nil {
			return err
		}
	}
	return w.WriteFile(path)
}

// merger produces the rows of one updated weight when the file is written,
// so that only one merged weight is in memory at a time.
type merger struct {
	t             *Target
	s             float32 // the update's whole factor
	src           []byte  // (out, in) in the base format
	inRow, outRow int     // bytes of a row in the base and output formats
	from, to      *kernels.Traits
	threads       int
}

func (m *merger) write(out io.Writer) error {
	t := m.t
	data := make([]byte, t.Out*m.outRow)
	per := (t.Out + m.threads - 1) / m.threads
	var wg sync.WaitGroup
	for start := 0; start < t.Out; start += per {
		end := min(start+per, t.Out)
		wg.Add(1)
		go func() {
			defer wg.Done()
			row := make([]float32, t.In)
			for o := start; o < end; o++ {
				m.from.DequantizeRow(m.src[o*m.inRow:(o+1)*m.inRow], row)
				// W[o,:] += s·Σ_k B[o,k]·A[k,:]
				for k := range t.Rank {
					kernels.Axpy(m.s*t.bt[k*t.Out+o], t.A[k*t.In:(k+1)*t.In], row)
				}
				m.to.QuantizeRow(row, data[o*m.outRow:(o+1)*m.outRow])
			}
		}()
	}
	wg.Wait()
	_, err := out.Write(data)
	return err
}
