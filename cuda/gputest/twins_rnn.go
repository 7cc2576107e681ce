//go:build cuda

package gputest

import (
	"fmt"

	"github.com/vouchml/vouch/cuda"
	"github.com/vouchml/vouch/cuda/exact"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/kernel/rnn"
	"github.com/vouchml/vouch/tensor"
)

func init() { extraTwins = append(extraTwins, func(s *suite) error { return s.rnns() }) }

// rnnTwin is one recurrent node with its inputs.
type rnnTwin struct {
	n    *ir.Node
	in   []*tensor.Tensor
	name string
}

// rnnSpec chooses a node; zero values are the defaults.
type rnnSpec struct {
	op, dir                string
	seq, batch, in, hidden int
	layout                 int
	lbr, coupled           bool
	clip                   float32
	acts                   []string
	b, lens, h0, c0, p     bool
	special                float64 // the fraction of special values in X and the states
}

func (s *suite) rnnTwin(c rnnSpec) rnnTwin {
	dirs := 1
	if c.dir == "bidirectional" {
		dirs = 2
	}
	gates := map[string]int{"RNN": 1, "GRU": 3, "LSTM": 4}[c.op]
	n := &ir.Node{OpType: c.op, Version: 14, Attrs: map[string]*ir.Attr{}, Outputs: []string{"y", "yh", "yc"}}
	set := func(a *ir.Attr) { n.Attrs[a.Name] = a }
	set(&ir.Attr{Name: "direction", Kind: ir.AttrString, S: c.dir})
	set(&ir.Attr{Name: "hidden_size", Kind: ir.AttrInt, I: int64(c.hidden)})
	set(intAttr("layout", c.layout))
	name := fmt.Sprintf("%s %s s%d b%d i%d h%d", c.op, c.dir, c.seq, c.batch, c.in, c.hidden)
	if c.layout == 1 {
		name += " layout1"
	}
	if c.op == "GRU" && c.lbr {
		set(intAttr("linear_before_reset", 1))
		name += " lbr"
	}
	if c.coupled {
		set(intAttr("input_forget", 1))
		name += " coupled"
	}
	if c.clip > 0 {
		set(floatAttr("clip", c.clip))
		name += fmt.Sprintf(" clip%.2g", c.clip)
	}
	if c.acts != nil {
		set(&ir.Attr{Name: "activations", Kind: ir.AttrStrings, Strings: c.acts})
		var alpha, beta []float32
		for range c.acts {
			alpha, beta = append(alpha, 0.2+s.r.Float32()), append(beta, s.r.Float32()-0.5)
		}
		set(&ir.Attr{Name: "activation_alpha", Kind: ir.AttrFloats, Floats: alpha})
		set(&ir.Attr{Name: "activation_beta", Kind: ir.AttrFloats, Floats: beta})
		name += fmt.Sprintf(" %v", c.acts)
	}
	xs, st := []int{c.seq, c.batch, c.in}, []int{dirs, c.batch, c.hidden}
	if c.layout == 1 {
		xs, st = []int{c.batch, c.seq, c.in}, []int{c.batch, dirs, c.hidden}
	}
	G := gates * c.hidden
	in := []*tensor.Tensor{
		tensor.From(s.data(c.seq*c.batch*c.in, 1, c.special), xs...),
		tensor.From(s.data(dirs*G*c.in, 0.25, 0), dirs, G, c.in),
		tensor.From(s.data(dirs*G*c.hidden, 0.25, 0), dirs, G, c.hidden),
		nil, nil, nil, nil, nil,
	}
	if c.b {
		in[3] = tensor.From(s.data(dirs*2*G, 0.5, 0), dirs, 2*G)
		name += " +B"
	}
	if c.lens {
		l := make([]int32, c.batch)
		for i := range l {
			l[i] = int32(s.r.Intn(c.seq + 1))
		}
		in[4] = tensor.From(l, c.batch)
		name += fmt.Sprintf(" lens%v", l)
	}
	if c.h0 {
		in[5] = tensor.From(s.data(dirs*c.batch*c.hidden, 1, c.special), st...)
		name += " +h0"
	}
	if c.op == "LSTM" {
		if c.c0 {
			in[6] = tensor.From(s.data(dirs*c.batch*c.hidden, 1, c.special), st...)
			name += " +c0"
		}
		if c.p {
			in[7] = tensor.From(s.data(dirs*3*c.hidden, 0.5, 0), dirs, 3*c.hidden)
			name += " +P"
		}
	} else {
		in = in[:6]
	}
	return rnnTwin{n: n, in: in, name: name}
}

// randomSpec: the operators and directions, hidden 1..129 and input sizes
// odd, seq 1..40, batch 1..5, the optional inputs, clip,
// linear_before_reset, input_forget, other activations.
func (s *suite) randomSpec() rnnSpec {
	c := rnnSpec{op: []string{"LSTM", "GRU", "RNN"}[s.r.Intn(3)], dir: []string{"forward", "reverse", "bidirectional"}[s.r.Intn(3)],
		seq: 1 + s.r.Intn(40), batch: 1 + s.r.Intn(5), in: 1 + 2*s.r.Intn(40), hidden: 1 + 2*s.r.Intn(65), layout: s.r.Intn(2),
		lbr: s.r.Intn(2) == 0, coupled: s.r.Intn(5) == 0, b: s.r.Intn(4) != 0, lens: s.r.Intn(3) == 0, h0: s.r.Intn(2) == 0,
		c0: s.r.Intn(2) == 0, p: s.r.Intn(2) == 0, special: 0.003}
	if s.r.Intn(4) == 0 {
		c.clip = 0.3 + 3*s.r.Float32()
	}
	if s.r.Intn(3) == 0 {
		names := []string{"Sigmoid", "Tanh", "Relu", "Affine", "LeakyRelu", "ThresholdedRelu", "ScaledTanh", "HardSigmoid", "Elu", "Softsign", "Softplus"}
		per := map[string]int{"RNN": 1, "GRU": 2, "LSTM": 3}[c.op]
		if c.dir == "bidirectional" {
			per *= 2
		}
		for range per {
			c.acts = append(c.acts, names[s.r.Intn(len(names))])
		}
	}
	return c
}

// rnns checks LSTM, GRU and RNN against kernel/rnn: the zoo's cells at
// their sizes, random nodes, and a CUDA graph's replay of one.
func (s *suite) rnns() error {
	specs := []rnnSpec{
		{op: "LSTM", dir: "forward", seq: 32, batch: 1, in: 64, hidden: 128, b: true, h0: true, c0: true},
		{op: "LSTM", dir: "bidirectional", seq: 32, batch: 1, in: 64, hidden: 128, b: true, h0: true, c0: true},
		{op: "LSTM", dir: "bidirectional", seq: 32, batch: 1, in: 256, hidden: 512, b: true, h0: true, c0: true},
		{op: "LSTM", dir: "forward", seq: 100, batch: 1, in: 40, hidden: 256, b: true, h0: true, c0: true},
		{op: "GRU", dir: "forward", seq: 32, batch: 1, in: 64, hidden: 128, lbr: true, b: true, h0: true},
		{op: "GRU", dir: "bidirectional", seq: 32, batch: 1, in: 128, hidden: 256, lbr: true, b: true, h0: true},
		// Every special value in X and the states, batch rows of other lengths.
		{op: "LSTM", dir: "bidirectional", seq: 9, batch: 5, in: 17, hidden: 33, b: true, lens: true, h0: true, c0: true, p: true, special: 0.05},
		{op: "GRU", dir: "reverse", seq: 7, batch: 4, in: 9, hidden: 65, b: true, lens: true, h0: true, special: 0.05},
		{op: "RNN", dir: "forward", seq: 11, batch: 3, in: 5, hidden: 129, layout: 1, b: true, h0: true, special: 0.05},
	}
	for i := 0; i < 4*s.cfg.Cases; i++ {
		specs = append(specs, s.randomSpec())
	}
	for i, c := range specs {
		if err := s.rnnOne(s.rnnTwin(c), i == 6); err != nil {
			return err
		}
	}
	return nil
}

// rnnOne runs one node on the GPU and the CPU and records each output;
// with graph, also a CUDA graph of the GPU run, replayed twice.
func (s *suite) rnnOne(c rnnTwin, graph bool) error {
	k, err := builtin.Registry().Lookup(c.n)
	if err != nil {
		return err
	}
	cpu, err := k.Run(&kernel.Ctx{}, c.n, c.in)
	if err != nil {
		return fmt.Errorf("gputest: CPU %s: %w", c.name, err)
	}
	geo, lens, err := rnn.Setup(c.n, c.in)
	if err != nil {
		return err
	}
	g, err := exact.RNNGeomOf(geo)
	if err != nil {
		return err
	}
	var bufs []*cuda.Buffer
	defer func() {
		for _, b := range bufs {
			b.Free()
		}
	}()
	up := func(i int) (uint64, error) {
		if i >= len(c.in) || c.in[i] == nil {
			return 0, nil
		}
		b, err := s.dev(f32(c.in[i]))
		if err != nil {
			return 0, err
		}
		bufs = append(bufs, b)
		return b.Ptr, nil
	}
	var b exact.RNNBuffers
	for i, p := range []*uint64{&b.X, &b.W, &b.R, &b.B, nil, &b.H0, &b.C0, &b.P} {
		if p == nil {
			continue
		}
		if *p, err = up(i); err != nil {
			return err
		}
	}
	steps := g.Seq
	if c.in[4] != nil {
		steps = 0
		l32 := make([]int32, len(lens))
		for i, L := range lens {
			steps, l32[i] = max(steps, L), int32(L)
		}
		lb, err := s.c.Alloc(uint64(max(len(l32), 1)) * 4)
		if err != nil {
			return err
		}
		bufs = append(bufs, lb)
		if err := s.c.UploadInt32(lb, l32); err != nil {
			return err
		}
		b.Lens = lb.Ptr
	}
	wk, err := s.c.Alloc(uint64(max(g.WorkLen(), 1)) * 4)
	if err != nil {
		return err
	}
	bufs = append(bufs, wk)
	b.Work = wk.Ptr
	sizes := []int{g.YLen(), g.StateLen(), g.StateLen()}[:len(cpu)]
	outs := make([]*cuda.Buffer, len(sizes))
	for i, n := range sizes {
		if outs[i], err = s.out(n); err != nil {
			return err
		}
		bufs = append(bufs, outs[i])
	}
	b.Y, b.YH = outs[0].Ptr, outs[1].Ptr
	if len(outs) > 2 {
		b.YC = outs[2].Ptr
	}
	if err := s.e.RNN(nil, g, b, steps); err != nil {
		return fmt.Errorf("gputest: %s: %w", c.name, err)
	}
	for i, o := range outs {
		got, err := s.fetch(o, sizes[i])
		if err != nil {
			return err
		}
		s.record(fmt.Sprintf("%s %s", c.name, []string{"Y", "Y_h", "Y_c"}[i]), got, f32(cpu[i]), false)
	}
	if !graph {
		return nil
	}
	st, err := s.c.NewStream()
	if err != nil {
		return err
	}
	defer st.Destroy()
	gr, err := s.c.Capture(st, func() error { return s.e.RNN(st, g, b, steps) })
	if err != nil {
		return err
	}
	defer gr.Destroy()
	for rep := 0; rep < 2; rep++ {
		for i, o := range outs {
			if err := s.c.Fill32(st, o.Ptr, 0x7fbadbad, uint64(max(sizes[i], 1))); err != nil {
				return err
			}
		}
		if err := gr.Launch(st); err != nil {
			return err
		}
		if err := st.Synchronize(); err != nil {
			return err
		}
		for i, o := range outs {
			got, err := s.fetch(o, sizes[i])
			if err != nil {
				return err
			}
			s.record(fmt.Sprintf("CUDA graph replay %d: %s %s", rep+1, c.name, []string{"Y", "Y_h", "Y_c"}[i]), got, f32(cpu[i]), false)
		}
	}
	return nil
}
