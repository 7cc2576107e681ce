package compile

import (
	"fmt"
	"sort"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/fused"
)

// Int8 activations between consecutive int8 layers (issue 16 item 4): an
// int8 layer dequantizes its output to float32, and each int8 layer that
// reads it quantizes it again with its own calibrated x_scale. Where every
// reader of an int8 layer's output is an int8 layer that reads it as its
// activation (input 0, nowhere else) with the same x_scale, and the output
// is not a graph output, the producer's epilogue could write the
// consumers' u8 form (the quantization of the float32 value it has just
// computed, in the same sequence of operations, hence the same integers)
// and the consumers read it without quantizing: the same bits, one pass
// over the activation fewer on each side. Int8Chains finds those edges in
// a built graph; the bench reports them per model. Nothing rewrites the
// plan yet. The rewrite, as planned:
//
//   - a pass after the fusions (fuse-residual, fuse-expand-depthwise,
//     fuse-elementwise; before eliminate-dead) sets, for each Int8Chain,
//     the producer's attribute y_scale (the consumers' x_scale) and each
//     consumer's x_u8; q8's infer then types the producer's output uint8
//     and requires a uint8 input 0 of an x_u8 layer. The arena already
//     sizes values by DType.Size and reuses storage only between values of
//     one dtype; the plan encodes attributes and the outputs' types, so
//     nothing else changes in the format.
//   - producer: each run of outputs that epilogueRow (or the direct tiles'
//     epilogue) has just written in cache is quantized at once with
//     quantizeU8(1/y_scale), exactly as the consumer computes l.inv, into
//     the u8 output: the float32 output is never written to memory.
//   - consumer: every input path takes u8 (q+128) instead of quantizing:
//     the quad and cols packings copy bytes, the rows tiles read them as
//     they are, the int16 GEMM/pair paths and the portable twins widen
//     q = u8 - 128. The integers are those of quantize1 on the same
//     float32 values, so the plan's outputs are bit-identical with and
//     without the pass (the test: both plans at every level, 1-2 workers).
//   - later: through Reshape/Flatten (views: squeeze-excitation's path),
//     MaxPool (quantize1 is monotone, so max and quantization commute
//     exactly, except that NaN quantizes to 0: a window holding NaN must
//     follow MaxPool's NaN rule) and Concat (producers quantize into their slices when all
//     readers share one scale), which block most edges (bench column).

// Int8Chain is one chainable edge: the tensor an int8 layer writes and
// the int8 layers that alone read it, all with one x_scale.
type Int8Chain struct {
	Tensor    string
	Producer  string
	Consumers []string
	Scale     float32
}

// Int8ChainReport lists an int8 graph's chainable edges and, for every
// other int8 layer output, why it cannot chain (reason -> count).
type Int8ChainReport struct {
	Outputs int // int8 layers' outputs
	Chains  []Int8Chain
	Blocked map[string]int
}

func isQ8(n *ir.Node) bool { return n.Domain == fused.Domain && n.OpType == fused.OpQ8 }

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
		if why := chainBlocker(t, readers[t], outs[t]); why != "" {
			r.Blocked[why]++
			continue
		}
		c := Int8Chain{Tensor: t, Producer: p.Name, Scale: readers[t][0].Float("x_scale", 0)}
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

// Summary is one line: chainable edges of outputs and the blockers.
func (r Int8ChainReport) Summary() string {
	s := fmt.Sprintf("%d/%d", len(r.Chains), r.Outputs)
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
