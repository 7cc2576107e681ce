package kernels

// Entry points of rnn.cu (LSTM, GRU, RNN: kernel/rnn's float32 chains).
const (
	RNNStart     = "vx_rnn_start"
	RNNProj      = "vx_rnn_proj"
	RNNStep      = "vx_rnn_step"
	RNNGRUHidden = "vx_rnn_gru_hh"
	RNNFinal     = "vx_rnn_final"
)

// RNNKernels are the entry points of rnn.cu (LSTM, GRU, RNN).
var RNNKernels = []string{RNNStart, RNNProj, RNNStep, RNNGRUHidden, RNNFinal}
