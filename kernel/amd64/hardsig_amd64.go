package amd64

// HardSigmoidZ (AVX-512F, where EnabledZ) sets y[i] = max(0, min(1,
// float32(a*x[i])+b)), Go's min and max (max(0, -0) is +0), for i < n (n
// a multiple of 16): the ONNX HardSigmoid of package elementwise, 16 lanes
// at a time. It stops before the first group of 16 in which
// float32(a*x[i])+b is a NaN (which NaN Go's min and max return is theirs
// to choose) and returns how many values it did: n when there was none.
//
//go:noescape
func HardSigmoidZ(x, y *float32, n int, a, b float32) int
