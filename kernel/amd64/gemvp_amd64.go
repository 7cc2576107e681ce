package amd64

// GemvPanel64 (AVX2+FMA, where Enabled) sets y[j], j < 64, to the chain
// acc = FMA(x[kk*xs], p[kk*64+j], acc) over kk < k ascending from +0:
// one 64-column panel of a packed GEMV matrix, read once from start to
// end. NaN results are left as the FMAs produce them.
//
//go:noescape
func GemvPanel64(k int, x *float32, xs int, p *float32, y *float32)
