package amd64

// Sgemm6x16RBN computes np 6x16 tiles of C stacked down the rows, as
// Sgemm6x16RB with load 0 would one at a time, in one call: tile p's row
// i is A row 6p+i (k floats at a[(6p+i)*lda:]) against B read in place
// (step kk's 16 floats at b[kk*ldb:]), stored at c[(6p+i)*ldc:]. Each
// output is acc = FMA(a, b, acc) for kk ascending from +0, stored as
// canon(acc), plus bias[6p+i] when bias is not nil, then clamped to
// [lo, hi] (max then min, Store.Clamp's order) when clamp is not 0.
// Requires AVX2 and FMA.
//
//go:noescape
func Sgemm6x16RBN(k int, a *float32, lda int, np int, b *float32, ldb int, c *float32, ldc int, bias *float32, lo, hi float32, clamp int)
