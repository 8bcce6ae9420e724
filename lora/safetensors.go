package lora

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"sort"

	"github.com/ruvllm/ruvllm/kernels"
)

// The safetensors format: an 8-byte little-endian header length N, N bytes
// of JSON mapping each tensor name to {"dtype", "shape", "data_offsets":
// [begin, end]} (plus an optional "__metadata__" map of strings), then the
// raw little-endian tensor bytes, offsets counted from the end of the header.

// maxSafetensorsHeader bounds the JSON header, as the reference
// implementation does, so a hostile length cannot make us allocate.
const maxSafetensorsHeader = 100 << 20

// maxSafetensorsDims bounds the rank of a tensor; adapters hold matrices.
const maxSafetensorsDims = 8

// ErrSafetensors is wrapped by every error about the content of a
// safetensors file.
var ErrSafetensors = errors.New("safetensors: invalid file")

// Safetensors is a parsed safetensors file. Its tensor views refer to the
// bytes it was parsed from.
type Safetensors struct {
	// Metadata is the file's "__metadata__" map; nil when absent.
	Metadata map[string]string
	// Tensors are in the order of their data in the file.
	Tensors []SafeTensor
	index   map[string]int
}

// SafeTensor is one tensor of a safetensors file.
type SafeTensor struct {
	Name string
	// DType is the element type: "F32", "F16" or "BF16", the only ones an
	// adapter holds and the only ones the reader accepts.
	DType string
	// Shape lists the dimensions outermost first, as PyTorch does: a
	// (rows, cols) matrix is Shape {rows, cols}.
	Shape []int
	// Data is the little-endian bytes of the elements in row-major order.
	Data []byte
}

// safeDTypeSize is the byte size of each element type we read.
var safeDTypeSize = map[string]int{"F32": 4, "F16": 2, "BF16": 2}

// safeDTypeAll lists every type the format defines, to tell an unsupported
// type from a misspelt one.
var safeDTypeAll = map[string]bool{
	"BOOL": true, "U8": true, "I8": true, "F8_E5M2": true, "F8_E4M3": true, "I16": true, "U16": true,
	"F16": true, "BF16": true, "I32": true, "U32": true, "F32": true, "F64": true, "I64": true, "U64": true,
}

// Tensor returns the tensor named name.
func (s *Safetensors) Tensor(name string) (*SafeTensor, bool) {
	i, ok := s.index[name]
	if !ok {
		return nil, false
	}
	return &s.Tensors[i], true
}

// Elements is the number of elements of t.
func (t *SafeTensor) Elements() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Float32s decodes the elements of t into a new slice.
func (t *SafeTensor) Float32s() []float32 {
	n := len(t.Data) / safeDTypeSize[t.DType]
	out := make([]float32, n)
	le := binary.LittleEndian
	switch t.DType {
	case "F32":
		for i := range out {
			out[i] = math.Float32frombits(le.Uint32(t.Data[4*i:]))
		}
	case "F16":
		for i := range out {
			out[i] = kernels.FP16ToFP32(le.Uint16(t.Data[2*i:]))
		}
	case "BF16":
		for i := range out {
			out[i] = kernels.BF16ToFP32(le.Uint16(t.Data[2*i:]))
		}
	}
	return out
}

// safeEntry is a tensor's entry in the JSON header.
type safeEntry struct {
	DType       string   `json:"dtype"`
	Shape       []int64  `json:"shape"`
	DataOffsets []uint64 `json:"data_offsets"`
}

// ParseSafetensors parses a whole safetensors file held in memory. It
// checks the header length, the JSON, every dtype and shape against its
// byte range, that the ranges neither overlap nor leave gaps, and that they
// cover the data exactly, so that a truncated or padded file is an error.
func ParseSafetensors(data []byte) (*Safetensors, error) {
	if len(data) < 8 {
		return nil, fmt.Errorf("%w: %d bytes is too short for the 8-byte header length (truncated?)", ErrSafetensors, len(data))
	}
	n := binary.LittleEndian.Uint64(data)
	if n > maxSafetensorsHeader {
		return nil, fmt.Errorf("%w: header length %d is over the %d-byte limit (not a safetensors file?)", ErrSafetensors, n, maxSafetensorsHeader)
	}
	if n > uint64(len(data)-8) {
		return nil, fmt.Errorf("%w: header of %d bytes but only %d bytes follow (truncated?)", ErrSafetensors, n, len(data)-8)
	}
	header, body := data[8:8+n], data[8+n:]
	if len(header) == 0 || header[0] != '{' {
		return nil, fmt.Errorf("%w: header does not start with a JSON object", ErrSafetensors)
	}
	s := &Safetensors{index: map[string]int{}}
	entries, err := s.parseHeader(header)
	if err != nil {
		return nil, err
	}
	order := make([]int, len(s.Tensors))
	for i := range order {
		order[i] = i
	}
	// Ranges are checked in the order of their start: each must begin where
	// the previous one ended, the first at 0, the last at the end of data.
	// Ties on the start put empty tensors first, so that an empty tensor at
	// the start of another is not taken for an overlap.
	sort.SliceStable(order, func(a, b int) bool {
		x, y := entries[order[a]].DataOffsets, entries[order[b]].DataOffsets
		return x[0] < y[0] || x[0] == y[0] && x[1] < y[1]
	})
	var need uint64
	for _, e := range entries {
		need = max(need, e.DataOffsets[1])
	}
	if need > uint64(len(body)) {
		return nil, fmt.Errorf("%w: the tensors need %d bytes of data but the file has %d after the header (truncated?)", ErrSafetensors, need, len(body))
	}
	var end uint64
	for _, i := range order {
		t, e := &s.Tensors[i], &entries[i]
		begin, stop := e.DataOffsets[0], e.DataOffsets[1]
		switch {
		case begin < end:
			return nil, fmt.Errorf("%w: tensor %q (bytes %d–%d) overlaps the tensor before it, which ends at %d", ErrSafetensors, t.Name, begin, stop, end)
		case begin > end:
			return nil, fmt.Errorf("%w: %d unused bytes before tensor %q at %d", ErrSafetensors, begin-end, t.Name, begin)
		}
		t.Data = body[begin:stop:stop]
		end = stop
	}
	if end != uint64(len(body)) {
		return nil, fmt.Errorf("%w: %d bytes after the last tensor", ErrSafetensors, uint64(len(body))-end)
	}
	sorted := make([]SafeTensor, len(order))
	for k, i := range order {
		sorted[k] = s.Tensors[i]
		s.index[sorted[k].Name] = k
	}
	s.Tensors = sorted
	return s, nil
}

// parseHeader reads the JSON header token by token, so that a duplicate
// name is caught (encoding/json would keep the last silently), and checks
// each entry on its own.
func (s *Safetensors) parseHeader(header []byte) ([]safeEntry, error) {
	dec := json.NewDecoder(bytes.NewReader(header))
	if _, err := dec.Token(); err != nil { // the '{' checked by the caller
		return nil, fmt.Errorf("%w: header: %v", ErrSafetensors, err)
	}
	var entries []safeEntry
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%w: header: %v", ErrSafetensors, err)
		}
		name, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("%w: header: a key is not a string", ErrSafetensors)
		}
		if name == "__metadata__" {
			if s.Metadata != nil {
				return nil, fmt.Errorf("%w: header: __metadata__ appears twice", ErrSafetensors)
			}
			if err := dec.Decode(&s.Metadata); err != nil {
				return nil, fmt.Errorf("%w: header: __metadata__ is not a map of strings: %v", ErrSafetensors, err)
			}
			if s.Metadata == nil {
				s.Metadata = map[string]string{}
			}
			continue
		}
		if _, dup := s.index[name]; dup {
			return nil, fmt.Errorf("%w: tensor %q appears twice", ErrSafetensors, name)
		}
		var e safeEntry
		if err := dec.Decode(&e); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("%w: header: tensor %q: %v", ErrSafetensors, name, err)
		}
		t, err := checkEntry(name, &e)
		if err != nil {
			return nil, err
		}
		s.index[name] = len(s.Tensors)
		s.Tensors = append(s.Tensors, t)
		entries = append(entries, e)
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return nil, fmt.Errorf("%w: header: %v", ErrSafetensors, err)
	}
	if tok, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: header: unexpected %v after the JSON object", ErrSafetensors, tok)
	}
	return entries, nil
}

// checkEntry checks one header entry: a known type, a shape whose size
// matches the byte range.
func checkEntry(name string, e *safeEntry) (SafeTensor, error) {
	t := SafeTensor{Name: name, DType: e.DType}
	size, ok := safeDTypeSize[e.DType]
	if !ok {
		if safeDTypeAll[e.DType] {
			return t, fmt.Errorf("%w: tensor %q has dtype %s; adapters must be F32, F16 or BF16", ErrSafetensors, name, e.DType)
		}
		return t, fmt.Errorf("%w: tensor %q has unknown dtype %q", ErrSafetensors, name, e.DType)
	}
	if len(e.DataOffsets) != 2 || e.DataOffsets[0] > e.DataOffsets[1] {
		return t, fmt.Errorf("%w: tensor %q: data_offsets %v is not a [begin, end] pair", ErrSafetensors, name, e.DataOffsets)
	}
	if len(e.Shape) > maxSafetensorsDims {
		return t, fmt.Errorf("%w: tensor %q has %d dimensions", ErrSafetensors, name, len(e.Shape))
	}
	n := uint64(1)
	t.Shape = make([]int, len(e.Shape))
	for i, d := range e.Shape {
		if d < 0 {
			return t, fmt.Errorf("%w: tensor %q has a negative dimension in %v", ErrSafetensors, name, e.Shape)
		}
		hi, lo := bits.Mul64(n, uint64(d))
		if hi != 0 || lo > math.MaxInt32 {
			return t, fmt.Errorf("%w: tensor %q of shape %v is too large", ErrSafetensors, name, e.Shape)
		}
		n, t.Shape[i] = lo, int(d)
	}
	if got := e.DataOffsets[1] - e.DataOffsets[0]; got != n*uint64(size) {
		return t, fmt.Errorf("%w: tensor %q: %s %v needs %d bytes, data_offsets %v give %d", ErrSafetensors, name, e.DType, e.Shape, n*uint64(size), e.DataOffsets, got)
	}
	return t, nil
}

// WriteSafetensors writes tensors (their Name, DType, Shape and Data) and
// metadata as a safetensors file, data in the order given. The header is
// padded with spaces to a multiple of 8 bytes, as the reference writer does.
func WriteSafetensors(w io.Writer, tensors []SafeTensor, metadata map[string]string) error {
	// The header is built by hand to keep the tensors in the order given;
	// encoding a map would sort them by name.
	var h bytes.Buffer
	h.WriteByte('{')
	if metadata != nil {
		m, err := json.Marshal(metadata)
		if err != nil {
			return err
		}
		h.WriteString(`"__metadata__":`)
		h.Write(m)
	}
	var off uint64
	for i, t := range tensors {
		size, ok := safeDTypeSize[t.DType]
		if !ok {
			return fmt.Errorf("safetensors: tensor %q: cannot write dtype %q", t.Name, t.DType)
		}
		if t.Elements()*size != len(t.Data) {
			return fmt.Errorf("safetensors: tensor %q: %d bytes for %s %v", t.Name, len(t.Data), t.DType, t.Shape)
		}
		if i > 0 || metadata != nil {
			h.WriteByte(',')
		}
		name, _ := json.Marshal(t.Name)
		shape := t.Shape
		if shape == nil {
			shape = []int{}
		}
		e, _ := json.Marshal(struct {
			DType       string   `json:"dtype"`
			Shape       []int    `json:"shape"`
			DataOffsets []uint64 `json:"data_offsets"`
		}{t.DType, shape, []uint64{off, off + uint64(len(t.Data))}})
		h.Write(name)
		h.WriteByte(':')
		h.Write(e)
		off += uint64(len(t.Data))
	}
	h.WriteByte('}')
	for h.Len()%8 != 0 {
		h.WriteByte(' ')
	}
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(h.Len()))
	if _, err := w.Write(n[:]); err != nil {
		return err
	}
	if _, err := w.Write(h.Bytes()); err != nil {
		return err
	}
	for _, t := range tensors {
		if _, err := w.Write(t.Data); err != nil {
			return err
		}
	}
	return nil
}

// F32Bytes encodes xs as little-endian float32s, for SafeTensor.Data.
func F32Bytes(xs []float32) []byte {
	b := make([]byte, 4*len(xs))
	for i, x := range xs {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}
