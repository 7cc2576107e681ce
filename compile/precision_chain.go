package compile

import (
	"bytes"
	"fmt"
	"maps"
	"sort"

	"github.com/vouchml/vouch/buildlog"
	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/fused"
	"github.com/vouchml/vouch/quant"
	"github.com/vouchml/vouch/tensor"
)

// Int8 activations between consecutive int8 layers (issue 16 item 4): an
// int8 layer dequantizes its output to float32, and each int8 layer that
// reads it quantizes it again with its own calibrated x_scale. Where every
// reader of an int8 layer's output is an int8 layer that reads it as its
// activation (input 0, nowhere else) with the same x_scale, and the output
// is not a graph output, the int8-chains pass (int8ChainsPass, after the
// fusions, before eliminate-dead) sets the producer's attribute y_scale
// (the consumers' x_scale) and each consumer's x_u8: the producer's
// epilogue stores the quantization of each float32 value it has just
// computed, q + 128 as uint8 (kernel/q8 chain.go), and the consumers read
// those bytes instead of quantizing: the same integers, so the plan's
// outputs are bit-identical with and without the pass, and one pass over
// the activation fewer on each side, a quarter of the bytes between them.
// The pass checks that: it runs the graph with and without the edges on
// up to two evaluation (or calibration) inputs and keeps the edges only
// if every output has the same bits; the build report's precision section
// lists the edges and the check (int8_edges), the plan holds the
// attributes and the uint8 values.
//
// Measured 2026-12-02 07:41 UTC (1 thread, batch 1, thread-CPU medians of
// 40-60 alternating runs, load about 1): the zoo's resnet50 with its 35
// u8 edges 20.98 ms, without the pass 21.01 ms; mobilenet_v3_large (6
// edges) 3.75 vs 3.73 ms. The same bits, and no gain worth the name on
// this CPU: at batch 1 the activations stay in L2, the consumer still
// interleaves the bytes into its tile layout, and the producer now does
// the quantization the consumer did. A gain would need the producer to
// write the consumer's padded, quad-interleaved layout itself.
//
// Later (the bench's int8 chains column counts what blocks the others):
// through Reshape/Flatten (views: squeeze-excitation's path), MaxPool
// (quantize1 is monotone, so max and quantization commute exactly, except
// that NaN quantizes to 0: a window holding NaN must follow MaxPool's NaN
// rule), Concat (producers quantize into their slices when all readers
// share one scale), and outputs read both as an activation and as a
// residual (ResNet's block outputs: a float32 and a u8 output).

// Int8Chain is one chainable edge: the tensor an int8 layer writes and
// the int8 layers that alone read it, all with one x_scale.
type Int8Chain struct {
	Tensor    string
	Producer  string
	Consumers []string
	Scale     float32
	U8        bool // the graph passes it as u8 (the producer has y_scale)
}

// Int8ChainReport lists an int8 graph's chainable edges and, for every
// other int8 layer output, why it cannot chain (reason -> count).
type Int8ChainReport struct {
	Outputs int // int8 layers' outputs
	Chains  []Int8Chain
	Blocked map[string]int
}

func isQ8(n *ir.Node) bool { return n.Domain == fused.Domain && n.OpType == fused.OpQ8 }

// convQ8 reports whether n is an int8 convolution: the pass chains only
// those (measured 2026-12-02 08:20 UTC, 1 thread: the zoo's convnext_tiny,
// whose pointwise layers are int8 MatMuls over channels-last rows, ran
// 40.5 ms with its linear layers chained against 32.1 ms without).
func convQ8(n *ir.Node) bool { return isQ8(n) && n.String(fused.AttrBase, "") == "Conv" }

// Int8Chains analyses g (a built graph: after the precision pass and the
// fusions that follow it).
func Int8Chains(g *ir.Graph) Int8ChainReport {
	readers := map[string][]*ir.Node{}
	for _, n := range g.Nodes {
		seen := map[string]bool{}
		for _, in := range n.Inputs {
			if in != "" && !seen[in] {
				seen[in] = true
				readers[in] = append(readers[in], n)
			}
		}
	}
	outs := map[string]bool{}
	for _, v := range g.Outputs {
		outs[v.Name] = true
	}
	r := Int8ChainReport{Blocked: map[string]int{}}
	for _, p := range g.Nodes {
		if !isQ8(p) || len(p.Outputs) == 0 || p.Outputs[0] == "" {
			continue
		}
		t := p.Outputs[0]
		r.Outputs++
		why := chainBlocker(t, readers[t], outs[t])
		if why == "" && !convQ8(p) {
			why = "a linear int8 layer's output (slower as u8: convnext_tiny 40.5 vs 32.1 ms)"
		}
		if why == "" {
			for _, n := range readers[t] {
				if !convQ8(n) {
					why = "read by a linear int8 layer (slower as u8: convnext_tiny 40.5 vs 32.1 ms)"
				}
			}
		}
		if why != "" {
			r.Blocked[why]++
			continue
		}
		c := Int8Chain{Tensor: t, Producer: p.Name, Scale: readers[t][0].Float("x_scale", 0), U8: p.Attrs["y_scale"] != nil}
		for _, n := range readers[t] {
			c.Consumers = append(c.Consumers, n.Name)
		}
		r.Chains = append(r.Chains, c)
	}
	return r
}

// chainBlocker says why tensor t (an int8 layer's output read by readers)
// cannot pass between int8 layers as u8, or "".
func chainBlocker(t string, readers []*ir.Node, isOutput bool) string {
	switch {
	case isOutput:
		return "graph output"
	case len(readers) == 0:
		return "no reader"
	}
	var scale float32
	for i, n := range readers {
		if !isQ8(n) {
			return "read by " + n.OpType
		}
		for j, in := range n.Inputs {
			if in == t && j != 0 {
				return "an int8 layer's residual or operand"
			}
		}
		s := n.Float("x_scale", 0)
		if i == 0 {
			scale = s
		} else if s != scale {
			return "int8 readers' scales differ"
		}
	}
	return ""
}

// U8 is the number of chains the graph passes as u8.
func (r Int8ChainReport) U8() int {
	n := 0
	for _, c := range r.Chains {
		if c.U8 {
			n++
		}
	}
	return n
}

// Summary is one line: the int8 outputs passed as u8 (or chainable, and
// how many of those pass as u8) of all int8 outputs, and the blockers.
func (r Int8ChainReport) Summary() string {
	s := fmt.Sprintf("%d/%d as u8", len(r.Chains), r.Outputs)
	if u := r.U8(); u != len(r.Chains) {
		s = fmt.Sprintf("%d/%d chainable, %d as u8", len(r.Chains), r.Outputs, u)
	}
	keys := make([]string, 0, len(r.Blocked))
	for k := range r.Blocked {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		s += fmt.Sprintf("; %d %s", r.Blocked[k], k)
	}
	return s
}

// chainVerifySamples bounds the inputs the pass runs both graphs on.
const chainVerifySamples = 2

// int8ChainsPass passes every chainable int8 output as u8 (see above).
func int8ChainsPass(s *state) error {
	r := Int8Chains(s.g)
	if r.Outputs == 0 {
		return nil
	}
	rec := &buildlog.Int8Edges{Outputs: r.Outputs, Blocked: r.Blocked, Edges: []buildlog.Int8Edge{}}
	if s.prec != nil && s.prec.report != nil {
		s.prec.report.Int8Edges = rec
	}
	if len(r.Chains) == 0 {
		s.log.Info("int8-chains", "none", map[string]any{"int8_outputs": r.Outputs, "blocked": r.Blocked})
		return nil
	}
	before := append([]*ir.Node{}, s.g.Nodes...)
	idx := map[string]int{}
	for i, n := range s.g.Nodes {
		idx[n.Name] = i
	}
	// The nodes are copied before their attributes change: the precision
	// pass's graphs share them.
	set := func(name, attr string, a *ir.Attr) {
		i := idx[name]
		m := *s.g.Nodes[i]
		m.Attrs = maps.Clone(m.Attrs)
		m.Attrs[attr] = a
		s.g.Nodes[i] = &m
	}
	for _, c := range r.Chains {
		set(c.Producer, "y_scale", &ir.Attr{Name: "y_scale", Kind: ir.AttrFloat, F: c.Scale})
		for _, n := range c.Consumers {
			set(n, "x_u8", &ir.Attr{Name: "x_u8", Kind: ir.AttrInt, I: 1})
		}
	}
	n, on, err := sameOutputs(s, before)
	if err != nil {
		s.g.Nodes = before
		s.log.Warn("int8-chains", "dropped", map[string]any{"edges": len(r.Chains), "reason": err.Error()})
		return nil
	}
	rec.Verified, rec.VerifiedOn = n, on
	for _, c := range r.Chains {
		rec.Edges = append(rec.Edges, buildlog.Int8Edge{Tensor: c.Tensor, Producer: c.Producer, Consumers: c.Consumers, Scale: c.Scale})
		s.log.Info("int8-chains", "edge", map[string]any{"tensor": c.Tensor, "producer": c.Producer, "consumers": c.Consumers, "scale": c.Scale})
	}
	s.log.Info("int8-chains", "chained", map[string]any{"edges": len(r.Chains), "int8_outputs": r.Outputs, "blocked": r.Blocked,
		"verified_samples": n, "verified_on": on})
	return nil
}

// sameOutputs runs s.g and the graph of nodes before on up to
// chainVerifySamples inputs of the evaluation (else calibration) data and
// returns how many it ran and which data, or an error where an output's
// bits differ.
func sameOutputs(s *state, before []*ir.Node) (int, string, error) {
	data, on := s.opts.Quant.EvalData, "evaluation data"
	if len(data) == 0 {
		data, on = s.opts.Quant.Calib, "calibration data"
	}
	if len(data) == 0 {
		return 0, "", nil
	}
	old := *s.g
	old.Nodes = before
	r, err := newRunner(s, s.g)
	if err != nil {
		return 0, "", err
	}
	ea, err := exec.New(s.g, s.reg)
	if err != nil {
		return 0, "", err
	}
	eb, err := exec.New(&old, s.reg)
	if err != nil {
		return 0, "", err
	}
	n := 0
	for _, b := range data {
		b, err := asDType(b, r.input.Type.DType)
		if err != nil {
			return 0, "", err
		}
		for _, c := range quant.Rows(b, r.chunk) {
			if n == chainVerifySamples {
				return n, on, nil
			}
			in := map[string]*tensor.Tensor{r.input.Name: c}
			oa, err := ea.Run(in)
			if err != nil {
				return 0, "", fmt.Errorf("the graph with u8 edges: %w", err)
			}
			ob, err := eb.Run(in)
			if err != nil {
				return 0, "", err
			}
			for _, v := range s.g.Outputs {
				if !bytes.Equal(tensor.RawBytes(oa[v.Name]), tensor.RawBytes(ob[v.Name])) {
					return 0, "", fmt.Errorf("output %s differs with the u8 edges", v.Name)
				}
			}
			n++
		}
	}
	return n, on, nil
}
