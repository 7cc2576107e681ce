package nn

// A float32 1-D convolution (a Conv1d network's: TCNs, ECG and audio
// CNNs) runs on the fast kernels as one row of a 2-D convolution: the
// geometry [L] becomes [1, L], its kernel [K] the kernel [1, K]. The row's
// im2col rows are (channel, ky = 0, kx) in the 1-D matrix's (channel, kx)
// order and read the same input values (padding as +0), so every output is
// the same FMA chain over the same k order: the bits of the portable 1-D
// path (im2col + sgemmP), which is its twin. Measured on the zoo's tcn1d
// (64 channels, 4,000 steps, kernel 3, dilations 1-16), the generic
// im2col's element-by-element tables dominated before.

// rowView returns s as a 2-D convolution of height 1 (its own setup, so
// that conv.direct's packed weights are kept with it), or nil when s is
// not 1-D.
func rowView(s *convSetup) *convSetup {
	g := s.g
	if len(g.in) != 1 {
		return nil
	}
	r := &convSetup{N: s.N, C: s.C, M: s.M, G: s.G, Cg: s.Cg, Mg: s.Mg, tactic: s.tactic}
	r.g = &geom{in: []int{1, g.in[0]}, k: []int{1, g.k[0]}, out: []int{1, g.out[0]}, stride: []int{1, g.stride[0]},
		dil: []int{1, g.dil[0]}, padB: []int{0, g.padB[0]}, padE: []int{0, g.padE[0]}}
	return r
}

// conv1DRow reports whether convF32 runs s through its row view on pool:
// the vector kernels, and not a depthwise convolution (those have their
// own 1-D kernels).
func conv1DRow(pool machine, s *convSetup) bool {
	return pool.fast && s.row != nil && !(s.Cg == 1 && s.Mg == 1)
}
