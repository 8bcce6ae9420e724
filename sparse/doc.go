// Package sparse is activation sparsity without retraining (TEAL's
// thresholds): the inputs of a model's projections are mostly near zero, so
// zeroing the smallest of them barely changes the output, and the weights
// they would multiply need not be read. It holds the calibration of the
// thresholds, the input-channel-major layout that makes a zeroed input skip
// a contiguous stretch of memory, and the products over it; the native
// backend runs a sparsified file through it.
//
// # What was left out, and why
//
// The seed design's "precision lanes" (3/5/7-bit weights per input channel
// by how often the channel is active) were not built. What they could save
// was measured on stories260K (the only trained model of the test data),
// counting over the calibration text how often each input channel of every
// projection survives its threshold: the channels are active at nearly the
// same rate. At sparsity 0.4 the 10th to 90th percentile of the channels'
// activity is 0.47–0.76 for the attention inputs and 0.52–0.69 for the
// feed-forward ones, and the least active quarter of the channels still
// carries 19.5–21.9% of the weight traffic (25% if all were alike); at 0.5,
// 17.3–20.8%. Giving that quarter fewer bits would cut at most a few
// percent of the bytes read, while re-quantizing them loses precision the
// file's own Q8_0/Q4_0 weights have and needs a kernel of mixed formats. The
// "π calibration" was not built either: nothing was measured for it, and
// the magnitude quantiles of Calibration with the greedy allocation
// (Allocate) already are the calibration TEAL measured; the greedy
// allocation lowers stories260K's perplexity at sparsity 0.4 from 3.34 to
// 3.22 (dense 2.58), the uniform one being the default.
package sparse
