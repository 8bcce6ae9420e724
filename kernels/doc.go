// Package kernels holds the numeric kernels of ruvllm and nothing else: the
// ggml block formats (dequantize, quantize, dot products against quantized
// activations), float vector ops, normalisation, RoPE, softmax, activations and
// the row products of attention over a paged KV cache. Each hot kernel has
// AVX2/FMA/F16C assembly on amd64 (the mat-mul kernels also AVX-512 and VNNI
// variants, used where the CPU has them) and a pure-Go twin with the same
// results; the build tag purego selects the twins everywhere.
package kernels
