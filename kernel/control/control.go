// Package control implements ONNX's control-flow operators If, Loop and
// Scan on top of kernel.SubgraphRunner.
package control

import "github.com/vouchml/vouch/kernel"

// Ops returns the operators of this package.
func Ops() kernel.Table {
	return kernel.Table{}
}
