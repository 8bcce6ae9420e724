package models

import (
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/ruvllm/ruvllm/kernels"
	"github.com/ruvllm/ruvllm/models/gguf"
)

// QuantizeFile writes the model in f to path with its weight matrices
// converted as plan says; metadata is copied and general.file_type updated.
// Rows are converted through float32, so any format we can read can be the
// source. threads <= 0 means all cores.
func QuantizeFile(f *gguf.File, path string, plan QuantPlan, threads int) error {
	if err := NotSparsified(f); err != nil {
		return err
	}
	w := gguf.NewWriter()
	w.CopyKV(f)
	w.Set("general.file_type", plan.Type.llama)      //nolint:errcheck
	w.Set("general.quantization_version", uint32(2)) //nolint:errcheck
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		target := ti.Type
		if Quantized(ti.Name, ti.Dims) {
			target = plan.TensorType(ti.Name, int(ti.Dims[0]))
		}
		src := f.TensorData(ti)
		if target == ti.Type {
			if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, src); err != nil {
				return err
			}
			continue
		}
		from, ok := kernels.TraitsOf(ti.Type)
		if !ok {
			return fmt.Errorf("tensor %s: cannot read format %v", ti.Name, ti.Type)
		}
		to, ok := kernels.TraitsOf(target)
		if !ok {
			return fmt.Errorf("tensor %s: cannot write format %v", ti.Name, target)
		}
		cols, rows := int(ti.Dims[0]), int(ti.Rows())
		inRow, outRow := ti.Type.RowBytes(cols), target.RowBytes(cols)
		fill := func(_, row int, buf []float32, dst []byte) {
			from.DequantizeRow(src[row*inRow:(row+1)*inRow], buf)
			to.QuantizeRow(buf, dst)
		}
		if err := AddRows(w, ti.Name, target, ti.Dims, rows, cols, outRow, threads, fill); err != nil {
			return err
		}
	}
	return w.WriteFile(path)
}

// AddRows adds to w a tensor of type t whose rows (rowBytes each) fill
// writes into dst when the file is written, spread over threads goroutines
// (≤ 0: all cores); buf is a row of cols floats of the calling goroutine,
// worker its index, for a fill that needs more scratch of its own. Files
// that models, sparse and the converters write are made this way.
func AddRows(w *gguf.Writer, name string, t kernels.DType, dims []uint64, rows, cols, rowBytes, threads int, fill func(worker, row int, buf []float32, dst []byte)) error {
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	write := func(out io.Writer) error {
		data := make([]byte, rows*rowBytes)
		var wg sync.WaitGroup
		per := (rows + threads - 1) / threads
		for worker, start := 0, 0; start < rows; worker, start = worker+1, start+per {
			end := min(start+per, rows)
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]float32, cols)
				for r := start; r < end; r++ {
					fill(worker, r, buf, data[r*rowBytes:(r+1)*rowBytes])
				}
			}()
		}
		wg.Wait()
		_, err := out.Write(data)
		return err
	}
	return w.AddTensorFunc(name, t, dims, write, uint64(rows*rowBytes))
}
