// Package amd64 holds vouch's hand-written AVX2+FMA kernels for amd64.
//
// Each routine here is the vector twin of a portable Go kernel in another
// package (kernel/nn) and performs exactly the same IEEE operations in the
// same order: VFMADD231PS rounds once per lane, exactly as vmath.FMA32
// does, and every output lane is one chain over k ascending. The callers'
// twin tests assert bit equality.
//
// The routines are only valid where Enabled reports true; callers fall
// back to the portable kernels elsewhere (and may force that fallback to
// replay a plan through the twin).
package amd64

//go:generate python3 gen_asm.py
//go:generate python3 gen_direct.py
//go:generate python3 gen_gemmz.py
//go:generate sh -c "python3 gen_rows.py > rows_amd64.s"
