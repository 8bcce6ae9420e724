// Package models gives GGUF model files their meaning: the hyperparameters of
// each supported architecture (read once, with llama.cpp's defaults where a key
// is absent), the names of their tensors, and Model, which ties a mapped file
// to its config, tokenizer and chat template.
package models
