// Package hub pulls GGUF model files from the Hugging Face Hub by name. A
// reference such as "Qwen/Qwen2.5-0.5B-Instruct-GGUF/qwen2.5-0.5b-instruct-q4_k_m.gguf"
// (or "owner/repo:Q4_K_M") is turned into a file in a local cache: downloaded once,
// resumed after an interruption, checked against its size and sha256, and used
// without the network from then on.
package hub
