package kernels

import (
	"math"
	"testing"
)

func TestFP16RoundTrip(t *testing.T) {
	// Every finite half converts to float32 and back to itself.
	for h := 0; h < 1<<16; h++ {
		f := FP16ToFP32(uint16(h))
		if math.IsNaN(float64(f)) {
			continue
		}
		if got := FP32ToFP16(f); got != uint16(h) {
			t.Fatalf("half %#04x -> %g -> %#04x", h, f, got)
		}
	}
}

func TestFP32ToFP16Rounding(t *testing.T) {
	cases := []struct {
		in   float32
		want uint16
	}{
		{1, 0x3c00},
		{-2, 0xc000},
		{65504, 0x7bff},
		{65520, 0x7c00},          // rounds up to inf
		{1.0 + 1.0/2048, 0x3c00}, // tie, to even
		{1.0 + 3.0/2048, 0x3c02}, // tie, to even (up)
		{5.960464477539063e-08, 0x0001},
		{2.98e-08, 0x0000},
		{float32(math.Inf(-1)), 0xfc00},
	}
	for _, c := range cases {
		if got := FP32ToFP16(c.in); got != c.want {
			t.Errorf("FP32ToFP16(%g) = %#04x, want %#04x", c.in, got, c.want)
		}
	}
}

func TestBF16(t *testing.T) {
	cases := []struct {
		in   float32
		want uint16
	}{
		{1, 0x3f80},
		{-1.5, 0xbfc0},
		{1.00390625, 0x3f80}, // tie to even, down
		{1.01171875, 0x3f82}, // tie to even, up
	}
	for _, c := range cases {
		got := FP32ToBF16(c.in)
		if got != c.want {
			t.Errorf("FP32ToBF16(%g) = %#04x, want %#04x", c.in, got, c.want)
		}
		if back := BF16ToFP32(got); math.Abs(float64(back-c.in)) > 0.01 {
			t.Errorf("BF16 round trip of %g gave %g", c.in, back)
		}
	}
}
