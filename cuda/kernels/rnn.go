package kernels

// RNNKernels are the entry points of rnn.cu (LSTM, GRU, RNN).
var RNNKernels = []string{}
