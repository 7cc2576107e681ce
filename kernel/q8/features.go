package q8

// Features lists the CPU features the int8/fp16 vector kernels use on
// this machine (recorded in a reduced-precision plan; the portable twins
// run without them, with the same bits).
func Features() []string {
	var f []string
	if hasAVX2 {
		f = append(f, "avx", "avx2")
	}
	if hasF16C {
		f = append(f, "f16c")
	}
	if hasVNNI {
		f = append(f, "avx512f", "avx512vl", "avx512vnni")
	}
	if hasDirect {
		f = append(f, "avx512bw")
	}
	return f
}
