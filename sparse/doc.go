// Package sparse is activation sparsity without retraining (TEAL's
// thresholds): the inputs of a model's projections are mostly near zero, so
// zeroing the smallest of them barely changes the output, and the weights
// they would multiply need not be read. It holds the calibration of the
// thresholds, the input-channel-major layout that makes a zeroed input skip
// a contiguous stretch of memory, and the products over it; the native
// backend runs a sparsified file through it.
package sparse
