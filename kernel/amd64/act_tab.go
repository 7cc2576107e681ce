package amd64

import "math"

// SiLUConsts is the length of SiLUZ's constant table: Exp32's constants
// (package vmath) in the order log2e, -ln2Hi, -ln2Lo, its polynomial's
// six coefficients (highest degree first), expMax, expMin, then 1, +Inf
// and -0 (the sign mask), each as the scalar function has it.
const SiLUConsts = 14

// SiLUTab is SiLUZ's constant table: vmath's Exp32 constants as float32
// literals of the same values (kernel/fused's TestSiLUAct and kernel/q8's
// TestQ8SiLU compare SiLUZ with vmath.Sigmoid32 itself), then 1, +Inf and
// the sign mask. Every caller of SiLUZ passes &SiLUTab; it is never
// written.
var SiLUTab = [SiLUConsts]float32{
	1.44269504088896341, // log2e
	-0.693359375,        // -ln2Hi
	2.12194440e-4,       // -ln2Lo
	1.9875691500e-4,     // Exp32's polynomial, highest degree first
	1.3981999507e-3,
	8.3334519073e-3,
	4.1665795894e-2,
	1.6666665459e-1,
	5.0000001201e-1,
	88.72283935546875, // expMax
	-87.33654475,      // expMin
	1,
	float32(math.Inf(1)),
	float32(math.Copysign(0, -1)), // the sign mask: -0
}
