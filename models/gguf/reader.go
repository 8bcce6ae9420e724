package gguf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"os"
	"sort"
	"unsafe"

	"github.com/ruvllm/ruvllm/kernels"
)

// Magic is "GGUF" read as a little-endian uint32.
const Magic = 0x46554747

// DefaultAlignment is the tensor data alignment when general.alignment is absent.
const DefaultAlignment = 32

// MaxDims is the most dimensions a tensor may have (GGML_MAX_DIMS).
const MaxDims = 4

// maxArrayDepth bounds nested arrays so a hostile file cannot recurse deeply.
const maxArrayDepth = 8

// ErrFormat is wrapped by every error about the content of a file.
var ErrFormat = errors.New("gguf: invalid file")

// TensorInfo describes one tensor of a file.
type TensorInfo struct {
	Name string
	Type kernels.DType
	// Dims are ggml's ne: Dims[0] is the length of a row (the contiguous
	// dimension), so a (rows, cols) matrix is stored as Dims {cols, rows}.
	Dims []uint64
	// Offset of the data from the start of the tensor data section.
	Offset uint64
	// Size is the data size in bytes.
	Size uint64
}

// Elements is the number of elements of the tensor.
func (t *TensorInfo) Elements() uint64 {
	n := uint64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// Rows is the number of rows: every dimension but the first.
func (t *TensorInfo) Rows() uint64 {
	if len(t.Dims) == 0 {
		return 1
	}
	return t.Elements() / t.Dims[0]
}

// KV is one metadata entry.
type KV struct {
	Key   string
	Value Value
}

// File is a parsed GGUF file. Its tensor views stay valid until Close.
type File struct {
	Version   uint32
	KV        []KV // in file order
	Tensors   []TensorInfo
	Alignment uint64
	// DataOffset is where the tensor data section starts in the file.
	DataOffset uint64

	data    []byte // the whole file
	kvIndex map[string]int
	tIndex  map[string]int
	unmap   func() error
	// mapped says data is a file mapping (not a copy in memory).
	mapped bool
}

// Open maps path read-only and parses it. Close releases the mapping.
func Open(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() < 24 {
		return nil, fmt.Errorf("%w: %s: %d bytes is too short for a GGUF header", ErrFormat, path, st.Size())
	}
	data, unmap, mapped, err := mapFile(fh, st.Size())
	if err != nil {
		return nil, fmt.Errorf("gguf: %s: %w", path, err)
	}
	f, err := parse(data)
	if err != nil {
		unmap()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	f.unmap, f.mapped = unmap, mapped
	if f.DataOffset < uint64(len(data)) {
		adviseWillNeed(data[f.DataOffset:])
	}
	return f, nil
}

// Parse parses a GGUF file held in memory. The File refers to data.
func Parse(data []byte) (*File, error) { return parse(data) }

// Close releases the file mapping; tensor views must not be used after it.
func (f *File) Close() error {
	if f.unmap == nil {
		return nil
	}
	err := f.unmap()
	f.unmap, f.data = nil, nil
	return err
}

// ReleasePages drops the mapped file's pages from the process's resident
// memory, as a server does when it unloads a model but keeps its file open
// (its tokenizer and metadata stay usable). Reading a tensor afterwards is
// still correct: its pages come back from the page cache or the disk. A
// file read into memory (where mapping failed) keeps its copy.
func (f *File) ReleasePages() {
	if f.mapped {
		adviseDontNeed(f.data)
	}
}

// ReleaseRange is ReleasePages for the pages that lie wholly within b, a
// part of the file's bytes (a tensor's data): a backend that has copied a
// tensor into a layout of its own drops the mapped original, and leaves
// the pages it shares with the tensors beside it. A b outside the mapping
// is ignored.
func (f *File) ReleaseRange(b []byte) {
	if !f.mapped || len(b) == 0 || len(f.data) == 0 {
		return
	}
	start, end := unsafeAddr(b), unsafeAddr(b)+uintptr(len(b))
	base := unsafeAddr(f.data)
	if start < base || end > base+uintptr(len(f.data)) {
		return
	}
	page := uintptr(os.Getpagesize())
	lo, hi := (start+page-1)/page*page, end/page*page
	if lo >= hi {
		return
	}
	adviseDontNeed(f.data[lo-base : hi-base])
}

// Bytes is the whole file as mapped.
func (f *File) Bytes() []byte { return f.data }

// Get returns the metadata value under key.
func (f *File) Get(key string) (Value, bool) {
	i, ok := f.kvIndex[key]
	if !ok {
		return Value{}, false
	}
	return f.KV[i].Value, true
}

// GetString returns a string value under key.
func (f *File) GetString(key string) (string, bool) {
	v, ok := f.Get(key)
	if !ok {
		return "", false
	}
	return v.Str()
}

// GetUint returns a non-negative integer value under key.
func (f *File) GetUint(key string) (uint64, bool) {
	v, ok := f.Get(key)
	if !ok {
		return 0, false
	}
	return v.Uint()
}

// GetFloat returns a float (or integer) value under key.
func (f *File) GetFloat(key string) (float64, bool) {
	v, ok := f.Get(key)
	if !ok {
		return 0, false
	}
	return v.Float()
}

// GetBool returns a boolean value under key.
func (f *File) GetBool(key string) (bool, bool) {
	v, ok := f.Get(key)
	if !ok {
		return false, false
	}
	return v.Bool()
}

// GetStrings returns a string array under key.
func (f *File) GetStrings(key string) ([]string, bool) {
	v, ok := f.Get(key)
	if !ok {
		return nil, false
	}
	return v.Strings()
}

// Tensor returns the tensor named name.
func (f *File) Tensor(name string) (*TensorInfo, bool) {
	i, ok := f.tIndex[name]
	if !ok {
		return nil, false
	}
	return &f.Tensors[i], true
}

// TensorData is a zero-copy view of the tensor's bytes in the mapping.
func (f *File) TensorData(t *TensorInfo) []byte {
	start := f.DataOffset + t.Offset
	return f.data[start : start+t.Size : start+t.Size]
}

// TensorF32 is a zero-copy float32 view of an F32 tensor.
func (f *File) TensorF32(t *TensorInfo) ([]float32, error) {
	if t.Type != kernels.F32 {
		return nil, fmt.Errorf("gguf: tensor %s is %v, not F32", t.Name, t.Type)
	}
	b := f.TensorData(t)
	if len(b) == 0 {
		return nil, nil
	}
	if uintptr(unsafe.Pointer(&b[0]))%4 != 0 {
		out := make([]float32, len(b)/4)
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		return out, nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4), nil
}

// cursor reads little-endian values from a byte slice with bounds checks.
type cursor struct {
	b   []byte
	off int
}

func (c *cursor) need(n uint64, what string) error {
	if n > uint64(len(c.b)-c.off) {
		return fmt.Errorf("%w: %s needs %d bytes at offset %d but the file ends at %d (truncated?)", ErrFormat, what, n, c.off, len(c.b))
	}
	return nil
}

func (c *cursor) u8(what string) (uint8, error) {
	if err := c.need(1, what); err != nil {
		return 0, err
	}
	c.off++
	return c.b[c.off-1], nil
}

func (c *cursor) u16(what string) (uint16, error) {
	if err := c.need(2, what); err != nil {
		return 0, err
	}
	c.off += 2
	return binary.LittleEndian.Uint16(c.b[c.off-2:]), nil
}

func (c *cursor) u32(what string) (uint32, error) {
	if err := c.need(4, what); err != nil {
		return 0, err
	}
	c.off += 4
	return binary.LittleEndian.Uint32(c.b[c.off-4:]), nil
}

func (c *cursor) u64(what string) (uint64, error) {
	if err := c.need(8, what); err != nil {
		return 0, err
	}
	c.off += 8
	return binary.LittleEndian.Uint64(c.b[c.off-8:]), nil
}

func (c *cursor) str(what string) (string, error) {
	n, err := c.u64(what + " length")
	if err != nil {
		return "", err
	}
	if err := c.need(n, what); err != nil {
		return "", err
	}
	s := string(c.b[c.off : c.off+int(n)])
	c.off += int(n)
	return s, nil
}

func parse(data []byte) (*File, error) {
	c := &cursor{b: data}
	magic, err := c.u32("magic")
	if err != nil {
		return nil, err
	}
	if magic != Magic {
		return nil, fmt.Errorf("%w: bad magic %#08x (not a GGUF file)", ErrFormat, magic)
	}
	f := &File{data: data, Alignment: DefaultAlignment}
	if f.Version, err = c.u32("version"); err != nil {
		return nil, err
	}
	switch {
	case f.Version == 1:
		return nil, fmt.Errorf("%w: GGUF version 1 is not supported (re-convert the model)", ErrFormat)
	case f.Version > 0xffff && bits.ReverseBytes32(f.Version) <= 3:
		return nil, fmt.Errorf("%w: big-endian GGUF files are not supported", ErrFormat)
	case f.Version != 2 && f.Version != 3:
		return nil, fmt.Errorf("%w: unsupported GGUF version %d", ErrFormat, f.Version)
	}
	nTensors, err := c.u64("tensor count")
	if err != nil {
		return nil, err
	}
	nKV, err := c.u64("metadata count")
	if err != nil {
		return nil, err
	}
	// Each KV takes at least 8 (key length) + 4 (type) + 1 bytes, each tensor
	// info at least 8 + 4 + 4 + 8 bytes: bound the counts by what is left so a
	// hostile count cannot make us allocate.
	rest := uint64(len(data) - c.off)
	if nKV > rest/13 {
		return nil, fmt.Errorf("%w: metadata count %d cannot fit in %d bytes", ErrFormat, nKV, rest)
	}
	if nTensors > rest/24 {
		return nil, fmt.Errorf("%w: tensor count %d cannot fit in %d bytes", ErrFormat, nTensors, rest)
	}
	f.KV = make([]KV, 0, nKV)
	f.kvIndex = make(map[string]int, nKV)
	for i := uint64(0); i < nKV; i++ {
		key, err := c.str(fmt.Sprintf("key of metadata entry %d", i))
		if err != nil {
			return nil, err
		}
		if _, dup := f.kvIndex[key]; dup {
			return nil, fmt.Errorf("%w: duplicate metadata key %q", ErrFormat, key)
		}
		t, err := c.u32("type of " + key)
		if err != nil {
			return nil, err
		}
		v, err := c.value(ValueType(t), key, 0)
		if err != nil {
			return nil, err
		}
		f.kvIndex[key] = len(f.KV)
		f.KV = append(f.KV, KV{Key: key, Value: v})
	}
	if v, ok := f.Get("general.alignment"); ok {
		a, ok := v.Uint()
		if !ok || a == 0 || a&(a-1) != 0 || a > 1<<20 {
			return nil, fmt.Errorf("%w: general.alignment %v is not a power of two", ErrFormat, v.Any())
		}
		f.Alignment = a
	}
	f.Tensors = make([]TensorInfo, 0, nTensors)
	f.tIndex = make(map[string]int, nTensors)
	for i := uint64(0); i < nTensors; i++ {
		t, err := c.tensorInfo(i)
		if err != nil {
			return nil, err
		}
		if _, dup := f.tIndex[t.Name]; dup {
			return nil, fmt.Errorf("%w: duplicate tensor name %q", ErrFormat, t.Name)
		}
		if t.Offset%f.Alignment != 0 {
			return nil, fmt.Errorf("%w: tensor %s offset %d is not a multiple of the alignment %d", ErrFormat, t.Name, t.Offset, f.Alignment)
		}
		f.tIndex[t.Name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, t)
	}
	f.DataOffset = alignUp(uint64(c.off), f.Alignment)
	if nTensors > 0 && f.DataOffset > uint64(len(data)) {
		return nil, fmt.Errorf("%w: tensor data would start at %d past the end of the file (%d bytes)", ErrFormat, f.DataOffset, len(data))
	}
	if err := f.checkExtents(); err != nil {
		return nil, err
	}
	return f, nil
}

func alignUp(x, a uint64) uint64 { return (x + a - 1) / a * a }

func (c *cursor) tensorInfo(i uint64) (TensorInfo, error) {
	var t TensorInfo
	var err error
	if t.Name, err = c.str(fmt.Sprintf("name of tensor %d", i)); err != nil {
		return t, err
	}
	nDims, err := c.u32("dimension count of " + t.Name)
	if err != nil {
		return t, err
	}
	if nDims > MaxDims {
		return t, fmt.Errorf("%w: tensor %s has %d dimensions (at most %d)", ErrFormat, t.Name, nDims, MaxDims)
	}
	t.Dims = make([]uint64, nDims)
	n := uint64(1)
	for d := range t.Dims {
		if t.Dims[d], err = c.u64("dimensions of " + t.Name); err != nil {
			return t, err
		}
		hi, lo := bits.Mul64(n, t.Dims[d])
		if hi != 0 || lo > math.MaxInt64 {
			return t, fmt.Errorf("%w: tensor %s has too many elements (dims %v)", ErrFormat, t.Name, t.Dims[:d+1])
		}
		n = lo
	}
	typ, err := c.u32("type of " + t.Name)
	if err != nil {
		return t, err
	}
	t.Type = kernels.DType(typ)
	if !t.Type.Known() {
		return t, fmt.Errorf("%w: tensor %s has unknown type %d", ErrFormat, t.Name, typ)
	}
	if t.Offset, err = c.u64("offset of " + t.Name); err != nil {
		return t, err
	}
	bs := uint64(t.Type.BlockSize())
	row := uint64(1)
	if nDims > 0 {
		row = t.Dims[0]
	}
	if row%bs != 0 {
		return t, fmt.Errorf("%w: tensor %s row length %d is not a multiple of the %v block size %d", ErrFormat, t.Name, row, t.Type, bs)
	}
	hi, size := bits.Mul64(n/bs, uint64(t.Type.BlockBytes()))
	if hi != 0 || size > math.MaxInt64 {
		return t, fmt.Errorf("%w: tensor %s is too large", ErrFormat, t.Name)
	}
	t.Size = size
	return t, nil
}

// checkExtents verifies that every tensor lies inside the file and that no
// two tensors overlap.
func (f *File) checkExtents() error {
	avail := uint64(len(f.data)) - min(f.DataOffset, uint64(len(f.data)))
	order := make([]int, len(f.Tensors))
	for i := range order {
		order[i] = i
	}
	for _, t := range f.Tensors {
		if t.Offset > avail || t.Size > avail-t.Offset {
			return fmt.Errorf("%w: tensor %s (offset %d, %d bytes) extends past the end of the file (%d data bytes; truncated?)", ErrFormat, t.Name, t.Offset, t.Size, avail)
		}
	}
	sort.Slice(order, func(a, b int) bool { return f.Tensors[order[a]].Offset < f.Tensors[order[b]].Offset })
	for k := 1; k < len(order); k++ {
		p, q := &f.Tensors[order[k-1]], &f.Tensors[order[k]]
		if p.Size > 0 && p.Offset+p.Size > q.Offset {
			return fmt.Errorf("%w: tensors %s and %s overlap", ErrFormat, p.Name, q.Name)
		}
	}
	return nil
}

func (c *cursor) value(t ValueType, key string, depth int) (Value, error) {
	what := "value of " + key
	switch t {
	case TypeUint8:
		x, err := c.u8(what)
		return Value{Type: t, v: x}, err
	case TypeInt8:
		x, err := c.u8(what)
		return Value{Type: t, v: int8(x)}, err
	case TypeBool:
		x, err := c.u8(what)
		if err == nil && x > 1 {
			err = fmt.Errorf("%w: %s: bool value %d", ErrFormat, key, x)
		}
		return Value{Type: t, v: x == 1}, err
	case TypeUint16:
		x, err := c.u16(what)
		return Value{Type: t, v: x}, err
	case TypeInt16:
		x, err := c.u16(what)
		return Value{Type: t, v: int16(x)}, err
	case TypeUint32:
		x, err := c.u32(what)
		return Value{Type: t, v: x}, err
	case TypeInt32:
		x, err := c.u32(what)
		return Value{Type: t, v: int32(x)}, err
	case TypeFloat32:
		x, err := c.u32(what)
		return Value{Type: t, v: math.Float32frombits(x)}, err
	case TypeUint64:
		x, err := c.u64(what)
		return Value{Type: t, v: x}, err
	case TypeInt64:
		x, err := c.u64(what)
		return Value{Type: t, v: int64(x)}, err
	case TypeFloat64:
		x, err := c.u64(what)
		return Value{Type: t, v: math.Float64frombits(x)}, err
	case TypeString:
		s, err := c.str(what)
		return Value{Type: t, v: s}, err
	case TypeArray:
		return c.array(key, depth)
	}
	return Value{}, fmt.Errorf("%w: %s has unknown value type %d", ErrFormat, key, uint32(t))
}

func (c *cursor) array(key string, depth int) (Value, error) {
	if depth >= maxArrayDepth {
		return Value{}, fmt.Errorf("%w: %s: arrays nested deeper than %d", ErrFormat, key, maxArrayDepth)
	}
	et, err := c.u32("array type of " + key)
	if err != nil {
		return Value{}, err
	}
	elem := ValueType(et)
	n, err := c.u64("array length of " + key)
	if err != nil {
		return Value{}, err
	}
	size := elem.size()
	if size < 0 {
		return Value{}, fmt.Errorf("%w: %s: unknown array element type %d", ErrFormat, key, et)
	}
	// Strings and arrays take at least 8 bytes an element, scalars their size.
	minSize := uint64(size)
	if size == 0 {
		minSize = 8
	}
	if n > uint64(len(c.b)-c.off)/minSize {
		return Value{}, fmt.Errorf("%w: %s: array of %d elements cannot fit in the %d bytes left", ErrFormat, key, n, len(c.b)-c.off)
	}
	v := Value{Type: TypeArray, Elem: elem}
	if size > 0 {
		raw := c.b[c.off : c.off+int(n)*size]
		c.off += int(n) * size
		v.v = decodeScalars(elem, raw, int(n))
		if elem == TypeBool {
			for _, x := range raw {
				if x > 1 {
					return Value{}, fmt.Errorf("%w: %s: bool value %d", ErrFormat, key, x)
				}
			}
		}
		return v, nil
	}
	if elem == TypeString {
		out := make([]string, n)
		for i := range out {
			if out[i], err = c.str(key + " element"); err != nil {
				return Value{}, err
			}
		}
		v.v = out
		return v, nil
	}
	out := make([]Value, n)
	for i := range out {
		if out[i], err = c.array(key, depth+1); err != nil {
			return Value{}, err
		}
	}
	v.v = out
	return v, nil
}

func decodeScalars(t ValueType, b []byte, n int) any {
	le := binary.LittleEndian
	switch t {
	case TypeUint8:
		return append([]uint8(nil), b...)
	case TypeInt8:
		out := make([]int8, n)
		for i := range out {
			out[i] = int8(b[i])
		}
		return out
	case TypeBool:
		out := make([]bool, n)
		for i := range out {
			out[i] = b[i] == 1
		}
		return out
	case TypeUint16:
		out := make([]uint16, n)
		for i := range out {
			out[i] = le.Uint16(b[2*i:])
		}
		return out
	case TypeInt16:
		out := make([]int16, n)
		for i := range out {
			out[i] = int16(le.Uint16(b[2*i:]))
		}
		return out
	case TypeUint32:
		out := make([]uint32, n)
		for i := range out {
			out[i] = le.Uint32(b[4*i:])
		}
		return out
	case TypeInt32:
		out := make([]int32, n)
		for i := range out {
			out[i] = int32(le.Uint32(b[4*i:]))
		}
		return out
	case TypeFloat32:
		out := make([]float32, n)
		for i := range out {
			out[i] = math.Float32frombits(le.Uint32(b[4*i:]))
		}
		return out
	case TypeUint64:
		out := make([]uint64, n)
		for i := range out {
			out[i] = le.Uint64(b[8*i:])
		}
		return out
	case TypeInt64:
		out := make([]int64, n)
		for i := range out {
			out[i] = int64(le.Uint64(b[8*i:]))
		}
		return out
	case TypeFloat64:
		out := make([]float64, n)
		for i := range out {
			out[i] = math.Float64frombits(le.Uint64(b[8*i:]))
		}
		return out
	}
	return nil
}
