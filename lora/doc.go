// Package lora loads LoRA adapters (PEFT safetensors directories and
// llama.cpp GGUF LoRA files), checks them against a base model, applies them
// at run time as y += s·B·(A·x) next to the base matrix product, merges them
// into a new model file, and keeps a registry of the adapters a server
// offers (upload, load on demand, least-recently-used residency).
package lora
