//go:build amd64 && !purego

package kernels

// gemmGroupVariants returns the group kernels of weight type t that this
// CPU does not pick (the AVX2 ones where AVX-512 runs), so that the tests
// run them too.
func gemmGroupVariants(t DType) []*gemmFormat {
	f := gemmFormats[t]
	if f == nil || !vnni {
		return nil
	}
	alt := *f
	switch t {
	case Q4_0:
		alt.group, alt.layout = gemmQ4_0x4x8, q4Groups8
	case Q8_0:
		alt.group, alt.layout = gemmQ8_0x1x8, q8Groups8
	default:
		return nil
	}
	return []*gemmFormat{&alt}
}
