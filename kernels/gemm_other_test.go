//go:build !amd64 || purego

package kernels

func gemmGroupVariants(DType) []*gemmFormat { return nil }
