package kvcache

import (
	"bytes"
	"errors"
	"slices"
	"testing"
)

// A table's state read back into another pool of the same geometry holds
// the same tokens, keys and values, commits its full blocks, and is refused
// by a pool of another geometry or when cut short.
func TestStateRoundTrip(t *testing.T) {
	for _, typ := range []Precision{F32, F16, Tiered} {
		t.Run(typ.String(), func(t *testing.T) {
			o := small
			o.Type = typ
			if typ == Tiered {
				o.HotTokens = 64 // every block keeps its exact form
			}
			src := newTestTable(t, newTestPool(t, o, 16), 40)
			tokens := []int32{1, 5, 9, 2, 6, 3, 7, 7, 4, 8, 11}
			appendStored(t, src, tokens...)
			var buf bytes.Buffer
			n, err := src.WriteState(&buf)
			if err != nil || n != int64(buf.Len()) {
				t.Fatalf("WriteState = %d, %v; %d bytes", n, err, buf.Len())
			}
			dstPool := newTestPool(t, o, 16)
			dst := newTestTable(t, dstPool, 40)
			appendStored(t, dst, 3, 3, 3) // replaced
			got, read, err := dst.ReadState(bytes.NewReader(buf.Bytes()))
			if err != nil || got != len(tokens) || read != n {
				t.Fatalf("ReadState = %d tokens, %d bytes, %v; want %d, %d", got, read, err, len(tokens), n)
			}
			if !slices.Equal(dst.Tokens(), tokens) {
				t.Fatalf("tokens %v, want %v", dst.Tokens(), tokens)
			}
			if err := checkData(dst); err != nil {
				t.Fatal(err)
			}
			if dst.Committed() != len(tokens)/o.BlockTokens*o.BlockTokens {
				t.Errorf("committed %d tokens", dst.Committed())
			}
			// The restored blocks are found by another table.
			other := newTestTable(t, dstPool, 40)
			if k := other.Match(tokens); k != 8 {
				t.Errorf("Match after restore = %d, want 8", k)
			}

			// Another geometry, and a state cut short.
			o2 := o
			o2.HeadDim++
			wrong := newTestTable(t, newTestPool(t, o2, 16), 40)
			if _, _, err := wrong.ReadState(bytes.NewReader(buf.Bytes())); !errors.Is(err, ErrState) || wrong.Len() != 0 {
				t.Errorf("other geometry: %v, %d tokens", err, wrong.Len())
			}
			cut := newTestTable(t, newTestPool(t, o, 16), 40)
			if _, _, err := cut.ReadState(bytes.NewReader(buf.Bytes()[:buf.Len()-3])); !errors.Is(err, ErrState) || cut.Len() != 0 {
				t.Errorf("cut short: %v, %d tokens", err, cut.Len())
			}
			if _, _, err := cut.ReadState(bytes.NewReader([]byte("not a state at all, no, not at all ....."))); !errors.Is(err, ErrState) {
				t.Errorf("garbage: %v", err)
			}
			short := newTestTable(t, newTestPool(t, o, 16), 8)
			if _, _, err := short.ReadState(bytes.NewReader(buf.Bytes())); !errors.Is(err, ErrTableFull) {
				t.Errorf("too long for the table: %v", err)
			}
		})
	}
}
