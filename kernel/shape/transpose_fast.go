package shape

// Fast paths of float32 Transpose (and other strided copies): the same
// elements moved to the same places as stridedInto, so the bits are
// trivially equal; only the loop structure differs.
//
// The output's dimensions (with the input strides they read) are first
// simplified: size-1 dimensions are dropped and a dimension is merged
// into the one before it where the two walk the input contiguously
// (st[i] == st[i+1]*shape[i+1]). Where then the last dimension reads with
// a stride and the one before it reads contiguously (a 2-D transpose of
// the two, e.g. perm [0,2,3,1] on [N,S,H,D]), the pair is moved in blocks
// of 8 output columns, each output row of a block gathering one float from
// 8 input rows that stay in L1 for the whole block. Anything else (rows
// copied whole, which stridedInto does with copy) goes to stridedInto.

// simplify drops size-1 dimensions of shape (with input strides st) and
// merges contiguous neighbours, into sh and ss; it returns the new rank.
func simplify(shape, st []int, sh, ss *[maxRank]int) int {
	r := 0
	for i := range shape {
		if shape[i] == 1 {
			continue
		}
		if r > 0 && ss[r-1] == st[i]*shape[i] {
			sh[r-1] *= shape[i]
			ss[r-1] = st[i]
			continue
		}
		sh[r], ss[r] = shape[i], st[i]
		r++
	}
	return r
}

// stridedF32 is stridedInto for float32 with the fast path above.
func stridedF32(d, s []float32, shape, st []int, base int) {
	n := len(d)
	if n == 0 || len(shape) > maxRank {
		stridedInto(d, s, shape, st, base)
		return
	}
	var sh, ss [maxRank]int
	r := simplify(shape, st, &sh, &ss)
	switch {
	case r == 0:
		d[0] = s[base]
	case r >= 2 && ss[r-1] != 1 && ss[r-2] == 1:
		transposeBlocks(d, s, sh[:r], ss[:r], base)
	default:
		stridedInto(d, s, shape, st, base)
	}
}

// transposeBlocks moves the output's last two dimensions (A rows of B
// columns; the input holds column b's floats of rows a at stride 1 in a,
// ls apart in b) for each index of the outer dimensions.
func transposeBlocks(d, s []float32, shape, st []int, base int) {
	r := len(shape)
	A, B, ls := shape[r-2], shape[r-1], st[r-1]
	plane := A * B
	var ix [maxRank]int
	off := base
	for p := 0; p < len(d); p += plane {
		transpose2(d[p:p+plane], s, off, A, B, ls)
		for k := r - 3; k >= 0; k-- {
			ix[k]++
			off += st[k]
			if ix[k] < shape[k] {
				break
			}
			off -= st[k] * shape[k]
			ix[k] = 0
		}
	}
}

// transpose2 sets d[a*B+b] = s[off+a+b*ls] for a < A, b < B.
func transpose2(d, s []float32, off, A, B, ls int) {
	_ = d[A*B-1]
	b0 := 0
	for ; b0+8 <= B; b0 += 8 {
		s0 := s[off+b0*ls : off+b0*ls+A]
		s1 := s[off+(b0+1)*ls:][:len(s0)]
		s2 := s[off+(b0+2)*ls:][:len(s0)]
		s3 := s[off+(b0+3)*ls:][:len(s0)]
		s4 := s[off+(b0+4)*ls:][:len(s0)]
		s5 := s[off+(b0+5)*ls:][:len(s0)]
		s6 := s[off+(b0+6)*ls:][:len(s0)]
		s7 := s[off+(b0+7)*ls:][:len(s0)]
		for a := range s0 {
			o := (*[8]float32)(d[a*B+b0:])
			o[0], o[1], o[2], o[3] = s0[a], s1[a], s2[a], s3[a]
			o[4], o[5], o[6], o[7] = s4[a], s5[a], s6[a], s7[a]
		}
	}
	for ; b0 < B; b0++ {
		src := s[off+b0*ls : off+b0*ls+A]
		for a, v := range src {
			d[a*B+b0] = v
		}
	}
}
