package compile

import (
	"math"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/fused"
	"github.com/vouchml/vouch/tensor"
)

// activations that fuse into a preceding Conv/Gemm/MatMul layer, with the
// number of extra (constant) inputs each may take.
var activations = map[string]bool{
	"Relu": true, "LeakyRelu": true, "Sigmoid": true, "HardSigmoid": true, "HardSwish": true,
	"Clip": true, "Tanh": true, "Elu": true, "Selu": true, "Softplus": true, "Celu": true, "Gelu": true,
}

var fusableBase = map[string]bool{"Conv": true, "Gemm": true, "MatMul": true}

// consumers maps each value to the nodes reading it.
func consumers(g *ir.Graph) map[string][]*ir.Node {
	c := map[string][]*ir.Node{}
	for _, n := range g.Nodes {
		for _, in := range n.Inputs {
			if in != "" {
				c[in] = append(c[in], n)
			}
		}
	}
	return c
}

// soleConsumer returns the only reader of v, if v is read by exactly one
// node, is no graph output and is not referenced by a subgraph.
func soleConsumer(g *ir.Graph, c map[string][]*ir.Node, u map[string]int, v string) *ir.Node {
	if len(c[v]) != 1 || u[v] != 1 || isGraphOutput(g, v) {
		return nil
	}
	n := c[v][0]
	count := 0
	for _, in := range n.Inputs {
		if in == v {
			count++
		}
	}
	if count != 1 {
		return nil
	}
	return n
}

// fuseActivation merges Conv/Gemm/MatMul with a following Add (bias or
// residual) and/or activation into one "vouch" Fused layer. The activation
// may be x·Sigmoid(x) written as a Sigmoid and a Mul that both read the
// value (SiLU).
func fuseActivation(s *state) error {
	g := s.g
	removed := map[*ir.Node]bool{}
	for _, n := range g.Nodes {
		if removed[n] || n.Domain != "" || !fusableBase[n.OpType] || len(n.Outputs) != 1 {
			continue
		}
		c, u := consumers(g), uses(g)
		out := n.Outputs[0]
		var add, act *ir.Node
		next := soleConsumer(g, c, u, out)
		if next != nil && next.Domain == "" && next.OpType == "Add" && len(next.Inputs) == 2 {
			add = next
			out = add.Outputs[0]
			next = soleConsumer(g, c, u, out)
		}
		if next != nil && next.Domain == "" && activations[next.OpType] && next.Inputs[0] == out {
			act = next
		}
		var sig, mul *ir.Node
		if act == nil {
			sig, mul = gateAt(g, c, u, out, "Sigmoid")
		}
		if add == nil && act == nil && sig == nil {
			continue
		}
		f := &ir.Node{Name: n.Name, OpType: fused.OpFused, Domain: fusedDomain, Version: 1, Attrs: map[string]*ir.Attr{}}
		for k, a := range n.Attrs {
			f.Attrs[k] = a
		}
		lay := fused.Layer{Base: n.OpType, BaseVersion: n.Version, BaseInputs: len(n.Inputs)}
		f.Inputs = append(f.Inputs, n.Inputs...)
		origin := append([]string{}, s.origin[n.Name]...)
		final := n.Outputs[0]
		if add != nil {
			other := add.Inputs[1]
			if other == n.Outputs[0] {
				other = add.Inputs[0]
			}
			f.Inputs = append(f.Inputs, other)
			lay.Adds = 1
			origin = append(origin, s.origin[add.Name]...)
			final = add.Outputs[0]
			removed[add] = true
		}
		if act != nil {
			lay.Activation, lay.ActVersion = act.OpType, act.Version
			for k, a := range act.Attrs {
				c := fused.ActAttr(k, a)
				f.Attrs[c.Name] = c
			}
			f.Inputs = append(f.Inputs, act.Inputs[1:]...)
			lay.ActInputs = len(act.Inputs) - 1
			origin = append(origin, s.origin[act.Name]...)
			final = act.Outputs[0]
			removed[act] = true
		}
		if sig != nil {
			lay.Activation, lay.ActVersion = fused.SiLU, sig.Version
			lay.SigmoidFirst = mul.Inputs[0] == sig.Outputs[0]
			origin = append(origin, s.origin[sig.Name]...)
			origin = append(origin, s.origin[mul.Name]...)
			final = mul.Outputs[0]
			removed[sig], removed[mul] = true, true
		}
		lay.SetAttrs(f.Attrs)
		f.Outputs = []string{final}
		*n = *f
		s.origin[n.Name] = origin
		kind := "bias/residual+activation"
		switch {
		case add == nil:
			kind = "activation"
		case act == nil && sig == nil:
			kind = "bias/residual"
		}
		fields := map[string]any{"layer": n.Name, "from": origin, "kind": kind}
		if a := f.String(fused.AttrActivation, ""); a != "" {
			fields["activation"] = a
		}
		s.fused("fused", fields)
	}
	var keep []*ir.Node
	for _, n := range g.Nodes {
		if !removed[n] {
			keep = append(keep, n)
		}
	}
	g.Nodes = keep
	return nil
}

// foldBatchNorm folds an inference BatchNormalization that reads a Conv's
// output (and nothing else reads it) into the Conv's weights and bias:
// W'[o] = W[o]·s[o], b'[o] = (b[o] − mean[o])·s[o] + beta[o], with
// s = gamma / sqrt(var + eps), computed in float64 and rounded once.
func foldBatchNorm(s *state) error {
	g := s.g
	removed := map[*ir.Node]bool{}
	for _, conv := range g.Nodes {
		if conv.OpType != "Conv" || conv.Domain != "" || len(conv.Outputs) != 1 {
			continue
		}
		c, u := consumers(g), uses(g)
		bn := soleConsumer(g, c, u, conv.Outputs[0])
		if bn == nil || bn.OpType != "BatchNormalization" || bn.Inputs[0] != conv.Outputs[0] || len(bn.Inputs) != 5 {
			continue
		}
		if bn.Int("training_mode", 0) != 0 || (len(bn.Outputs) > 1 && anyUsed(u, bn.Outputs[1:])) {
			continue
		}
		w, ok := g.Initializers[conv.Input(1)]
		if !ok || w.DType != tensor.Float32 || len(w.Shape) < 3 {
			continue
		}
		params := make([][]float64, 4)
		okAll := true
		for i := range params {
			t, ok := g.Initializers[bn.Inputs[i+1]]
			if !ok || t.DType != tensor.Float32 || t.Len() != w.Shape[0] {
				okAll = false
				break
			}
			params[i], _ = t.Float64s()
		}
		if !okAll {
			continue
		}
		var bias []float64
		if b := conv.Input(2); b != "" {
			bt, ok := g.Initializers[b]
			if !ok || bt.DType != tensor.Float32 {
				continue
			}
			bias, _ = bt.Float64s()
		} else {
			bias = make([]float64, w.Shape[0])
		}
		eps := float64(bn.Float("epsilon", 1e-5))
		gamma, beta, mean, variance := params[0], params[1], params[2], params[3]
		wd := w.Data.([]float32)
		per := len(wd) / w.Shape[0]
		nw := make([]float32, len(wd))
		nb := make([]float32, w.Shape[0])
		for o := 0; o < w.Shape[0]; o++ {
			sc := gamma[o] / math.Sqrt(variance[o]+eps)
			for k := 0; k < per; k++ {
				nw[o*per+k] = float32(float64(wd[o*per+k]) * sc)
			}
			nb[o] = float32((bias[o]-mean[o])*sc + beta[o])
		}
		wName, bName := conv.Name+"/folded_weight", conv.Name+"/folded_bias"
		g.Initializers[wName] = tensor.From(nw, w.Shape...)
		g.Initializers[bName] = tensor.From(nb, w.Shape[0])
		conv.Inputs = []string{conv.Inputs[0], wName, bName}
		conv.Outputs = []string{bn.Outputs[0]}
		removed[bn] = true
		s.origin[conv.Name] = append(s.origin[conv.Name], s.origin[bn.Name]...)
		s.fused("folded", map[string]any{"conv": conv.Name, "batchnorm": bn.Name, "channels": w.Shape[0]})
	}
	var keep []*ir.Node
	for _, n := range g.Nodes {
		if !removed[n] {
			keep = append(keep, n)
		}
	}
	g.Nodes = keep
	return nil
}

func anyUsed(u map[string]int, names []string) bool {
	for _, n := range names {
		if n != "" && u[n] > 0 {
			return true
		}
	}
	return false
}

const fusedDomain = fused.Domain

// foldBatchNormGemm folds an inference BatchNormalization over the feature
// axis (1) of a 2-D Gemm or MatMul output into the constant weights and
// bias, as foldBatchNorm does for Conv: column o of the product is scaled
// by s[o] = gamma[o]/sqrt(var[o]+eps) and the bias becomes
// (b[o] − mean[o])·s[o] + beta[o]. A MatMul becomes a Gemm (with the bias
// as C).
func foldBatchNormGemm(s *state) error {
	g := s.g
	removed := map[*ir.Node]bool{}
	for _, mm := range g.Nodes {
		if mm.Domain != "" || (mm.OpType != "Gemm" && mm.OpType != "MatMul") || len(mm.Outputs) != 1 {
			continue
		}
		if mm.OpType == "Gemm" && (mm.Int("transA", 0) != 0 || mm.Float("alpha", 1) != 1 || mm.Float("beta", 1) != 1) {
			continue
		}
		c, u := consumers(g), uses(g)
		bn := soleConsumer(g, c, u, mm.Outputs[0])
		if bn == nil || bn.OpType != "BatchNormalization" || bn.Domain != "" || bn.Inputs[0] != mm.Outputs[0] || len(bn.Inputs) != 5 {
			continue
		}
		if bn.Int("training_mode", 0) != 0 || (len(bn.Outputs) > 1 && anyUsed(u, bn.Outputs[1:])) {
			continue
		}
		if t, ok := g.Types[mm.Outputs[0]]; !ok || !t.RankKnown || len(t.Shape) != 2 {
			continue
		}
		w, ok := g.Initializers[mm.Input(1)]
		if !ok || w.DType != tensor.Float32 || len(w.Shape) != 2 {
			continue
		}
		transB := mm.OpType == "Gemm" && mm.Int("transB", 0) == 1
		k, n := w.Shape[0], w.Shape[1]
		if transB {
			k, n = n, k
		}
		params := make([][]float64, 4)
		okAll := true
		for i := range params {
			t, ok := g.Initializers[bn.Inputs[i+1]]
			if !ok || t.DType != tensor.Float32 || t.Len() != n {
				okAll = false
				break
			}
			params[i], _ = t.Float64s()
		}
		if !okAll {
			continue
		}
		bias := make([]float64, n)
		if b := mm.Input(2); b != "" {
			bt, ok := g.Initializers[b]
			if !ok || bt.DType != tensor.Float32 || bt.Len() != n {
				continue
			}
			bias, _ = bt.Float64s()
		}
		eps := float64(bn.Float("epsilon", 1e-5))
		wd := w.Data.([]float32)
		nw := make([]float32, len(wd))
		nb := make([]float32, n)
		for o := 0; o < n; o++ {
			sc := params[0][o] / math.Sqrt(params[3][o]+eps)
			for j := 0; j < k; j++ {
				idx := j*n + o // W[k][n]
				if transB {
					idx = o*k + j // W[n][k]
				}
				nw[idx] = float32(float64(wd[idx]) * sc)
			}
			nb[o] = float32((bias[o]-params[2][o])*sc + params[1][o])
		}
		wName, bName := mm.Name+"/folded_weight", mm.Name+"/folded_bias"
		g.Initializers[wName] = tensor.From(nw, w.Shape...)
		g.Initializers[bName] = tensor.From(nb, n)
		if mm.OpType == "MatMul" {
			mm.OpType, mm.Version = "Gemm", 13
		}
		mm.Inputs = []string{mm.Inputs[0], wName, bName}
		mm.Outputs = []string{bn.Outputs[0]}
		removed[bn] = true
		s.origin[mm.Name] = append(s.origin[mm.Name], s.origin[bn.Name]...)
		s.fused("folded", map[string]any{"layer": mm.Name, "batchnorm": bn.Name, "features": n})
	}
	g.Nodes = without(g.Nodes, removed)
	return nil
}
