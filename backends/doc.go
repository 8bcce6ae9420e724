// Package backends defines Backend, the interface every model runtime
// implements: a forward pass over a batch of token chunks from one or more
// sequences, each owning its KV cache, that returns logits or hidden states.
// The engine that schedules requests onto a Backend, and sampling, live here
// too; the runtimes themselves live in subpackages such as backends/native.
package backends
