package rnn

import (
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

func identity32(t *tensor.Tensor) []float32 { return t.Data.([]float32) }
func identity64(t *tensor.Tensor) []float64 { return t.Data.([]float64) }

// narrowTo32 reads a float16 or bfloat16 tensor as float32 (exactly).
func narrowTo32(t *tensor.Tensor) []float32 {
	switch d := t.Data.(type) {
	case []tensor.Half:
		out := make([]float32, len(d))
		for i, v := range d {
			out[i] = v.Float32()
		}
		return out
	case []tensor.BHalf:
		out := make([]float32, len(d))
		for i, v := range d {
			out[i] = v.Float32()
		}
		return out
	}
	return t.Data.([]float32)
}

// weights are one direction's parameters, as flat row-major slices.
type weights[T kernel.Float] struct {
	w, r   []T // [gates*hidden, input], [gates*hidden, hidden]
	wb, rb []T // [gates*hidden] each; nil without B
	p      []T // LSTM peepholes [3*hidden] (i, o, f); nil without P
}

// cell runs one direction over one batch row.
type cell[T kernel.Float] struct {
	c     config
	m     floatMath[T]
	wt    weights[T]
	acts  []func(T) T
	h, cs []T // state
	nh    []T // next hidden state
	nc    []T // next cell state (LSTM)
	g1    []T // gate scratch: z (GRU), i (LSTM)
	g2    []T // gate scratch: r (GRU)
	rh    []T // r ⊙ h (GRU)
}

// bias is Wb[j]+Rb[j], or 0 without B.
func (e *cell[T]) bias(j int) T {
	if e.wt.wb == nil {
		return 0
	}
	return e.wt.wb[j] + e.wt.rb[j]
}

// chain adds v[k]*row[k] to acc by FMA, in order of k.
func (e *cell[T]) chain(acc T, v, row []T) T {
	for k, x := range v {
		acc = e.m.fma(x, row[k], acc)
	}
	return acc
}

// pre is gate row j's pre-activation for input x and hidden state h.
func (e *cell[T]) pre(j int, x, h []T) T {
	in, hid := e.c.input, e.c.hidden
	acc := e.chain(e.bias(j), x, e.wt.w[j*in:(j+1)*in])
	return e.chain(acc, h, e.wt.r[j*hid:(j+1)*hid])
}

func (e *cell[T]) clip(v T) T {
	if e.c.clip > 0 {
		l := T(e.c.clip)
		return max(-l, min(l, v))
	}
	return v
}

// step advances the state by one input x.
func (e *cell[T]) step(x []T) {
	H := e.c.hidden
	h := e.h
	switch e.c.kind {
	case cellRNN:
		f := e.acts[0]
		for j := 0; j < H; j++ {
			e.nh[j] = f(e.clip(e.pre(j, x, h)))
		}
	case cellGRU:
		f, g := e.acts[0], e.acts[1]
		z, r := e.g1, e.g2
		for j := 0; j < H; j++ {
			z[j] = f(e.clip(e.pre(j, x, h)))
			r[j] = f(e.clip(e.pre(H+j, x, h)))
		}
		in := e.c.input
		for j := 0; j < H; j++ {
			row := 2*H + j
			wrow, rrow := e.wt.w[row*in:(row+1)*in], e.wt.r[row*H:(row+1)*H]
			var hh T
			if e.c.linearBeforeReset {
				var xb, rb T
				if e.wt.wb != nil {
					xb, rb = e.wt.wb[row], e.wt.rb[row]
				}
				xp := e.chain(xb, x, wrow)
				rp := e.chain(rb, h, rrow)
				hh = g(e.clip(e.m.fma(r[j], rp, xp)))
			} else {
				for k := range h {
					e.rh[k] = r[k] * h[k]
				}
				hh = g(e.clip(e.chain(e.chain(e.bias(row), x, wrow), e.rh, rrow)))
			}
			e.nh[j] = e.m.fma(z[j], h[j], (1-z[j])*hh)
		}
	case cellLSTM:
		f, g, ha := e.acts[0], e.acts[1], e.acts[2]
		c := e.cs
		p := e.wt.p
		for j := 0; j < H; j++ {
			pi := e.pre(j, x, h)
			pf := e.pre(2*H+j, x, h)
			if p != nil {
				pi = e.m.fma(p[j], c[j], pi)
				pf = e.m.fma(p[2*H+j], c[j], pf)
			}
			ig := f(e.clip(pi))
			fg := f(e.clip(pf))
			if e.c.coupled {
				fg = 1 - ig
			}
			cc := g(e.clip(e.pre(3*H+j, x, h)))
			nc := e.m.fma(fg, c[j], ig*cc)
			po := e.pre(H+j, x, h)
			if p != nil {
				po = e.m.fma(p[H+j], nc, po)
			}
			og := f(e.clip(po))
			e.nc[j] = nc
			e.nh[j] = og * ha(nc)
		}
		e.cs, e.nc = e.nc, e.cs
	}
	e.h, e.nh = e.nh, e.h
}

// compute runs every direction and batch row. toT reads an input as []T
// (converting float16 and bfloat16 to float32); outputs take the input's element type.
func compute[T kernel.Float](c config, in []*tensor.Tensor, lens []int, m floatMath[T], toT func(*tensor.Tensor) []T) ([]*tensor.Tensor, error) {
	dt := in[0].DType
	get := func(i int) []T {
		if t := kernel.Input(in, i); t != nil {
			return toT(t)
		}
		return nil
	}
	x, w, r, b := get(0), get(1), get(2), get(3)
	h0 := get(5)
	var c0, p []T
	if c.kind == cellLSTM {
		c0, p = get(6), get(7)
	}
	H, I, G := c.hidden, c.input, c.kind.gates()*c.hidden
	perDir := len(c.kind.defaultActs())

	y := make([]T, c.seq*c.dirs*c.batch*H)
	yh := make([]T, c.dirs*c.batch*H)
	yc := make([]T, c.dirs*c.batch*H)
	xOff, stOff, yOff := c.xOff, c.stOff, c.yOff
	for d := 0; d < c.dirs; d++ {
		e := &cell[T]{c: c, m: m}
		e.wt.w = w[d*G*I : (d+1)*G*I]
		e.wt.r = r[d*G*H : (d+1)*G*H]
		if b != nil {
			e.wt.wb = b[d*2*G : d*2*G+G]
			e.wt.rb = b[d*2*G+G : (d+1)*2*G]
		}
		if p != nil {
			e.wt.p = p[d*3*H : (d+1)*3*H]
		}
		for _, s := range c.acts[d*perDir : (d+1)*perDir] {
			e.acts = append(e.acts, activation(s, m))
		}
		e.h, e.nh, e.cs, e.nc = make([]T, H), make([]T, H), make([]T, H), make([]T, H)
		e.g1, e.g2, e.rh = make([]T, H), make([]T, H), make([]T, H)
		reverse := c.reverse || d == 1
		for bi := 0; bi < c.batch; bi++ {
			clear(e.h)
			clear(e.cs)
			if h0 != nil {
				copy(e.h, h0[stOff(d, bi):])
			}
			if c0 != nil {
				copy(e.cs, c0[stOff(d, bi):])
			}
			L := lens[bi]
			for s := 0; s < L; s++ {
				t := s
				if reverse {
					t = L - 1 - s
				}
				e.step(x[xOff(t, bi) : xOff(t, bi)+I])
				copy(y[yOff(t, d, bi):yOff(t, d, bi)+H], e.h)
			}
			copy(yh[stOff(d, bi):stOff(d, bi)+H], e.h)
			copy(yc[stOff(d, bi):stOff(d, bi)+H], e.cs)
		}
	}
	yShape, stShape := c.outShapes()
	out := []*tensor.Tensor{build(dt, y, yShape), build(dt, yh, stShape)}
	if c.kind == cellLSTM {
		out = append(out, build(dt, yc, stShape))
	}
	return out, nil
}

// build wraps v as a tensor of type dt (rounding to float16 where asked).
func build[T kernel.Float](dt tensor.DType, v []T, shape []int) *tensor.Tensor {
	switch s := any(v).(type) {
	case []float32:
		switch dt {
		case tensor.Float16:
			h := make([]tensor.Half, len(s))
			for i, x := range s {
				h[i] = tensor.ToHalf(x)
			}
			return tensor.From(h, shape...)
		case tensor.BFloat16:
			h := make([]tensor.BHalf, len(s))
			for i, x := range s {
				h[i] = tensor.ToBHalf(x)
			}
			return tensor.From(h, shape...)
		}
		return tensor.From(s, shape...)
	case []float64:
		return tensor.From(s, shape...)
	}
	panic("rnn: unreachable element type")
}

// xOff is the offset of X's step t of batch row bi.
func (c config) xOff(t, bi int) int {
	if c.layout == 1 {
		return (bi*c.seq + t) * c.input
	}
	return (t*c.batch + bi) * c.input
}

// stOff is the offset of a state's direction d, batch row bi.
func (c config) stOff(d, bi int) int {
	if c.layout == 1 {
		return (bi*c.dirs + d) * c.hidden
	}
	return (d*c.batch + bi) * c.hidden
}

// yOff is the offset of Y's step t, direction d, batch row bi.
func (c config) yOff(t, d, bi int) int {
	if c.layout == 1 {
		return ((bi*c.seq+t)*c.dirs + d) * c.hidden
	}
	return ((t*c.dirs+d)*c.batch + bi) * c.hidden
}

// outShapes are the shapes of Y and of the states.
func (c config) outShapes() (y, st []int) {
	if c.layout == 1 {
		return []int{c.batch, c.seq, c.dirs, c.hidden}, []int{c.batch, c.dirs, c.hidden}
	}
	return []int{c.seq, c.dirs, c.batch, c.hidden}, []int{c.dirs, c.batch, c.hidden}
}
