package elementwise

import (
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/amd64"
	"github.com/vouchml/vouch/tensor"
)

// hardSigmoidInto is HardSigmoid's Into for float32: hardSigmoidLoop's
// operations, 16 lanes at a time through amd64.HardSigmoidZ where the Ctx
// allows AVX-512 (MobileNetV3's HardSwish is HardSigmoid then Mul, in
// every block), the scalar loop for the rest and elsewhere; the same bits
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
		if c.AVX512() && amd64.EnabledZ {
			a, b := n.Float("alpha", 0.2), n.Float("beta", 0.5)
			for m := len(x) &^ 15; m > 0; m = len(x) &^ 15 {
				k := amd64.HardSigmoidZ(&x[0], &d[0], m, a, b)
				x, d = x[k:], d[k:]
				if k < m { // a group with a NaN: Go's min and max
					hardSigmoidLoop(n, d[:16], x[:16])
					x, d = x[16:], d[16:]
				}
			}
		}
		hardSigmoidLoop(n, d, x)
		return nil
	}
}
