package kvcache

import "testing"

func TestParsePrecision(t *testing.T) {
	cases := []struct {
		in   string
		want Precision
		ok   bool
	}{{"f16", F16, true}, {"F32", F32, true}, {"q8", Q8, true}, {"Q4", Q4, true}, {"tiered", Tiered, true},
		{"q8_0", 0, false}, {"", 0, false}}
	for _, c := range cases {
		got, err := ParsePrecision(c.in)
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("ParsePrecision(%q) = %v, %v", c.in, got, err)
		}
	}
}
