// Package quant implements vouch's post-training quantization arithmetic:
// calibrators that choose an int8 range for each activation tensor from
// calibration data (minmax, entropy, percentile), symmetric scales for
// weights and activations, the calibration cache file, calibration data
// loading, and the accuracy measures the build report shows.
//
// Conventions. Every int8 quantity is symmetric with zero point 0 and the
// range [-127, 127] (−128 is never produced, so a product of two int8 values
// fits 15 bits and sums of pairs never saturate 16-bit-widened kernels).
// A real value x maps to q = clamp(roundHalfEven(x·(1/s)), −127, 127) with
// s = threshold/127, threshold being the calibrated |x| bound.
//
// Everything here is deterministic: histograms and searches run in float64
// in a fixed order, so the same data gives the same scales, and the same
// scales give the same plan.
package quant
