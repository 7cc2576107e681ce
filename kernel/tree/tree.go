// Package tree implements the tree-ensemble operators of the ai.onnx.ml
// domain (TreeEnsembleClassifier, TreeEnsembleRegressor, TreeEnsemble).
package tree

import "github.com/vouchml/vouch/kernel"

// Domain is the ONNX-ML operator domain.
const Domain = "ai.onnx.ml"

// Ops returns the tree-ensemble operators, for domain Domain.
func Ops() kernel.Table { return kernel.Table{} }
