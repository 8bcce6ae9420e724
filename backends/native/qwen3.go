package native

// Qwen3's block is llama's: its per-head query and key norms are tensors
// the attention applies when a block has them (rotatedQKV), before RoPE as
// llama.cpp's graph does, and its NeoX RoPE and head size come from the
// architecture's description.
func init() { registerFamily("qwen3", family{block: llamaBlock}) }
