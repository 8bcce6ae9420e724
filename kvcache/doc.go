// Package kvcache holds the attention keys and values a sequence has seen so
// far, so that each decode step attends to them without recomputing them.
// This is the simple form: one contiguous F16 or F32 buffer per sequence,
// sized once for its maximum length; the paged cache comes later.
package kvcache
