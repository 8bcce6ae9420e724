//go:build !amd64 || purego

package kernels

func siluRow(dst, x, up []float32) { siluRowGo(dst, x, up) }

func expSubSumRow(dst, x []float32, m float32) float64 { return expSubSumRowGo(dst, x, m) }
