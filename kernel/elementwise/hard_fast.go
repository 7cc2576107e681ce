package elementwise

import (
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/amd64"
	"github.com/vouchml/vouch/kernel/vmath"
	"github.com/vouchml/vouch/tensor"
)

// hardSigmoidInto is HardSigmoid's Into for float32: hardSigmoidLoop's
// operations, 16 lanes at a time through amd64.HardSigmoidZ where the Ctx
// allows AVX-512, 8 through amd64.HardSigmoidY where it allows AVX2
// (MobileNetV3's HardSwish is HardSigmoid then Mul, in every block), the
// scalar loop for the groups holding a NaN and elsewhere; the same bits
// (TestHardSigmoidTwins).
func hardSigmoidInto(run kernel.RunFunc) kernel.IntoFunc {
	return func(c *kernel.Ctx, n *ir.Node, in, out []*tensor.Tensor) error {
		if err := need("HardSigmoid", in, 1); err != nil {
			return err
		}
		o, err := outOf("HardSigmoid", out)
		if err != nil {
			return err
		}
		x, ok1 := in[0].Data.([]float32)
		d, ok2 := o.Data.([]float32)
		if !ok1 || !ok2 || len(d) != len(x) {
			return viaRun(run, c, n, in, out)
		}
		a, b := n.Float("alpha", 0.2), n.Float("beta", 0.5)
		switch {
		case c.AVX512() && amd64.EnabledZ:
			for m := len(x) &^ 15; m > 0; m = len(x) &^ 15 {
				k := amd64.HardSigmoidZ(&x[0], &d[0], m, a, b)
				x, d = x[k:], d[k:]
				if k < m { // a group with a NaN: Go's min and max
					hardSigmoidLoop(n, d[:16], x[:16])
					x, d = x[16:], d[16:]
				}
			}
		case c.AVX2() && amd64.Enabled:
			for len(x) > 0 {
				k := amd64.HardSigmoidY(&x[0], &d[0], len(x), a, b)
				x, d = x[k:], d[k:]
				if m := min(8, len(x)); m > 0 { // a group with a NaN
					hardSigmoidLoop(n, d[:m], x[:m])
					x, d = x[m:], d[m:]
				}
			}
		}
		hardSigmoidLoop(n, d, x)
		return nil
	}
}

// hardSwish32 is HardSwish (opset 14) on float32: x·HardSigmoid(x) with
// alpha 1/6 and beta 0.5, Go's min and max, x the product's first operand.
func hardSwish32(x float32) float32 { return x * max(0, min(1, float32(x*(1.0/6))+0.5)) }

// hardSwishVec is HardSwish's slice form: amd64.HardSwishY 8 lanes at a
// time where v is not the portable Vec (an AVX2 or AVX-512 Ctx's: the
// same operations, so hardSwish32's bits), hardSwish32 for the groups of
// 8 holding a NaN and elsewhere (TestVectorTwins).
func hardSwishVec(v vmath.Vec, d, x []float32) {
	d = d[:len(x)]
	if !v.Portable() && amd64.Enabled {
		for len(x) > 0 {
			k := amd64.HardSwishY(&x[0], &d[0], len(x), 1.0/6, 0.5)
			x, d = x[k:], d[k:]
			m := min(8, len(x)) // a group with a NaN: Go's min and max
			for i, xv := range x[:m] {
				d[i] = hardSwish32(xv)
			}
			x, d = x[m:], d[m:]
		}
		return
	}
	for i, xv := range x {
		d[i] = hardSwish32(xv)
	}
}
