package amd64

// LaneMasks8 holds, for each 8-bit lane mask m, the AVX2 vector mask of
// its lanes: LaneMasks8[m][l] is -1 (all bits set) where bit l of m is
// set, else 0. The 8-lane kernels read their per-vector masks from it
// (VMASKMOVPS, VBLENDVPS and VGATHERDPS take vector masks). Read only.
var LaneMasks8 = func() (t [256][8]int32) {
	for m := range t {
		for l := range t[m] {
			if m>>l&1 != 0 {
				t[m][l] = -1
			}
		}
	}
	return t
}()
