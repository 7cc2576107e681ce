package rnn

import "github.com/vouchml/vouch/kernel/amd64"

// haveZ: the CPU runs chainRowsZ (AVX-512F); haveY: chainRowsY (AVX2
// and FMA).
var (
	haveZ = amd64.EnabledZ
	haveY = amd64.Enabled
)

//go:noescape
func chainRowsZ(k int, x *float32, b *float32, ldb int, y *float32, n int)

//go:noescape
func chainRows8Z(k int, xp *float32, b *float32, ldb int, y *float32, ldy int, n int)

//go:noescape
func chainRowsY(k int, x *float32, b *float32, ldb int, y *float32, n int)
