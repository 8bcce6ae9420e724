package main

import (
	"fmt"

	"github.com/ruvllm/ruvllm/backends"
	"github.com/ruvllm/ruvllm/kvcache"
)

// Defaults of the KV cache flags. serve keeps old blocks at 8 and 4 bits
// (tiered: about a third of F16's memory at 2,048 tokens, perplexity
// within 0.1%, decode as fast or faster); perplexity and bench measure with
// F16, as llama.cpp's tools do, so that their figures compare.
const (
	defaultServeKV = "tiered"
	defaultToolKV  = "f16"
	defaultKVHot   = 64
	defaultKVWarm  = 0
)

// kvFlags choose the KV cache's precision and, for tiered, its tiers: the
// same flags for serve, bench and perplexity.
type kvFlags struct {
	kv        string
	hot, warm int
	precision kvcache.Precision // set by check
}

// addKVFlags adds --kv (default def), --kv-hot and --kv-warm to fs.
func addKVFlags(fs *flagSet, def string) *kvFlags {
	k := &kvFlags{}
	fs.StringVar(&k.kv, "kv", def, "KV cache precision: f16, f32, q8 or q4 (full blocks at 8 or 4 bits), or tiered (recent blocks f16, then q8, then q4)")
	fs.IntVar(&k.hot, "kv-hot", defaultKVHot, "with --kv tiered: the most recent tokens (before a token's own block) attended to at f16, rounded up to whole 32-token blocks")
	fs.IntVar(&k.warm, "kv-warm", defaultKVWarm, "with --kv tiered: the tokens before the hot ones attended to at 8 bits (older ones at 4), rounded up to whole blocks")
	return k
}

// check parses --kv and checks the tier sizes.
func (k *kvFlags) check() error {
	p, err := kvcache.ParsePrecision(k.kv)
	if err != nil {
		return fmt.Errorf("%w: --kv: %v", errUsage, err)
	}
	if k.hot < 0 || k.warm < 0 {
		return fmt.Errorf("%w: --kv-hot and --kv-warm must not be negative", errUsage)
	}
	k.precision = p
	return nil
}

// apply sets the tiers in a backend's options.
func (k *kvFlags) apply(o *backends.Options) {
	o.KVHotTokens, o.KVWarmTokens = k.hot, k.warm
}
