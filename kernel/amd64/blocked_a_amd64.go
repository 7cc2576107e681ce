package amd64

// BlockA computes n (1 to 6) output pixels by one block of 16 channels of
// a convolution on blocked (16-channel) tensors with AVX2+FMA: pixel i's
// input at px[i] (the tap offsets offs[0:k] in floats from it), the
// block's weights w (16 floats per step), each output canon(acc) + bias
// (16 floats, when not nil) + res[i] (16 floats, when res is not nil),
// then clamped (lo > v ? lo : v, hi < v ? hi : v, when clamp is not
// nil): ConvZ's and StoreZB's operations in their order, stored at
// out[i]. Only the first n entries of px, out and res are read.
func BlockA(n, k int, px *[6]*float32, offs *int32, w *float32, bias *float32, out *[6]*float32, res *[6]*float32, clamp *[2]float32) {
	switch n {
	case 6:
		BlockA6(k, px, offs, w, bias, out, res, clamp)
	case 5:
		BlockA5(k, px, offs, w, bias, out, res, clamp)
	case 4:
		BlockA4(k, px, offs, w, bias, out, res, clamp)
	case 3:
		BlockA3(k, px, offs, w, bias, out, res, clamp)
	case 2:
		BlockA2(k, px, offs, w, bias, out, res, clamp)
	case 1:
		BlockA1(k, px, offs, w, bias, out, res, clamp)
	default:
		panic("amd64: BlockA of more than 6 pixels")
	}
}

// BlockA1 to BlockA6 are BlockA's tiles (gen_blocked_a.py).
//
//go:noescape
func BlockA1(k int, px *[6]*float32, offs *int32, w *float32, bias *float32, out *[6]*float32, res *[6]*float32, clamp *[2]float32)

//go:noescape
func BlockA2(k int, px *[6]*float32, offs *int32, w *float32, bias *float32, out *[6]*float32, res *[6]*float32, clamp *[2]float32)

//go:noescape
func BlockA3(k int, px *[6]*float32, offs *int32, w *float32, bias *float32, out *[6]*float32, res *[6]*float32, clamp *[2]float32)

//go:noescape
func BlockA4(k int, px *[6]*float32, offs *int32, w *float32, bias *float32, out *[6]*float32, res *[6]*float32, clamp *[2]float32)

//go:noescape
func BlockA5(k int, px *[6]*float32, offs *int32, w *float32, bias *float32, out *[6]*float32, res *[6]*float32, clamp *[2]float32)

//go:noescape
func BlockA6(k int, px *[6]*float32, offs *int32, w *float32, bias *float32, out *[6]*float32, res *[6]*float32, clamp *[2]float32)
