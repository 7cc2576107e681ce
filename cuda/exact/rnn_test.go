package exact

import (
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/rnn"
	"github.com/vouchml/vouch/tensor"
)

// rnnCase is one recurrent node with its inputs.
type rnnCase struct {
	n  *ir.Node
	in []*tensor.Tensor
}

func (c rnnCase) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s x%v", c.n.OpType, c.in[0].Shape)
	for _, k := range []string{"direction", "hidden_size", "layout", "linear_before_reset", "input_forget", "clip", "activations"} {
		if a := c.n.Attrs[k]; a != nil {
			switch a.Kind {
			case ir.AttrString:
				fmt.Fprintf(&b, " %s=%s", k, a.S)
			case ir.AttrInt:
				fmt.Fprintf(&b, " %s=%d", k, a.I)
			case ir.AttrFloat:
				fmt.Fprintf(&b, " %s=%g", k, a.F)
			case ir.AttrStrings:
				fmt.Fprintf(&b, " %s=%v", k, a.Strings)
			}
		}
	}
	for i, name := range []string{"B", "lens", "h0", "c0", "P"} {
		if t := kernel.Input(c.in, 3+i); t != nil {
			b.WriteString(" +" + name)
		}
	}
	return b.String()
}

// randomRNN is a random recurrent node: any operator, direction and
// layout, odd sizes, optional inputs, clip, linear_before_reset,
// input_forget and other activations; values with a sprinkling of NaN,
// ±Inf, ±0 and subnormals in X and the states.
func randomRNN(r *rand.Rand) rnnCase {
	op := []string{"LSTM", "GRU", "RNN"}[r.Intn(3)]
	dir := []string{"forward", "reverse", "bidirectional"}[r.Intn(3)]
	dirs := 1
	if dir == "bidirectional" {
		dirs = 2
	}
	gates := map[string]int{"RNN": 1, "GRU": 3, "LSTM": 4}[op]
	seq, batch, in, hid := 1+r.Intn(12), 1+r.Intn(5), 1+2*r.Intn(20), 1+2*r.Intn(40)
	layout := r.Intn(2)
	n := &ir.Node{OpType: op, Version: 14, Attrs: map[string]*ir.Attr{}, Outputs: []string{"y", "yh", "yc"}}
	set := func(a *ir.Attr) { n.Attrs[a.Name] = a }
	set(&ir.Attr{Name: "direction", Kind: ir.AttrString, S: dir})
	set(&ir.Attr{Name: "hidden_size", Kind: ir.AttrInt, I: int64(hid)})
	if layout == 1 {
		set(&ir.Attr{Name: "layout", Kind: ir.AttrInt, I: 1})
	}
	if op == "GRU" {
		set(&ir.Attr{Name: "linear_before_reset", Kind: ir.AttrInt, I: int64(r.Intn(2))})
	}
	if op == "LSTM" && r.Intn(4) == 0 {
		set(&ir.Attr{Name: "input_forget", Kind: ir.AttrInt, I: 1})
	}
	if r.Intn(4) == 0 {
		set(&ir.Attr{Name: "clip", Kind: ir.AttrFloat, F: 0.25 + 2*r.Float32()})
	}
	if r.Intn(3) == 0 {
		names := []string{"Sigmoid", "Tanh", "Relu", "Affine", "LeakyRelu", "ThresholdedRelu", "ScaledTanh", "HardSigmoid", "Elu", "Softsign", "Softplus"}
		var acts []string
		var alpha, beta []float32
		for range dirs * (gates/2 + 1) { // 1, 2 (GRU: 3/2+1), 3 per direction
			acts = append(acts, names[r.Intn(len(names))])
			alpha = append(alpha, r.Float32()*1.5)
			beta = append(beta, r.Float32()-0.5)
		}
		if op == "GRU" {
			acts = acts[:2*dirs]
		}
		set(&ir.Attr{Name: "activations", Kind: ir.AttrStrings, Strings: acts})
		set(&ir.Attr{Name: "activation_alpha", Kind: ir.AttrFloats, Floats: alpha[:r.Intn(len(alpha)+1)]})
		set(&ir.Attr{Name: "activation_beta", Kind: ir.AttrFloats, Floats: beta[:r.Intn(len(beta)+1)]})
	}
	specials := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)),
		math.Float32frombits(1), math.Float32frombits(0x80000003), 1e-39, 30, -30}
	vals := func(n int, scale, special float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			if r.Float64() < special {
				v[i] = specials[r.Intn(len(specials))]
			} else {
				v[i] = float32(r.NormFloat64() * scale)
			}
		}
		return v
	}
	xs := []int{seq, batch, in}
	st := []int{dirs, batch, hid}
	if layout == 1 {
		xs = []int{batch, seq, in}
		st = []int{batch, dirs, hid}
	}
	G := gates * hid
	ins := []*tensor.Tensor{
		tensor.From(vals(seq*batch*in, 1, 0.01), xs...),
		tensor.From(vals(dirs*G*in, 0.3, 0.002), dirs, G, in),
		tensor.From(vals(dirs*G*hid, 0.3, 0.002), dirs, G, hid),
		nil, nil, nil, nil, nil,
	}
	if r.Intn(4) != 0 {
		ins[3] = tensor.From(vals(dirs*2*G, 0.5, 0), dirs, 2*G)
	}
	if r.Intn(3) == 0 {
		lens := make([]int32, batch)
		for i := range lens {
			lens[i] = int32(r.Intn(seq + 1))
		}
		ins[4] = tensor.From(lens, batch)
	}
	if r.Intn(2) == 0 {
		ins[5] = tensor.From(vals(dirs*batch*hid, 1, 0.01), st...)
	}
	if op == "LSTM" {
		if r.Intn(2) == 0 {
			ins[6] = tensor.From(vals(dirs*batch*hid, 1, 0.01), st...)
		}
		if r.Intn(2) == 0 {
			ins[7] = tensor.From(vals(dirs*3*hid, 0.5, 0), dirs, 3*hid)
		}
	} else {
		ins = ins[:6]
	}
	return rnnCase{n: n, in: ins}
}

func f32s(t *tensor.Tensor) []float32 {
	if t == nil {
		return nil
	}
	return t.Data.([]float32)
}

// hostOf runs c through the GPU kernels' host model.
func hostOf(c rnnCase) (y, yh, yc []float32, err error) {
	rg, lens, err := rnn.Setup(c.n, c.in)
	if err != nil {
		return nil, nil, nil, err
	}
	g, err := RNNGeomOf(rg)
	if err != nil {
		return nil, nil, nil, err
	}
	if kernel.Input(c.in, 4) == nil {
		lens = nil
	}
	hi := RNNHostInputs{X: f32s(c.in[0]), W: f32s(c.in[1]), R: f32s(c.in[2]), B: f32s(c.in[3]), H0: f32s(c.in[5]), Lens: lens}
	if g.Kind == CellLSTM {
		hi.C0, hi.P = f32s(kernel.Input(c.in, 6)), f32s(kernel.Input(c.in, 7))
	}
	return g.Host(hi)
}

// sameBits reports the first index where a and b differ (a NaN meets any
// NaN: payloads are unspecified), or -1.
func sameBits(a, b []float32) int {
	if len(a) != len(b) {
		return 0
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) && !(a[i] != a[i] && b[i] != b[i]) {
			return i
		}
	}
	return -1
}

// TestRNNHostMatchesCPU: the GPU kernels' arithmetic (RNNGeom.Host, their
// launches thread by thread) gives kernel/rnn's bits, at the CPU's best
// instruction set (the fused AVX-512 path where it applies) and portable.
func TestRNNHostMatchesCPU(t *testing.T) {
	r := rand.New(rand.NewSource(14))
	for i := 0; i < 300; i++ {
		c := randomRNN(r)
		y, yh, yc, err := hostOf(c)
		if err != nil {
			t.Fatalf("case %d %v: %v", i, c, err)
		}
		for _, isa := range []kernel.ISA{kernel.ISABest, kernel.ISAPortable} {
			out, err := rnn.Ops()[c.n.OpType].Run(&kernel.Ctx{ISA: isa}, c.n, c.in)
			if err != nil {
				t.Fatalf("case %d %v: CPU: %v", i, c, err)
			}
			got := [][]float32{y, yh, yc}
			for o := range out {
				if k := sameBits(got[o], f32s(out[o])); k >= 0 {
					t.Fatalf("case %d %v (ISA %v): output %d differs at %d: host %#08x, CPU %#08x", i, c, isa, o, k,
						math.Float32bits(got[o][k]), math.Float32bits(f32s(out[o])[k]))
				}
			}
			if c.n.OpType != "LSTM" && yc != nil {
				t.Fatalf("case %d: Y_c for %s", i, c.n.OpType)
			}
		}
	}
}

// The zoo's cells (PyTorch's exports: default activations, no clip) at
// their sizes, shortened: the fused CPU path.
func TestRNNHostZooCells(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	for _, c := range []struct {
		op, dir    string
		in, hidden int
		lbr        int64
	}{{"LSTM", "forward", 64, 128, 0}, {"LSTM", "bidirectional", 64, 128, 0}, {"GRU", "bidirectional", 128, 256, 1}, {"GRU", "forward", 64, 128, 1}} {
		dirs := 1
		if c.dir == "bidirectional" {
			dirs = 2
		}
		gates := map[string]int{"GRU": 3, "LSTM": 4}[c.op]
		n := &ir.Node{OpType: c.op, Version: 14, Attrs: map[string]*ir.Attr{
			"direction":   {Name: "direction", Kind: ir.AttrString, S: c.dir},
			"hidden_size": {Name: "hidden_size", Kind: ir.AttrInt, I: int64(c.hidden)},
		}}
		if c.op == "GRU" {
			n.Attrs["linear_before_reset"] = &ir.Attr{Name: "linear_before_reset", Kind: ir.AttrInt, I: c.lbr}
		}
		rnd := func(n int, s float64) []float32 {
			v := make([]float32, n)
			for i := range v {
				v[i] = float32(r.NormFloat64() * s)
			}
			return v
		}
		G := gates * c.hidden
		seq := 5
		in := []*tensor.Tensor{tensor.From(rnd(seq*c.in, 1), seq, 1, c.in), tensor.From(rnd(dirs*G*c.in, 0.1), dirs, G, c.in),
			tensor.From(rnd(dirs*G*c.hidden, 0.1), dirs, G, c.hidden), tensor.From(rnd(dirs*2*G, 0.1), dirs, 2*G), nil,
			tensor.From(make([]float32, dirs*c.hidden), dirs, 1, c.hidden)}
		if c.op == "LSTM" {
			in = append(in, tensor.From(make([]float32, dirs*c.hidden), dirs, 1, c.hidden))
		}
		cs := rnnCase{n: n, in: in}
		y, yh, yc, err := hostOf(cs)
		if err != nil {
			t.Fatal(err)
		}
		out, err := rnn.Ops()[c.op].Run(&kernel.Ctx{}, n, in)
		if err != nil {
			t.Fatal(err)
		}
		for o, got := range [][]float32{y, yh, yc}[:len(out)] {
			if k := sameBits(got, f32s(out[o])); k >= 0 {
				t.Errorf("%v: output %d differs at %d", cs, o, k)
			}
		}
	}
}

// The re-layout of R: Rᵀ[d][k][row] = R[d][row][k].
func TestRNNTranspose(t *testing.T) {
	for _, g := range []RNNGeom{{Kind: CellLSTM, Dirs: 2, Hidden: 3}, {Kind: CellGRU, Dirs: 1, Hidden: 5}, {Kind: CellRNN, Dirs: 2, Hidden: 1}} {
		G, H := g.Gates()*g.Hidden, g.Hidden
		r := make([]float32, g.Dirs*G*H)
		for i := range r {
			r[i] = float32(i)
		}
		rt := make([]float32, len(r))
		if err := g.rtCopy().Host(r, rt); err != nil {
			t.Fatal(err)
		}
		for d := 0; d < g.Dirs; d++ {
			for row := 0; row < G; row++ {
				for k := 0; k < H; k++ {
					if rt[(d*H+k)*G+row] != r[(d*G+row)*H+k] {
						t.Fatalf("%+v: Rt[%d][%d][%d] = %v, want R[%d][%d][%d] = %v", g, d, k, row, rt[(d*H+k)*G+row], d, row, k, r[(d*G+row)*H+k])
					}
				}
			}
		}
	}
}

// The scratch's parts do not overlap and fit WorkLen; the rnn_geom fields
// are rnn.cu's struct.
func TestRNNWorkAndFields(t *testing.T) {
	g := RNNGeom{Kind: CellLSTM, Dirs: 2, Seq: 7, Batch: 3, Input: 5, Hidden: 9, Acts: make([]RNNAct, 6), Clip: 1.5}
	w := g.work()
	G, H, D := 36, 9, 2
	st := D * g.Batch * H
	parts := []struct{ off, n int }{{0, D * 21 * G}, {w.rt, D * H * G}, {w.init, D * G}, {w.rbh, D * H}, {w.hs, 2 * st}, {w.cs, st}, {w.zb, st}, {w.rh, st}}
	end := 0
	for i, p := range parts {
		if p.off != end {
			t.Fatalf("part %d at %d, want %d", i, p.off, end)
		}
		end += p.n
	}
	if end != g.WorkLen() {
		t.Fatalf("WorkLen %d, parts end at %d", g.WorkLen(), end)
	}
	f := g.fields()
	if len(f) != 29 || f[0] != CellLSTM || f[1] != 2 || f[6] != 9 || math.Float32frombits(uint32(f[10])) != 1.5 {
		t.Fatalf("fields %v", f)
	}
}

// Bad geometries and operands are refused before the driver.
func TestRNNErrors(t *testing.T) {
	e := &Engine{}
	ok := RNNGeom{Kind: CellGRU, Dirs: 1, Seq: 2, Batch: 1, Input: 3, Hidden: 4, Acts: make([]RNNAct, 2)}
	for name, c := range map[string]struct {
		g     RNNGeom
		b     RNNBuffers
		steps int
	}{
		"kind":       {RNNGeom{Kind: 5, Dirs: 1, Hidden: 1}, RNNBuffers{}, 0},
		"dirs":       {RNNGeom{Kind: CellRNN, Dirs: 3, Hidden: 1, Acts: make([]RNNAct, 3)}, RNNBuffers{}, 0},
		"hidden":     {RNNGeom{Kind: CellRNN, Dirs: 1, Acts: make([]RNNAct, 1)}, RNNBuffers{}, 0},
		"acts":       {RNNGeom{Kind: CellLSTM, Dirs: 1, Hidden: 2, Acts: make([]RNNAct, 2)}, RNNBuffers{}, 0},
		"act op":     {RNNGeom{Kind: CellRNN, Dirs: 1, Hidden: 2, Acts: []RNNAct{{Op: 42}}}, RNNBuffers{}, 0},
		"batch":      {RNNGeom{Kind: CellRNN, Dirs: 1, Hidden: 2, Batch: 70000, Acts: make([]RNNAct, 1)}, RNNBuffers{}, 0},
		"huge":       {RNNGeom{Kind: CellLSTM, Dirs: 2, Hidden: 1 << 24, Input: 1 << 20, Acts: make([]RNNAct, 6)}, RNNBuffers{}, 0},
		"steps":      {ok, RNNBuffers{X: 1, W: 1, R: 1, Work: 1}, 1},
		"no R":       {ok, RNNBuffers{X: 1, W: 1, Work: 1}, 2},
		"no scratch": {ok, RNNBuffers{X: 1, W: 1, R: 1}, 2},
	} {
		if err := e.RNN(nil, c.g, c.b, c.steps); err == nil || !strings.HasPrefix(err.Error(), "exact: ") {
			t.Errorf("%s: err = %v, want an exact: error", name, err)
		}
	}
	if _, err := RNNGeomOf(rnn.Geometry{Kind: "LSTM", Dirs: 1, Hidden: 1, Acts: []rnn.Activation{{Name: "sigmoid"}, {Name: "gelu"}, {Name: "tanh"}}}); err == nil {
		t.Error("RNNGeomOf took an unknown activation")
	}
}
