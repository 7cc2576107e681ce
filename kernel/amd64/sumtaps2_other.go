//go:build !amd64

package amd64

func SumTapsS2(n, taps int, offs *int32, x *float32, y *float32) {
	panic("amd64: not available")
}

func SumTaps8(n, taps int, offs *int32, x *float32, y *float32) {
	panic("amd64: not available")
}

func SumTapsS2R(rows, n, taps int, offs *int32, x *float32, xs int, y *float32, ys int) {
	panic("amd64: not available")
}
