package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ruvllm/ruvllm/internal/shared"
	"github.com/ruvllm/ruvllm/kernels"
)

// sample builds a small file with every metadata type and three tensors.
func sample(t testing.TB) []byte {
	t.Helper()
	w := NewWriter()
	kvs := []struct {
		k string
		v any
	}{
		{"general.architecture", "llama"},
		{"u8", uint8(200)}, {"i8", int8(-5)}, {"u16", uint16(60000)}, {"i16", int16(-3000)},
		{"u32", uint32(4000000000)}, {"i32", int32(-7)}, {"f32", float32(1.5)}, {"bool", true},
		{"u64", uint64(1) << 40}, {"i64", int64(-1) << 40}, {"f64", 2.25},
		{"strs", []string{"a", "", "héllo"}}, {"f32s", []float32{1, -2}}, {"i32s", []int32{3, -4}},
		{"bools", []bool{true, false}},
		{"nested", []Value{mustValue(t, []uint8{1, 2}), mustValue(t, []string{"x"})}},
	}
	for _, kv := range kvs {
		if err := w.Set(kv.k, kv.v); err != nil {
			t.Fatal(err)
		}
	}
	f32 := make([]byte, 4*8*2)
	for i := range f32 {
		f32[i] = byte(i)
	}
	must(t, w.AddTensor("a.weight", kernels.F32, []uint64{8, 2}, f32))
	must(t, w.AddTensor("b.weight", kernels.Q8_0, []uint64{32}, make([]byte, 34)))
	must(t, w.AddTensor("c.weight", kernels.F16, []uint64{3}, []byte{1, 2, 3, 4, 5, 6}))
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func mustValue(t testing.TB, x any) Value {
	v, err := ValueOf(x)
	must(t, err)
	return v
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestRoundTrip(t *testing.T) {
	data := sample(t)
	f, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if f.Version != 3 || len(f.KV) != 17 || len(f.Tensors) != 3 {
		t.Fatalf("version %d, %d kv, %d tensors", f.Version, len(f.KV), len(f.Tensors))
	}
	checks := []struct {
		key  string
		want any
	}{
		{"u8", uint8(200)}, {"i8", int8(-5)}, {"u16", uint16(60000)}, {"i16", int16(-3000)},
		{"u32", uint32(4000000000)}, {"i32", int32(-7)}, {"f32", float32(1.5)}, {"bool", true},
		{"u64", uint64(1) << 40}, {"i64", int64(-1) << 40}, {"f64", 2.25},
		{"strs", []string{"a", "", "héllo"}}, {"f32s", []float32{1, -2}}, {"i32s", []int32{3, -4}},
		{"bools", []bool{true, false}},
	}
	for _, c := range checks {
		t.Run(c.key, func(t *testing.T) {
			v, ok := f.Get(c.key)
			if !ok || !reflect.DeepEqual(v.Any(), c.want) {
				t.Fatalf("got %#v, want %#v", v.Any(), c.want)
			}
		})
	}
	nested, _ := f.Get("nested")
	inner := nested.Any().([]Value)
	if len(inner) != 2 || !reflect.DeepEqual(inner[1].Any(), []string{"x"}) || inner[0].Len() != 2 {
		t.Fatalf("nested array: %#v", inner)
	}
	if n, ok := f.GetUint("i32"); ok {
		t.Errorf("negative i32 read as uint %d", n)
	}
	if n, ok := f.GetUint("u16"); !ok || n != 60000 {
		t.Errorf("GetUint(u16) = %d %v", n, ok)
	}
	a, _ := f.Tensor("a.weight")
	if a.Rows() != 2 || a.Elements() != 16 {
		t.Errorf("a.weight rows %d elements %d", a.Rows(), a.Elements())
	}
	if got := f.TensorData(a); got[5] != 5 || len(got) != 64 {
		t.Errorf("a.weight data %v", got[:8])
	}
	vals, err := f.TensorF32(a)
	if err != nil || len(vals) != 16 {
		t.Fatalf("TensorF32: %v %d", err, len(vals))
	}
	for _, ti := range f.Tensors {
		if (f.DataOffset+ti.Offset)%f.Alignment != 0 {
			t.Errorf("%s is not aligned", ti.Name)
		}
	}
	c, _ := f.Tensor("c.weight")
	if !bytes.Equal(f.TensorData(c), []byte{1, 2, 3, 4, 5, 6}) {
		t.Errorf("c.weight data %v", f.TensorData(c))
	}
}

func TestOpenFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.gguf")
	w := NewWriter()
	must(t, w.Set("general.alignment", uint32(64)))
	must(t, w.AddTensor("t", kernels.F32, []uint64{4}, make([]byte, 16)))
	must(t, w.AddTensor("u", kernels.F32, []uint64{4}, make([]byte, 16)))
	must(t, w.WriteFile(path))
	f, err := Open(path)
	must(t, err)
	defer f.Close()
	u, _ := f.Tensor("u")
	if f.Alignment != 64 || u.Offset != 64 {
		t.Fatalf("alignment %d, offset of u %d", f.Alignment, u.Offset)
	}
}

// TestTruncated cuts a valid file at every length: each prefix must give an
// error, never a panic.
func TestTruncated(t *testing.T) {
	data := sample(t)
	f, err := Parse(data)
	must(t, err)
	last := f.Tensors[len(f.Tensors)-1]
	end := int(f.DataOffset + last.Offset + last.Size) // after it comes only padding
	for n := 0; n < end; n++ {
		if _, err := Parse(data[:n]); err == nil {
			t.Fatalf("prefix of %d/%d bytes parsed without error", n, len(data))
		}
	}
}

func TestHostile(t *testing.T) {
	le := binary.LittleEndian
	header := func(nTensors, nKV uint64) []byte {
		b := le.AppendUint32(nil, Magic)
		b = le.AppendUint32(b, 3)
		b = le.AppendUint64(b, nTensors)
		return le.AppendUint64(b, nKV)
	}
	str := func(b []byte, s string) []byte { return append(le.AppendUint64(b, uint64(len(s))), s...) }
	tensor := func(b []byte, name string, dims []uint64, typ uint32, off uint64) []byte {
		b = str(b, name)
		b = le.AppendUint32(b, uint32(len(dims)))
		for _, d := range dims {
			b = le.AppendUint64(b, d)
		}
		b = le.AppendUint32(b, typ)
		return le.AppendUint64(b, off)
	}
	pad := func(b []byte, n int) []byte {
		for len(b)%32 != 0 {
			b = append(b, 0)
		}
		return append(b, make([]byte, n)...)
	}
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"bad magic", append([]byte("GGML"), make([]byte, 20)...), "bad magic"},
		{"version 1", le.AppendUint32(le.AppendUint32(nil, Magic), 1), "version 1"},
		{"version 99", append(le.AppendUint32(le.AppendUint32(nil, Magic), 99), make([]byte, 16)...), "unsupported GGUF version"},
		{"big endian", append(le.AppendUint32(le.AppendUint32(nil, Magic), 3<<24), make([]byte, 16)...), "big-endian"},
		{"huge kv count", header(0, 1<<62), "metadata count"},
		{"huge tensor count", header(1<<60, 0), "tensor count"},
		{"huge string", append(le.AppendUint64(header(0, 1), 1<<63), make([]byte, 16)...), "truncated"},
		{"huge array", le.AppendUint64(le.AppendUint32(le.AppendUint32(str(header(0, 1), "k"), 9), 4), 1<<61), "cannot fit"},
		{"unknown value type", le.AppendUint32(str(header(0, 1), "k"), 77), "unknown value type"},
		{"bad bool", append(le.AppendUint32(str(header(0, 1), "k"), 7), 2), "bool value"},
		{"duplicate key", append(le.AppendUint32(str(append(le.AppendUint32(str(header(0, 2), "k"), 0), 1), "k"), 0), 1), "duplicate metadata key"},
		{"deep arrays", func() []byte {
			b := str(header(0, 1), "k")
			b = le.AppendUint32(b, 9)
			for i := 0; i < 20; i++ {
				b = le.AppendUint64(le.AppendUint32(b, 9), 1)
			}
			return b
		}(), "nested deeper"},
		{"too many dims", tensor(header(1, 0), "t", []uint64{1, 1, 1, 1, 1}, 0, 0), "dimensions"},
		{"unknown tensor type", pad(tensor(header(1, 0), "t", []uint64{4}, 99, 0), 16), "unknown type"},
		{"dims overflow", tensor(header(1, 0), "t", []uint64{1 << 40, 1 << 40}, 0, 0), "too many elements"},
		{"bad block multiple", pad(tensor(header(1, 0), "t", []uint64{33}, 8, 0), 64), "block size"},
		{"offset past end", pad(tensor(header(1, 0), "t", []uint64{4}, 0, 1<<20), 16), "past the end"},
		{"size past end", pad(tensor(header(1, 0), "t", []uint64{1024}, 0, 0), 16), "past the end"},
		{"misaligned", pad(tensor(header(1, 0), "t", []uint64{4}, 0, 4), 32), "alignment"},
		{"overlap", pad(tensor(tensor(header(2, 0), "t", []uint64{16}, 0, 0), "u", []uint64{4}, 0, 32), 128), "overlap"},
		{"duplicate tensor", pad(tensor(tensor(header(2, 0), "t", []uint64{4}, 0, 0), "t", []uint64{4}, 0, 32), 64), "duplicate tensor"},
		{"bad alignment", le.AppendUint32(le.AppendUint32(str(header(0, 1), "general.alignment"), 4), 3), "power of two"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(c.data)
			if err == nil {
				t.Fatal("parsed without error")
			}
			if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q, want it to mention %q", err, c.want)
			}
		})
	}
}

func TestSharedModels(t *testing.T) {
	dir := shared.Path(t, "models")
	paths, _ := filepath.Glob(filepath.Join(dir, "*.gguf"))
	mini, _ := filepath.Glob(filepath.Join(dir, "mini", "*.gguf"))
	vocab, _ := filepath.Glob(filepath.Join(dir, "..", "vocab", "*.gguf"))
	for _, p := range append(append(paths, mini...), vocab...) {
		t.Run(filepath.Base(p), func(t *testing.T) {
			f, err := Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, ok := f.GetString("general.architecture"); !ok {
				t.Error("no general.architecture")
			}
			// Re-encode the whole file: the writer must reproduce it byte for byte.
			w := NewWriter()
			w.CopyKV(f)
			for i := range f.Tensors {
				ti := &f.Tensors[i]
				must(t, w.AddTensor(ti.Name, ti.Type, ti.Dims, f.TensorData(ti)))
			}
			var buf bytes.Buffer
			if _, err := w.WriteTo(&buf); err != nil {
				t.Fatal(err)
			}
			orig, err := os.ReadFile(p)
			must(t, err)
			if f.Version == 3 && !bytes.Equal(buf.Bytes(), orig) {
				t.Errorf("re-encoded file differs (%d vs %d bytes)", buf.Len(), len(orig))
			}
		})
	}
	t.Run("stories260K", func(t *testing.T) {
		f, err := Open(filepath.Join(dir, "stories260K.gguf"))
		must(t, err)
		defer f.Close()
		if n, _ := f.GetUint("llama.embedding_length"); n != 64 {
			t.Errorf("embedding_length %d", n)
		}
		tok, ok := f.GetStrings("tokenizer.ggml.tokens")
		if !ok || len(tok) != 512 {
			t.Errorf("%d tokens", len(tok))
		}
		emb, ok := f.Tensor("token_embd.weight")
		if !ok || emb.Dims[0] != 64 || emb.Dims[1] != 512 || emb.Type != kernels.F32 {
			t.Errorf("token_embd.weight %+v", emb)
		}
	})
}

func FuzzParse(f *testing.F) {
	f.Add(sample(f))
	if d := shared.Dir(); d != "" {
		if b, err := os.ReadFile(filepath.Join(d, "models", "stories260K.gguf")); err == nil {
			f.Add(b[:min(len(b), 4<<10)])
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := Parse(data)
		if err != nil {
			return
		}
		for i := range g.Tensors {
			_ = g.TensorData(&g.Tensors[i])
		}
	})
}
