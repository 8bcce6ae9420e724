package lora

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

// sampleSafetensors is a small valid file with metadata, two dtypes and an
// empty tensor.
func sampleSafetensors(t testing.TB) []byte {
	t.Helper()
	var buf bytes.Buffer
	err := WriteSafetensors(&buf, []SafeTensor{
		{Name: "a", DType: "F32", Shape: []int{2, 3}, Data: F32Bytes([]float32{1, 2, 3, 4, 5, -6})},
		{Name: "b", DType: "F16", Shape: []int{2}, Data: []byte{0x00, 0x3c, 0x00, 0xc0}}, // 1, -2
		{Name: "c", DType: "BF16", Shape: []int{1}, Data: []byte{0x40, 0x40}},            // 3
		{Name: "empty", DType: "F32", Shape: []int{0, 4}, Data: nil},
	}, map[string]string{"format": "pt"})
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestSafetensorsRoundTrip(t *testing.T) {
	st, err := ParseSafetensors(sampleSafetensors(t))
	if err != nil {
		t.Fatal(err)
	}
	if st.Metadata["format"] != "pt" {
		t.Errorf("metadata %v", st.Metadata)
	}
	want := map[string][]float32{"a": {1, 2, 3, 4, 5, -6}, "b": {1, -2}, "c": {3}, "empty": {}}
	for name, w := range want {
		tn, ok := st.Tensor(name)
		if !ok {
			t.Fatalf("tensor %s missing", name)
		}
		got := tn.Float32s()
		if len(got) != len(w) {
			t.Fatalf("%s: %v, want %v", name, got, w)
		}
		for i := range got {
			if got[i] != w[i] {
				t.Fatalf("%s: %v, want %v", name, got, w)
			}
		}
	}
	if tn, _ := st.Tensor("a"); tn.Shape[0] != 2 || tn.Shape[1] != 3 {
		t.Errorf("shape %v", tn.Shape)
	}
}

// rawSafetensors builds a file from a literal header and data.
func rawSafetensors(header string, data []byte) []byte {
	b := make([]byte, 8, 8+len(header)+len(data))
	binary.LittleEndian.PutUint64(b, uint64(len(header)))
	b = append(b, header...)
	return append(b, data...)
}

func TestSafetensorsEmptyAtSameOffset(t *testing.T) {
	// An empty tensor may start where another starts, in any header order.
	f := rawSafetensors(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"e":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}}`, make([]byte, 4))
	if _, err := ParseSafetensors(f); err != nil {
		t.Fatal(err)
	}
}

func TestSafetensorsErrors(t *testing.T) {
	eight := make([]byte, 8)
	huge := make([]byte, 8)
	binary.LittleEndian.PutUint64(huge, 1<<40)
	valid := sampleSafetensors(t)
	cases := []struct {
		name string
		file []byte
		want string
	}{
		{"empty", nil, "too short"},
		{"header length past end", append(append([]byte{}, huge...), '{', '}'), "over the"},
		{"header longer than file", rawSafetensors(`{}`, nil)[:9], "truncated"},
		{"not an object", rawSafetensors(`[1]`, nil), "JSON object"},
		{"bad json", rawSafetensors(`{"a":`, nil), "header"},
		{"trailing junk", rawSafetensors(`{} x`, nil), "after the JSON"},
		{"unsupported dtype", rawSafetensors(`{"a":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}}`, eight), "adapters must be"},
		{"unknown dtype", rawSafetensors(`{"a":{"dtype":"F33","shape":[1],"data_offsets":[0,4]}}`, eight[:4]), "unknown dtype"},
		{"shape vs range", rawSafetensors(`{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, eight), "needs 12 bytes"},
		{"negative dim", rawSafetensors(`{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}`, eight[:4]), "negative"},
		{"huge shape", rawSafetensors(`{"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}}`, eight[:4]), "too large"},
		{"reversed offsets", rawSafetensors(`{"a":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}}`, eight[:4]), "begin, end"},
		{"one offset", rawSafetensors(`{"a":{"dtype":"F32","shape":[0],"data_offsets":[0]}}`, nil), "begin, end"},
		{"overlap", rawSafetensors(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, eight), "overlaps"},
		{"gap", rawSafetensors(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, eight), "unused bytes"},
		{"extra data", rawSafetensors(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, eight), "after the last tensor"},
		{"truncated", valid[:len(valid)-3], "truncated"},
		{"duplicate", rawSafetensors(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, eight), "twice"},
		{"metadata not strings", rawSafetensors(`{"__metadata__":{"x":1}}`, nil), "map of strings"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseSafetensors(c.file)
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrSafetensors) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q, want one containing %q", err, c.want)
			}
		})
	}
}

// FuzzParseSafetensors checks that no input panics, and that what parses
// is written back to a file that parses to the same tensors.
func FuzzParseSafetensors(f *testing.F) {
	f.Add(sampleSafetensors(f))
	f.Add(rawSafetensors(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, make([]byte, 8)))
	f.Add(rawSafetensors(`{"__metadata__":{"k":"v"}}`, nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := ParseSafetensors(data)
		if err != nil {
			return
		}
		var buf bytes.Buffer
		if err := WriteSafetensors(&buf, st.Tensors, st.Metadata); err != nil {
			t.Fatalf("parsed file does not write: %v", err)
		}
		again, err := ParseSafetensors(buf.Bytes())
		if err != nil {
			t.Fatalf("written file does not parse: %v", err)
		}
		if len(again.Tensors) != len(st.Tensors) {
			t.Fatalf("%d tensors, then %d", len(st.Tensors), len(again.Tensors))
		}
		for i := range st.Tensors {
			a, b := &st.Tensors[i], &again.Tensors[i]
			if a.Name != b.Name || a.DType != b.DType || !bytes.Equal(a.Data, b.Data) {
				t.Fatalf("tensor %d changed: %q %s, then %q %s", i, a.Name, a.DType, b.Name, b.DType)
			}
		}
	})
}
