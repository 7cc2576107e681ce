package rnn

//go:generate sh -c "python3 gen_step.py > step_amd64.s"

// The fused steps (step_amd64.s, gen_step.py): one recurrent step of rows
// 1-4 over every block, stepPortable's operations (AVX-512F).

//go:noescape
func stepLSTM1Z(p *stepArgs)

//go:noescape
func stepLSTM2Z(p *stepArgs)

//go:noescape
func stepLSTM3Z(p *stepArgs)

//go:noescape
func stepLSTM4Z(p *stepArgs)

//go:noescape
func stepLSTMP1Z(p *stepArgs)

//go:noescape
func stepLSTMP2Z(p *stepArgs)

//go:noescape
func stepLSTMP3Z(p *stepArgs)

//go:noescape
func stepLSTMP4Z(p *stepArgs)

//go:noescape
func stepGRU1Z(p *stepArgs)

//go:noescape
func stepGRU2Z(p *stepArgs)

//go:noescape
func stepGRU3Z(p *stepArgs)

//go:noescape
func stepGRU4Z(p *stepArgs)
