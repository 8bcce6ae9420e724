// Package kvcache holds the attention keys and values sequences have seen so
// far, so that each decode step attends to them without recomputing them: a
// Pool of fixed-size blocks allocated once, and a BlockTable per sequence,
// with blocks shared by reference between sequences with a common token
// prefix, copied on write, and evicted least recently used when nobody holds
// them.
package kvcache
