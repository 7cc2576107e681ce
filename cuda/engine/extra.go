package engine

import (
	"github.com/vouchml/vouch/ir"
)

// extraKernel places the op families whose GPU code lives in their own
// files (elementwise.go, convt.go, rnn.go). ok reports whether the family
// decided; when it did not, Place's main switch does.
func extraKernel(n *ir.Node, g *ir.Graph, types map[string]ir.Type) (kernel, reason string, ok bool) {
	for _, f := range families {
		if k, why, ok := f.place(n, g, types); ok {
			return k, why, true
		}
	}
	return "", "", false
}

// extraGPU runs a layer of one of those families; ok is false when none
// of them runs n.
func (s *state) extraGPU(n *ir.Node) (ok bool, err error) {
	if ok, err := s.runHost(n); ok {
		return true, err
	}
	for _, f := range families {
		if f.run == nil {
			continue
		}
		if ok, err := f.run(s, n); ok {
			return true, err
		}
	}
	return false, nil
}

// family is one op family's placement rule and runner (nil: the family's
// layers run before the families, in runHost).
type family struct {
	place func(n *ir.Node, g *ir.Graph, types map[string]ir.Type) (kernel, reason string, ok bool)
	run   func(s *state, n *ir.Node) (ok bool, err error)
}

// families are consulted in order; each file adds its own in an init.
var families []family
