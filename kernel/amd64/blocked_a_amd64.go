package amd64

// BlockA6 computes 6 output pixels by one block of 16 channels of a
// convolution on blocked (16-channel) tensors with AVX2+FMA: pixel i's
// input at px[i] (the tap offsets offs[0:k] in floats from it), the
// block's weights w (16 floats per step), each output canon(acc) + bias
// (16 floats, when not nil) + res[i] (16 floats, when res is not nil),
// then clamped (lo > v ? lo : v, hi < v ? hi : v, when clamp is not
// nil): ConvZ's and StoreZB's operations in their order. Only out[0:n]
// (1 <= n <= 6) is stored; every px[i] (and res[i]) must be readable.
//
//go:noescape
func BlockA6(k int, px *[6]*float32, offs *int32, w *float32, bias *float32, out *[6]*float32, res *[6]*float32, clamp *[2]float32, n int)
