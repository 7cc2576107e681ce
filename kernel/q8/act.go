package q8

import (
	"math"

	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/amd64"
	"github.com/vouchml/vouch/kernel/vmath"
)

// actFn is an activation the epilogue applies in place to each run of
// outputs it has just written (in cache), after the dequantization, the
// bias, the residual and the Relu: the float32 values of the unfused
// Elementwise part, element by element, so its bits.
type actFn func(v vmath.Vec, y []float32)

// SiLU: s = vmath.Sigmoid32(x), then the Mul's product in the model's
// operand order (x·s, or s·x with act_sigmoid_first, which decides only
// which NaN a NaN gives), as the Fused layer's SiLU epilogue computes it:
// amd64.SiLUZ 16 lanes at a time on AVX-512, else the Ctx's Vec Sigmoid
// and the product (TestQ8SiLU compares with the Sigmoid and Mul nodes).

// siluTab is amd64.SiLUZ's constant table (amd64.SiLUConsts documents
// its order): vmath's Exp32 constants, then 1, +Inf and the sign mask.
var siluTab = [amd64.SiLUConsts]float32{
	1.44269504088896341, -0.693359375, 2.12194440e-4,
	1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1,
	88.72283935546875, -87.33654475,
	1, float32(math.Inf(1)), float32(math.Copysign(0, -1)),
}

func siluXSZ(_ vmath.Vec, y []float32) { siluZ(y, false) }
func siluSXZ(_ vmath.Vec, y []float32) { siluZ(y, true) }
func siluXS(v vmath.Vec, y []float32)  { siluVec(v, y, false) }
func siluSX(v vmath.Vec, y []float32)  { siluVec(v, y, true) }

func siluZ(y []float32, sigFirst bool) {
	if len(y) > 0 {
		amd64.SiLUZ(&y[0], &y[0], len(y), &siluTab, sigFirst)
	}
}

func siluVec(v vmath.Vec, y []float32, sigFirst bool) {
	var buf [256]float32
	for i := 0; i < len(y); i += len(buf) {
		x := y[i:min(i+len(buf), len(y))]
		s := buf[:len(x)]
		v.Sigmoid32s(s, x)
		if sigFirst {
			for j, xv := range x {
				x[j] = s[j] * xv
			}
		} else {
			for j, xv := range x {
				x[j] = xv * s[j]
			}
		}
	}
}

// siluAct returns the SiLU activation for c's instruction set.
func siluAct(c *kernel.Ctx, sigFirst bool) actFn {
	switch {
	case c.AVX512() && amd64.EnabledZ && sigFirst:
		return siluSXZ
	case c.AVX512() && amd64.EnabledZ:
		return siluXSZ
	case sigFirst:
		return siluSX
	}
	return siluXS
}

// apply runs a on y (nothing when a is nil).
func (a actFn) apply(c twins, y []float32) {
	if a != nil {
		a(c.vec, y)
	}
}
