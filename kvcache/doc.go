// Package kvcache holds the attention keys and values a sequence has seen so
// far, so that each decode step attends to them without recomputing them.
// Cache is one contiguous F16 or F32 buffer per sequence, sized once for its
// maximum length; Pool and BlockTable are the paged form: fixed-size blocks
// from one pool, shared by reference between sequences with a common token
// prefix, copied on write, and evicted least recently used when unreferenced.
package kvcache
