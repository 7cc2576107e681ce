package gputest

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/vouchml/vouch/cuda"
	"github.com/vouchml/vouch/cuda/exact"
	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/onnx"
	"github.com/vouchml/vouch/tensor"
)

// gt is a float32 tensor on the device.
type gt struct {
	buf   *cuda.Buffer
	shape []int
	owned bool // freed with the run (views share their source's buffer)
}

// modelRun runs an ONNX model's graph node by node: the operators with an
// exact GPU kernel (Conv, Relu, BatchNormalization, MaxPool, Add,
// GlobalAveragePool, Flatten, Gemm with transB) on the GPU, every other
// node on the CPU through the kernel registry (its inputs downloaded, its
// outputs uploaded). It compares the outputs with vouch's CPU executor on
// the same input, bit for bit.
func (s *suite) model(path string) error {
	m, err := onnx.DecodeFile(path)
	if err != nil {
		return err
	}
	g := m.Graph
	name := filepath.Base(filepath.Dir(path))
	inputs := map[string]*tensor.Tensor{}
	for _, in := range g.Inputs {
		shape := make([]int, len(in.Type.Shape))
		for i, d := range in.Type.Shape {
			shape[i] = int(d.Value)
			if d.Value <= 0 {
				shape[i] = 3 // a symbolic batch: run more than one row
			}
		}
		if in.Type.DType != tensor.Float32 {
			return fmt.Errorf("gputest: %s: input %s is %v, only float32 inputs are generated", name, in.Name, in.Type.DType)
		}
		inputs[in.Name] = tensor.From(s.data(tensor.NumElems(shape), 1, 0), shape...)
	}
	ex, err := exec.New(g, builtin.Registry())
	if err != nil {
		return err
	}
	t0 := time.Now()
	want, err := ex.Run(inputs)
	if err != nil {
		return err
	}
	cpuTime := time.Since(t0)
	got, onCPU, gpuTime, err := s.runGraph(g, inputs)
	if err != nil {
		return fmt.Errorf("gputest: %s: %w", name, err)
	}
	fmt.Fprintf(s.w, "model %s: %d nodes, %d on the GPU, CPU fallback for %v; GPU pass %.3f ms (first run, includes weight upload: %.3f ms), CPU executor %.3f ms\n",
		name, len(g.Nodes), len(g.Nodes)-len(onCPU), onCPU, gpuTime[1], gpuTime[0], float64(cpuTime.Microseconds())/1e3)
	for _, o := range g.Outputs {
		w, ok := want[o.Name]
		if !ok || got[o.Name] == nil {
			return fmt.Errorf("gputest: %s: output %s missing", name, o.Name)
		}
		s.record(fmt.Sprintf("model %s output %s %v", name, o.Name, w.Shape), got[o.Name], f32(w), true)
	}
	return nil
}

// runGraph runs g twice (the first run uploads the weights) and returns
// the outputs of the second, the op types run on the CPU, and both runs'
// wall times in milliseconds.
func (s *suite) runGraph(g *ir.Graph, inputs map[string]*tensor.Tensor) (map[string][]float32, []string, [2]float64, error) {
	var times [2]float64
	vals := map[string]*gt{}
	weights := map[string]*gt{}
	defer func() {
		for _, v := range vals {
			if v.owned {
				v.buf.Free()
			}
		}
		for _, v := range weights {
			v.buf.Free()
		}
	}()
	var onCPU []string
	for run := 0; run < 2; run++ {
		for k, v := range vals {
			if v.owned {
				v.buf.Free()
			}
			delete(vals, k)
		}
		onCPU = onCPU[:0]
		t0 := time.Now()
		for n, t := range inputs {
			b, err := s.dev(f32(t))
			if err != nil {
				return nil, nil, times, err
			}
			vals[n] = &gt{buf: b, shape: t.Shape, owned: true}
		}
		for _, n := range g.Nodes {
			ok, err := s.gpuNode(g, n, vals, weights)
			if err != nil {
				return nil, nil, times, fmt.Errorf("node %s (%s): %w", n.Name, n.OpType, err)
			}
			if !ok {
				onCPU = append(onCPU, n.OpType)
				if err := s.cpuNode(g, n, vals); err != nil {
					return nil, nil, times, fmt.Errorf("node %s (%s) on the CPU: %w", n.Name, n.OpType, err)
				}
			}
		}
		if err := s.c.Synchronize(); err != nil {
			return nil, nil, times, err
		}
		times[run] = float64(time.Since(t0).Microseconds()) / 1e3
	}
	out := map[string][]float32{}
	for _, o := range g.Outputs {
		v := vals[o.Name]
		if v == nil {
			continue
		}
		d, err := s.fetch(v.buf, tensor.NumElems(v.shape))
		if err != nil {
			return nil, nil, times, err
		}
		out[o.Name] = d
	}
	return out, onCPU, times, nil
}

// operand returns a node input on the device: a computed value, or an
// initializer uploaded once.
func (s *suite) operand(g *ir.Graph, name string, vals, weights map[string]*gt) (*gt, error) {
	if v := vals[name]; v != nil {
		return v, nil
	}
	if w := weights[name]; w != nil {
		return w, nil
	}
	t, ok := g.Initializers[name]
	if !ok || t.DType != tensor.Float32 {
		return nil, fmt.Errorf("input %q is neither a computed float32 value nor a float32 initializer", name)
	}
	b, err := s.dev(f32(t))
	if err != nil {
		return nil, err
	}
	w := &gt{buf: b, shape: t.Shape}
	weights[name] = w
	return w, nil
}

func (s *suite) newVal(vals map[string]*gt, name string, shape []int) (*gt, error) {
	b, err := s.c.Alloc(uint64(max(tensor.NumElems(shape), 1)) * 4)
	if err != nil {
		return nil, err
	}
	v := &gt{buf: b, shape: shape, owned: true}
	vals[name] = v
	return v, nil
}

func attrInts(n *ir.Node, name string, def ...int) []int { return n.IntList(name, def...) }

// gpuNode runs n on the GPU when an exact kernel covers it, and reports
// whether it did.
func (s *suite) gpuNode(g *ir.Graph, n *ir.Node, vals, weights map[string]*gt) (bool, error) {
	if n.Domain != "" || len(n.Outputs) != 1 || n.String("auto_pad", "NOTSET") != "NOTSET" {
		return false, nil
	}
	// Every input must be a float32 value or initializer on the device;
	// a node with another input (an int64 shape, say) runs on the CPU.
	ins := make([]*gt, len(n.Inputs))
	for i, name := range n.Inputs {
		if name == "" {
			continue
		}
		v, err := s.operand(g, name, vals, weights)
		if err != nil {
			return false, nil
		}
		ins[i] = v
	}
	if len(ins) == 0 || ins[0] == nil {
		return false, nil
	}
	arity := map[string]int{"Conv": 2, "Add": 2, "Gemm": 3, "BatchNormalization": 5}[n.OpType]
	if len(ins) < arity || slices.Contains(ins[:arity], nil) {
		return false, nil
	}
	switch n.OpType {
	case "Conv":
		x := ins[0]
		w := ins[1]
		if len(x.shape) != 4 || len(w.shape) != 4 {
			return false, nil
		}
		p := attrInts(n, "pads", 0, 0, 0, 0)
		st, d := attrInts(n, "strides", 1, 1), attrInts(n, "dilations", 1, 1)
		if p[0] != p[2] || p[1] != p[3] {
			return false, nil
		}
		cg := exact.ConvGeom{N: x.shape[0], C: x.shape[1], H: x.shape[2], W: x.shape[3], M: w.shape[0], G: int(n.Int("group", 1)),
			KH: w.shape[2], KW: w.shape[3], SH: st[0], SW: st[1], PH: p[0], PW: p[1], DH: d[0], DW: d[1]}
		cg.OH = (cg.H+2*cg.PH-((cg.KH-1)*cg.DH+1))/cg.SH + 1
		cg.OW = (cg.W+2*cg.PW-((cg.KW-1)*cg.DW+1))/cg.SW + 1
		var bias uint64
		if len(ins) > 2 && ins[2] != nil {
			bias = ins[2].buf.Ptr
		}
		y, err := s.newVal(vals, n.Outputs[0], []int{cg.N, cg.M, cg.OH, cg.OW})
		if err != nil {
			return false, err
		}
		return true, s.e.Conv2D(nil, cg, x.buf.Ptr, w.buf.Ptr, bias, 0, false, y.buf.Ptr)
	case "Relu":
		x := ins[0]
		y, err := s.newVal(vals, n.Outputs[0], x.shape)
		if err != nil {
			return false, err
		}
		return true, s.e.Unary(nil, exact.Relu, x.buf.Ptr, y.buf.Ptr, int64(tensor.NumElems(x.shape)))
	case "Add":
		a := ins[0]
		b := ins[1]
		if !slices.Equal(a.shape, b.shape) {
			return false, nil
		}
		y, err := s.newVal(vals, n.Outputs[0], a.shape)
		if err != nil {
			return false, err
		}
		return true, s.e.Add(nil, a.buf.Ptr, b.buf.Ptr, y.buf.Ptr, int64(tensor.NumElems(a.shape)))
	case "BatchNormalization":
		if n.Int("training_mode", 0) != 0 {
			return false, nil
		}
		x := ins[0]
		var p [4][]float32
		for i := range p {
			t, ok := g.Initializers[n.Inputs[i+1]]
			if !ok || t.DType != tensor.Float32 {
				return false, nil
			}
			p[i] = f32(t)
		}
		// kernel/nn's batchNorm: a = scale/sqrt(var+eps), b = bias - mean*a.
		eps := n.Float("epsilon", 1e-5)
		C := x.shape[1]
		a, b := make([]float32, C), make([]float32, C)
		for c := range a {
			a[c] = p[0][c] / float32(math.Sqrt(float64(p[3][c]+eps)))
			b[c] = p[1][c] - float32(p[2][c]*a[c])
		}
		ab, err := s.operandData(weights, n.Name+"#a", a)
		if err != nil {
			return false, err
		}
		bb, err := s.operandData(weights, n.Name+"#b", b)
		if err != nil {
			return false, err
		}
		y, err := s.newVal(vals, n.Outputs[0], x.shape)
		if err != nil {
			return false, err
		}
		S := tensor.NumElems(x.shape[2:])
		return true, s.e.ChannelAffine(nil, x.buf.Ptr, ab.buf.Ptr, bb.buf.Ptr, y.buf.Ptr, int64(x.shape[0]*C), S, C)
	case "MaxPool":
		x := ins[0]
		k := attrInts(n, "kernel_shape")
		if len(x.shape) != 4 || len(k) != 2 || n.Int("ceil_mode", 0) != 0 || n.Int("storage_order", 0) != 0 {
			return false, nil
		}
		p := attrInts(n, "pads", 0, 0, 0, 0)
		st, d := attrInts(n, "strides", 1, 1), attrInts(n, "dilations", 1, 1)
		pg := exact.PoolGeom{Planes: x.shape[0] * x.shape[1], H: x.shape[2], W: x.shape[3], KH: k[0], KW: k[1], SH: st[0], SW: st[1],
			PBH: p[0], PBW: p[1], PEH: p[2], PEW: p[3], DH: d[0], DW: d[1]}
		pg.OH = (pg.H+pg.PBH+pg.PEH-((pg.KH-1)*pg.DH+1))/pg.SH + 1
		pg.OW = (pg.W+pg.PBW+pg.PEW-((pg.KW-1)*pg.DW+1))/pg.SW + 1
		y, err := s.newVal(vals, n.Outputs[0], []int{x.shape[0], x.shape[1], pg.OH, pg.OW})
		if err != nil {
			return false, err
		}
		return true, s.e.MaxPool2D(nil, pg, x.buf.Ptr, y.buf.Ptr)
	case "GlobalAveragePool":
		x := ins[0]
		if len(x.shape) < 3 {
			return false, nil
		}
		shape := append([]int{x.shape[0], x.shape[1]}, make([]int, len(x.shape)-2)...)
		for i := 2; i < len(shape); i++ {
			shape[i] = 1
		}
		y, err := s.newVal(vals, n.Outputs[0], shape)
		if err != nil {
			return false, err
		}
		return true, s.e.GlobalAvg(nil, x.buf.Ptr, y.buf.Ptr, int64(x.shape[0]*x.shape[1]), tensor.NumElems(x.shape[2:]))
	case "Softmax":
		x := ins[0]
		if ax := n.Int("axis", -1); n.Version < 13 || (ax != -1 && ax != int64(len(x.shape)-1)) {
			return false, nil
		}
		D := x.shape[len(x.shape)-1]
		y, err := s.newVal(vals, n.Outputs[0], x.shape)
		if err != nil {
			return false, err
		}
		return true, s.e.Softmax(nil, x.buf.Ptr, y.buf.Ptr, int64(tensor.NumElems(x.shape)/max(D, 1)), D)
	case "Flatten":
		x := ins[0]
		ax := int(n.Int("axis", 1))
		if ax < 0 || ax > len(x.shape) {
			return false, nil
		}
		vals[n.Outputs[0]] = &gt{buf: x.buf, shape: []int{tensor.NumElems(x.shape[:ax]), tensor.NumElems(x.shape[ax:])}}
		return true, nil
	case "Gemm":
		// A·Bᵀ + C with alpha = beta = 1 is a 1x1 convolution of the rows of
		// A with filters B and bias C: the same chains (k ascending from
		// +0), then acc + C[j] (kernel/nn's Gemm: float32(1*acc) + float32(1*C)).
		if n.Int("transA", 0) != 0 || n.Int("transB", 0) != 1 || n.Float("alpha", 1) != 1 || n.Float("beta", 1) != 1 || len(n.Inputs) < 3 {
			return false, nil
		}
		a := ins[0]
		b := ins[1]
		c := ins[2]
		if len(a.shape) != 2 || len(b.shape) != 2 || a.shape[1] != b.shape[1] || len(c.shape) != 1 || c.shape[0] != b.shape[0] {
			return false, nil
		}
		cg := exact.ConvGeom{N: a.shape[0], C: a.shape[1], H: 1, W: 1, M: b.shape[0], OH: 1, OW: 1, G: 1, KH: 1, KW: 1, SH: 1, SW: 1, DH: 1, DW: 1}
		y, err := s.newVal(vals, n.Outputs[0], []int{a.shape[0], b.shape[0]})
		if err != nil {
			return false, err
		}
		return true, s.e.Conv2D(nil, cg, a.buf.Ptr, b.buf.Ptr, c.buf.Ptr, 0, false, y.buf.Ptr)
	}
	return false, nil
}

func (s *suite) operandData(weights map[string]*gt, key string, v []float32) (*gt, error) {
	if w := weights[key]; w != nil {
		return w, nil
	}
	b, err := s.dev(v)
	if err != nil {
		return nil, err
	}
	w := &gt{buf: b, shape: []int{len(v)}}
	weights[key] = w
	return w, nil
}

// cpuNode runs n with the CPU registry: device values are downloaded,
// outputs uploaded (float32 ones; others stay on the host as initializers
// of later nodes would, which this runner does not need for its models).
func (s *suite) cpuNode(g *ir.Graph, n *ir.Node, vals map[string]*gt) error {
	ins := make([]*tensor.Tensor, len(n.Inputs))
	for i, name := range n.Inputs {
		if name == "" {
			continue
		}
		if v := vals[name]; v != nil {
			d, err := s.fetch(v.buf, tensor.NumElems(v.shape))
			if err != nil {
				return err
			}
			ins[i] = tensor.From(d, v.shape...)
			continue
		}
		t, ok := g.Initializers[name]
		if !ok {
			return fmt.Errorf("input %q not found", name)
		}
		ins[i] = t
	}
	k, err := builtin.Registry().Lookup(n)
	if err != nil {
		return err
	}
	outs, err := k.Run(&kernel.Ctx{}, n, ins)
	if err != nil {
		return err
	}
	for i, o := range outs {
		if i >= len(n.Outputs) || n.Outputs[i] == "" || o == nil {
			continue
		}
		if o.DType != tensor.Float32 {
			return fmt.Errorf("output %s is %v: the runner keeps float32 values only (%s)", n.Outputs[i], o.DType, strings.Join(n.Outputs, ","))
		}
		b, err := s.dev(f32(o))
		if err != nil {
			return err
		}
		vals[n.Outputs[i]] = &gt{buf: b, shape: o.Shape, owned: true}
	}
	return nil
}
