// Package ml implements the classical machine-learning operators of the
// ai.onnx.ml domain other than the tree ensembles (those are in
// kernel/tree): linear models, SVMs, scalers and encoders.
package ml

import "github.com/vouchml/vouch/kernel"

// Domain is the ONNX-ML operator domain.
const Domain = "ai.onnx.ml"

// Ops returns the operators, for domain Domain.
func Ops() kernel.Table { return kernel.Table{} }
