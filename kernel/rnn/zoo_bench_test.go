package rnn

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/tensor"
)

// zooShapes are the recurrent layers of the zoo's models (make-zoo.py):
// op, directions, steps, input, hidden.
var zooShapes = []struct {
	name                  string
	op                    string
	dirs, seq, in, hidden int
}{
	{"lstm_64x128", "LSTM", 1, 32, 64, 128},
	{"lstm_128x256", "LSTM", 1, 32, 128, 256},
	{"lstm_256x256", "LSTM", 1, 32, 256, 256},
	{"lstm_40x256s100", "LSTM", 1, 100, 40, 256},
	{"bilstm_64x128", "LSTM", 2, 32, 64, 128},
	{"bilstm_256x512", "LSTM", 2, 32, 256, 512},
	{"bilstm_1024x512", "LSTM", 2, 32, 1024, 512},
	{"gru_64x128", "GRU", 1, 32, 64, 128},
	{"bigru_128x256", "GRU", 2, 32, 128, 256},
	{"bigru_512x256", "GRU", 2, 32, 512, 256},
}

// BenchmarkZoo runs each zoo layer through the packed tactic with a
// State (the weights packed once), at batch 1 and 8, on 1 and 2 workers.
func BenchmarkZoo(b *testing.B) {
	r := rand.New(rand.NewSource(1))
	for _, s := range zooShapes {
		for _, batch := range []int{1, 8} {
			for _, w := range []int{1, 2} {
				b.Run(fmt.Sprintf("%s/b%d/w%d", s.name, batch, w), func(b *testing.B) {
					in := inputs(r, s.op, s.dirs, s.seq, batch, s.in, s.hidden)
					if s.op == "LSTM" {
						in = in[:7]
					}
					dir := "forward"
					if s.dirs == 2 {
						dir = "bidirectional"
					}
					attrs := []*ir.Attr{intA("hidden_size", int64(s.hidden)), str("direction", dir), str(kernel.TacticAttr, TacticPacked)}
					if s.op == "GRU" {
						attrs = append(attrs, intA("linear_before_reset", 1))
					}
					n := node(s.op, attrs...)
					kc := &kernel.Ctx{State: new(kernel.State)}
					if w > 1 {
						kc.Pool = parallel.New(w)
						defer kc.Pool.Close()
					}
					run := func() []*tensor.Tensor {
						out, err := Ops()[s.op].Run(kc, n, in)
						if err != nil {
							b.Fatal(err)
						}
						return out
					}
					run()
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						run()
					}
				})
			}
		}
	}
}
