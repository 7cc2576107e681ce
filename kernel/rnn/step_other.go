//go:build !amd64

package rnn

func stepLSTM1Z(p *stepArgs)  { panic("rnn: stepLSTM1Z without AVX-512") }
func stepLSTM2Z(p *stepArgs)  { panic("rnn: stepLSTM2Z without AVX-512") }
func stepLSTM3Z(p *stepArgs)  { panic("rnn: stepLSTM3Z without AVX-512") }
func stepLSTM4Z(p *stepArgs)  { panic("rnn: stepLSTM4Z without AVX-512") }
func stepLSTMP1Z(p *stepArgs) { panic("rnn: stepLSTMP1Z without AVX-512") }
func stepLSTMP2Z(p *stepArgs) { panic("rnn: stepLSTMP2Z without AVX-512") }
func stepLSTMP3Z(p *stepArgs) { panic("rnn: stepLSTMP3Z without AVX-512") }
func stepLSTMP4Z(p *stepArgs) { panic("rnn: stepLSTMP4Z without AVX-512") }
func stepGRU1Z(p *stepArgs)   { panic("rnn: stepGRU1Z without AVX-512") }
func stepGRU2Z(p *stepArgs)   { panic("rnn: stepGRU2Z without AVX-512") }
func stepGRU3Z(p *stepArgs)   { panic("rnn: stepGRU3Z without AVX-512") }
func stepGRU4Z(p *stepArgs)   { panic("rnn: stepGRU4Z without AVX-512") }
