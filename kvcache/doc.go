// Package kvcache holds the attention keys and values sequences have seen so
// far, so that each decode step attends to them without recomputing them: a
// Pool of fixed-size blocks allocated once, and a BlockTable per sequence,
// with blocks shared by reference between sequences with a common token
// prefix, copied on write, and evicted least recently used when nobody holds
// them.
//
// A pool of precision Q8, Q4 or Tiered keeps full blocks quantized (tiers.go):
// a sequence's most recent blocks at F16 (hot), older ones at 8 bits (warm)
// and then 4 (cold), each form made from the exact one when its block fills,
// and a row's position alone decides which form it reads.
//
// # Block formats, and why
//
// The quantized forms are kernels' KV tiles: per kv head, layer and block,
// keys and values are both quantized per channel over the block's 32
// tokens, asymmetrically (a min and a scale per channel), with the mins and
// scales coded in 8 bits against two F16 factors of the tile: 4.5 bits an
// element at 4 bits, 8.5 at 8, for head_dim 64. No rotation. These were
// chosen by measurement, fake-quantizing the cache of the native backend
// (F32 attention over dequantized blocks) in every variant:
//
//   - keys per channel (KIVI's choice) against per token, 4 bits, the two
//     most recent blocks exact: stories260K's ln perplexity at --ctx 512 on
//     ../shared/reference/stories-sample.txt rose +0.085% against +0.13%;
//     mean KL divergence to exact KV along 512-token greedy runs of the
//     reference prompts 0.00007 against 0.00039 (stories260K);
//   - values per channel against per token (KIVI's choice for values): the
//     same perplexity (+0.05% against +0.085%), KL 0.0009 against 0.0067 on
//     mini-llama-F16 and 0.0048 against 0.0069 on mini-qwen2-Q8_0, equal on
//     stories260K; so values are per channel too, which also lets one kernel
//     serve keys and values;
//   - a Hadamard rotation of each head before quantizing (QuaRot) changed
//     KL by -21% (mini-llama-F16) to +240% (stories260K), and it costs a
//     transform of every query and key: not used;
//   - symmetric quantization (a scale, no min) was 1.2× (mini models) to
//     10× (stories260K) worse in KL: keys have channels offset far from
//     zero;
//   - mins and scales coded in 8 bits rather than stored as F16 left the
//     perplexity unchanged and moved KL by -7% to +23%; it saves half a bit
//     an element, which is what takes a 2,048-token Tiered sequence past 3×
//     fewer bytes than F16.
//
// (KL: mean over the steps of greedy runs of the three reference prompts
// extended to 512 tokens, decoded one token at a time, against exact KV.)
package kvcache
