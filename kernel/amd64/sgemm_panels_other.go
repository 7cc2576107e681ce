//go:build !amd64

package amd64

func Sgemm6x16RBN(k int, a *float32, lda int, np int, b *float32, ldb int, c *float32, ldc int, bias *float32, lo, hi float32, clamp int) {
	panic("amd64: not available")
}
