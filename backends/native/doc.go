// Package native runs llama-family GGUF models on the CPU: the weights stay
// where the file mapping put them, quantized as they are, and every product
// goes through the kernels package the way llama.cpp's CPU backend does it,
// so that greedy outputs match llama.cpp's. It implements backends.Backend.
package native
