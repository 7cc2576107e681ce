// Package builtin assembles every operator family into the registry that
// vouch uses by default.
package builtin

import (
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/control"
	"github.com/vouchml/vouch/kernel/elementwise"
	"github.com/vouchml/vouch/kernel/fused"
	"github.com/vouchml/vouch/kernel/image"
	"github.com/vouchml/vouch/kernel/ml"
	"github.com/vouchml/vouch/kernel/nn"
	"github.com/vouchml/vouch/kernel/q8"
	"github.com/vouchml/vouch/kernel/reduce"
	"github.com/vouchml/vouch/kernel/rnn"
	"github.com/vouchml/vouch/kernel/sequence"
	"github.com/vouchml/vouch/kernel/shape"
	"github.com/vouchml/vouch/kernel/signal"
	"github.com/vouchml/vouch/kernel/text"
	"github.com/vouchml/vouch/kernel/tree"
)

// Registry returns a new registry with all of vouch's operators: ONNX's in
// the default domain, the compiler's fused layers in domain "vouch", the classical-ML
// operators in domain "ai.onnx.ml".
func Registry() *kernel.Registry {
	r := kernel.NewRegistry("",
		elementwise.Ops(),
		shape.Ops(),
		sequence.Ops(),
		nn.Ops(),
		reduce.Ops(),
		rnn.Ops(),
		control.Ops(),
		image.Ops(),
		signal.Ops(),
		text.Ops(),
	)
	r.Add(fused.Domain, fused.Ops(r))
	r.Add(fused.Domain, q8.Ops(r))
	r.Add(fused.Domain, nn.ScaleShiftOps())
	r.Add(ml.Domain, ml.Ops())
	r.Add(tree.Domain, tree.Ops())
	return r
}
