//go:build !amd64

package amd64

// BlockA needs amd64 (Enabled is false elsewhere).
func BlockA(n, k int, px *[6]*float32, offs *int32, w *float32, bias *float32, out *[6]*float32, res *[6]*float32, clamp *[2]float32) {
	panic("amd64: BlockA called without AVX2")
}
