package native

// Qwen2's block is llama's: its q/k/v biases are tensors the attention
// applies when a block has them, and its NeoX RoPE is the rope the
// architecture's description sets up (Backend.rope).
func init() { registerFamily("qwen2", family{block: llamaBlock}) }
