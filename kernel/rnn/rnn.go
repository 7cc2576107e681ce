// Package rnn implements ONNX's recurrent operators: RNN, GRU and LSTM.
package rnn

import "github.com/vouchml/vouch/kernel"

// Ops returns the operators of this package.
func Ops() kernel.Table {
	return kernel.Table{}
}
