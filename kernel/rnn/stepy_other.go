//go:build !amd64

package rnn

func stepLSTM1Y(p *stepArgs)  { panic("rnn: stepLSTM1Y without AVX2") }
func stepLSTM2Y(p *stepArgs)  { panic("rnn: stepLSTM2Y without AVX2") }
func stepLSTMP1Y(p *stepArgs) { panic("rnn: stepLSTMP1Y without AVX2") }
func stepLSTMP2Y(p *stepArgs) { panic("rnn: stepLSTMP2Y without AVX2") }
func stepGRU1Y(p *stepArgs)   { panic("rnn: stepGRU1Y without AVX2") }
func stepGRU2Y(p *stepArgs)   { panic("rnn: stepGRU2Y without AVX2") }
func stepLSTM4Y(p *stepArgs)  { panic("rnn: stepLSTM4Y without AVX2") }
func stepLSTMP4Y(p *stepArgs) { panic("rnn: stepLSTMP4Y without AVX2") }
func stepGRU4Y(p *stepArgs)   { panic("rnn: stepGRU4Y without AVX2") }

func chainRows8Y(k int, xp *float32, b *float32, ldb int, y *float32, ldy int, n int) {
	panic("rnn: chainRows8Y without AVX2")
}
