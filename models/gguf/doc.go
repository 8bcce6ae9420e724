// Package gguf reads and writes GGUF, the llama.cpp model file format. Files are
// mapped read-only and every count, length, shape and offset is validated
// against the file before it is trusted, so a hostile file yields an error;
// tensors are handed out as zero-copy views of the mapping.
package gguf
