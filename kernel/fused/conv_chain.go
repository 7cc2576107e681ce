package fused

import (
	"math"
	"sync"
	"time"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/nn"
	"github.com/vouchml/vouch/tensor"
)

// ConvChain is a Chain layer (see chain.go) whose body is a run of 2-D
// convolutions, each a Conv or a Fused Conv with a residual Add and a
// clamp (Relu, Clip), reading the layer's one input or an earlier body
// value, its weights and bias the body's own initializers (so constant).
// Where the CPU has AVX-512 and every convolution fits (nn.BlockedChain:
// 16-channel blocks, pads of at most 1) the layer runs the body on B16
// tensors, which needs neither padded copies of the inputs nor transposes
// of the outputs; everywhere else it runs the body node by node like any
// chain. Each output is the same chain of operations either way, so the
// bits are the body's.
const ConvChain = "ConvChain"

type convChainOp struct {
	c *chainOp
}

// ccKey keys a ConvChain node's blocked plan in its kernel.State.
type ccKey struct{ n *ir.Node }

// ccEntry is a ConvChain node's blocked plan, built for one input shape.
type ccEntry struct {
	mu    sync.Mutex
	shape [4]int           // the image's shape, [1 C H W] (zero: none yet)
	chain *nn.BlockedChain // nil: the body does not run blocked
	nodes []*ir.Node       // the body node of each step
}

func (o *convChainOp) into(ctx *kernel.Ctx, n *ir.Node, in, out []*tensor.Tensor) error {
	if len(in) == 1 && len(out) == 1 && in[0] != nil && out[0] != nil {
		x, xok := in[0].Data.([]float32)
		y, yok := out[0].Data.([]float32)
		xs, ys := in[0].Shape, out[0].Shape
		if xok && yok && len(xs) == 4 && len(ys) == 4 && xs[0] == ys[0] && xs[0] > 0 {
			// A batch runs image by image (each image's outputs are the
			// same chains whatever the batch).
			N := xs[0]
			if !nn.Blocked(ctx) {
				return o.c.into(ctx, n, in, out)
			}
			if ch, nodes := o.blocked(ctx, n, [4]int{1, xs[1], xs[2], xs[3]}, [4]int{1, ys[1], ys[2], ys[3]}); ch != nil && len(x)%N == 0 && len(y)%N == 0 {
				var trace func(int, time.Duration)
				if tr := ctx.Trace; tr != nil {
					trace = func(i int, d time.Duration) { tr(nodes[i], d) }
				}
				xn, yn := len(x)/N, len(y)/N
				for i := 0; i < N; i++ {
					ch.RunTraced(ctx, x[i*xn:(i+1)*xn], y[i*yn:(i+1)*yn], trace)
				}
				return nil
			}
		}
	}
	return o.c.into(ctx, n, in, out)
}

// blocked returns n's blocked plan for an input of shape x and an output
// of shape y, and the body node of each step, or nil where the body does
// not run blocked. nn.Blocked(ctx) must hold.
func (o *convChainOp) blocked(ctx *kernel.Ctx, n *ir.Node, x, y [4]int) (*nn.BlockedChain, []*ir.Node) {
	// The plan (and its buffers) is kept in the node's kernel.State, so
	// it goes with the bound plan; without a State it is made per call.
	e, _ := kernel.Prepared(ctx, ccKey{n}, nil, func() (*ccEntry, error) { return &ccEntry{}, nil })
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.shape != x {
		e.shape = x
		e.chain, e.nodes = convChainPlan(ctx, n, x[:])
	}
	if e.chain == nil || e.chain.OutShape() != y {
		return nil, nil
	}
	return e.chain, e.nodes
}

// convChainPlan translates n's body into blocked steps (and returns the
// body node of each), or returns nil where any node does not fit them.
func convChainPlan(ctx *kernel.Ctx, n *ir.Node, x []int) (*nn.BlockedChain, []*ir.Node) {
	g, err := body(n)
	if err != nil || len(g.Inputs) != 1 {
		return nil, nil
	}
	vals := map[string]int{g.Inputs[0].Name: 0}
	f32 := func(name string) ([]float32, []int, bool) {
		t, ok := g.Initializers[name]
		if !ok || t.DType != tensor.Float32 {
			return nil, nil, false
		}
		d, ok := t.Data.([]float32)
		return d, t.Shape, ok && len(d) == t.Len()
	}
	var steps []nn.BlockedStep
	for _, nd := range g.Nodes {
		st := nn.BlockedStep{Attrs: nd, Res: -1, Out: len(steps) + 1}
		base := nd
		var p *parts
		switch {
		case nd.Domain == "" && nd.OpType == "Conv":
		case nd.Domain == Domain && nd.OpType == "Fused":
			var err error
			if p, err = split(nd); err != nil || p.base.OpType != "Conv" || p.add2 != nil || p.silu != nil || p.mul != nil {
				return nil, nil
			}
			base, st.Attrs = p.base, p.base
		default:
			return nil, nil
		}
		bin := base.Inputs
		if p != nil {
			bin = nil
			for _, i := range p.baseIn {
				bin = append(bin, nd.Inputs[i])
			}
		}
		if len(bin) < 2 || len(bin) > 3 || len(nd.Outputs) != 1 {
			return nil, nil
		}
		in, ok := vals[bin[0]]
		if !ok {
			return nil, nil
		}
		st.In = in
		if st.W, st.WShape, ok = f32(bin[1]); !ok {
			return nil, nil
		}
		if len(bin) == 3 && bin[2] != "" {
			if st.B, _, ok = f32(bin[2]); !ok {
				return nil, nil
			}
		}
		if p != nil && p.add != nil {
			r, ok := vals[nd.Inputs[p.addIn[0]]]
			if !ok {
				return nil, nil
			}
			st.Res = r
		}
		if p != nil && p.act != nil {
			ins := make([]*tensor.Tensor, len(nd.Inputs))
			for i, name := range nd.Inputs {
				ins[i] = g.Initializers[name]
			}
			e, ok := clampOf(p, ins, kernel.Epilogue{})
			if !ok {
				return nil, nil
			}
			c := [2]float32{float32(math.Inf(-1)), float32(math.Inf(1))}
			if e.HasLo {
				c[0] = e.Lo
			}
			if e.HasHi {
				c[1] = e.Hi
			}
			st.Clamp = &c
		}
		vals[nd.Outputs[0]] = st.Out
		steps = append(steps, st)
	}
	out, ok := vals[g.Outputs[0].Name]
	if !ok || out == 0 {
		return nil, nil
	}
	ch, err := nn.NewBlockedChain(ctx, steps, x, out)
	if err != nil {
		return nil, nil
	}
	return ch, g.Nodes
}
