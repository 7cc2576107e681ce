package rnn

//go:generate sh -c "python3 gen_stepy.py > stepy_amd64.s"

// The fused path's AVX2 level (stepy_amd64.s, gen_stepy.py): one
// recurrent step of one, two or four rows over every block, stepPortable's
// operations eight lanes wide; chainRows8Y, chainRows8Z's chains.

//go:noescape
func stepLSTM1Y(p *stepArgs)

//go:noescape
func stepLSTM2Y(p *stepArgs)

//go:noescape
func stepLSTM4Y(p *stepArgs)

//go:noescape
func stepLSTMP1Y(p *stepArgs)

//go:noescape
func stepLSTMP2Y(p *stepArgs)

//go:noescape
func stepLSTMP4Y(p *stepArgs)

//go:noescape
func stepGRU1Y(p *stepArgs)

//go:noescape
func stepGRU2Y(p *stepArgs)

//go:noescape
func stepGRU4Y(p *stepArgs)

//go:noescape
func chainRows8Y(k int, xp *float32, b *float32, ldb int, y *float32, ldy int, n int)
