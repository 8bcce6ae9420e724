package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/ruvllm/ruvllm/kernels"
)

// Writer builds a GGUF v3 file: metadata in the order set, then tensor infos,
// then the aligned tensor data. Tensor data is produced when the file is
// written, so a converter need not hold a whole model in memory.
type Writer struct {
	kv        []KV
	kvIndex   map[string]int
	tensors   []pendingTensor
	names     map[string]bool
	alignment uint64
}

type pendingTensor struct {
	info  TensorInfo
	write func(io.Writer) error
}

// NewWriter returns an empty writer with the default alignment.
func NewWriter() *Writer {
	return &Writer{kvIndex: map[string]int{}, names: map[string]bool{}, alignment: DefaultAlignment}
}

// Set sets a metadata value (see ValueOf for the Go types accepted); setting a
// key again replaces its value in place. general.alignment also sets the
// alignment used for tensor data.
func (w *Writer) Set(key string, x any) error {
	v, err := ValueOf(x)
	if err != nil {
		return fmt.Errorf("gguf: %s: %w", key, err)
	}
	if key == "general.alignment" {
		a, ok := v.Uint()
		if !ok || a == 0 || a&(a-1) != 0 {
			return fmt.Errorf("gguf: general.alignment must be a power of two, got %v", x)
		}
		w.alignment = a
	}
	if i, ok := w.kvIndex[key]; ok {
		w.kv[i].Value = v
		return nil
	}
	w.kvIndex[key] = len(w.kv)
	w.kv = append(w.kv, KV{Key: key, Value: v})
	return nil
}

// CopyKV sets every metadata entry of f, in order.
func (w *Writer) CopyKV(f *File) {
	for _, kv := range f.KV {
		w.Set(kv.Key, kv.Value) //nolint:errcheck // values read from a file are valid
	}
}

// AddTensor adds a tensor whose encoded bytes are data; dims are ggml's ne
// (dims[0] is the row length).
func (w *Writer) AddTensor(name string, t kernels.DType, dims []uint64, data []byte) error {
	return w.AddTensorFunc(name, t, dims, func(out io.Writer) error {
		_, err := out.Write(data)
		return err
	}, uint64(len(data)))
}

// AddTensorFunc adds a tensor whose size bytes are written by write when the
// file is written.
func (w *Writer) AddTensorFunc(name string, t kernels.DType, dims []uint64, write func(io.Writer) error, size uint64) error {
	if w.names[name] {
		return fmt.Errorf("gguf: duplicate tensor %q", name)
	}
	if !t.Known() {
		return fmt.Errorf("gguf: tensor %s: unknown type %d", name, uint32(t))
	}
	if len(dims) == 0 || len(dims) > MaxDims {
		return fmt.Errorf("gguf: tensor %s: %d dimensions", name, len(dims))
	}
	n := uint64(1)
	for _, d := range dims {
		n *= d
	}
	if dims[0]%uint64(t.BlockSize()) != 0 {
		return fmt.Errorf("gguf: tensor %s: row length %d is not a multiple of the %v block size %d", name, dims[0], t, t.BlockSize())
	}
	if want := n / uint64(t.BlockSize()) * uint64(t.BlockBytes()); want != size {
		return fmt.Errorf("gguf: tensor %s: %d bytes given, %v %v needs %d", name, size, t, dims, want)
	}
	w.names[name] = true
	w.tensors = append(w.tensors, pendingTensor{
		info:  TensorInfo{Name: name, Type: t, Dims: append([]uint64(nil), dims...), Size: size},
		write: write,
	})
	return nil
}

// WriteTo writes the file to out.
func (w *Writer) WriteTo(out io.Writer) (int64, error) {
	cw := &countingWriter{w: bufio.NewWriterSize(out, 1<<20)}
	e := encoder{cw}
	e.u32(Magic)
	e.u32(3)
	e.u64(uint64(len(w.tensors)))
	e.u64(uint64(len(w.kv)))
	for _, kv := range w.kv {
		e.str(kv.Key)
		e.u32(uint32(kv.Value.Type))
		e.value(kv.Value)
	}
	var off uint64
	for i := range w.tensors {
		t := &w.tensors[i].info
		t.Offset = off
		off = alignUp(off+t.Size, w.alignment)
		e.str(t.Name)
		e.u32(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			e.u64(d)
		}
		e.u32(uint32(t.Type))
		e.u64(t.Offset)
	}
	if len(w.tensors) > 0 {
		cw.pad(w.alignment) // llama.cpp pads only when there is data to follow
	}
	for _, t := range w.tensors {
		before := cw.n
		if cw.err == nil {
			if err := t.write(cw); err != nil && cw.err == nil {
				cw.err = fmt.Errorf("gguf: writing tensor %s: %w", t.info.Name, err)
			}
		}
		if cw.err == nil && uint64(cw.n-before) != t.info.Size {
			cw.err = fmt.Errorf("gguf: tensor %s: wrote %d bytes, declared %d", t.info.Name, cw.n-before, t.info.Size)
		}
		cw.pad(w.alignment)
	}
	if cw.err == nil {
		cw.err = cw.w.(*bufio.Writer).Flush()
	}
	return cw.n, cw.err
}

// WriteFile writes the file to path atomically: to a temporary file in the
// same directory, synced, then renamed, so a crash never leaves half a model.
func (w *Writer) WriteFile(path string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	// CreateTemp makes the file private; a model file is as readable as any
	// other file the user writes.
	err = tmp.Chmod(0o644)
	if err == nil {
		_, err = w.WriteTo(tmp)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

type countingWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
	return n, err
}

func (c *countingWriter) pad(a uint64) {
	if r := uint64(c.n) % a; r != 0 {
		c.Write(make([]byte, a-r))
	}
}

type encoder struct{ w *countingWriter }

func (e encoder) u8(x uint8) { e.w.Write([]byte{x}) }
func (e encoder) u16(x uint16) {
	var b [2]byte
	binary.LittleEndian.PutUint16(b[:], x)
	e.w.Write(b[:])
}
func (e encoder) u32(x uint32) {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], x)
	e.w.Write(b[:])
}
func (e encoder) u64(x uint64) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], x)
	e.w.Write(b[:])
}
func (e encoder) str(s string) {
	e.u64(uint64(len(s)))
	io.WriteString(e.w, s)
}

func (e encoder) value(v Value) {
	switch x := v.v.(type) {
	case uint8:
		e.u8(x)
	case int8:
		e.u8(uint8(x))
	case bool:
		if x {
			e.u8(1)
		} else {
			e.u8(0)
		}
	case uint16:
		e.u16(x)
	case int16:
		e.u16(uint16(x))
	case uint32:
		e.u32(x)
	case int32:
		e.u32(uint32(x))
	case float32:
		e.u32(math.Float32bits(x))
	case uint64:
		e.u64(x)
	case int64:
		e.u64(uint64(x))
	case float64:
		e.u64(math.Float64bits(x))
	case string:
		e.str(x)
	default:
		e.array(v)
	}
}

func (e encoder) array(v Value) {
	e.u32(uint32(v.Elem))
	e.u64(uint64(v.Len()))
	switch x := v.v.(type) {
	case []uint8:
		e.w.Write(x)
	case []int8:
		for _, y := range x {
			e.u8(uint8(y))
		}
	case []bool:
		for _, y := range x {
			e.value(Value{v: y})
		}
	case []uint16:
		for _, y := range x {
			e.u16(y)
		}
	case []int16:
		for _, y := range x {
			e.u16(uint16(y))
		}
	case []uint32:
		for _, y := range x {
			e.u32(y)
		}
	case []int32:
		for _, y := range x {
			e.u32(uint32(y))
		}
	case []float32:
		for _, y := range x {
			e.u32(math.Float32bits(y))
		}
	case []uint64:
		for _, y := range x {
			e.u64(y)
		}
	case []int64:
		for _, y := range x {
			e.u64(uint64(y))
		}
	case []float64:
		for _, y := range x {
			e.u64(math.Float64bits(y))
		}
	case []string:
		for _, y := range x {
			e.str(y)
		}
	case []Value:
		for _, y := range x {
			e.array(y)
		}
	}
}
