package compile

import (
	"fmt"
	"sort"

	"github.com/vouchml/vouch/buildlog"
	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// state is what the passes share.
type state struct {
	g      *ir.Graph
	reg    *kernel.Registry
	log    *buildlog.Log
	origin map[string][]string // layer (node) name -> ONNX nodes it came from
	pass   string              // the running pass's name, for the log
	opts   Options
	prec   *precisionResult // set by the precision pass
	qdq    *qdqInfo         // set by import-qdq for a pre-quantized model
}

// pass is one named step of the pipeline. Names are stable: they appear in
// build logs, plans and Options.DisabledPasses.
type pass struct {
	name string
	run  func(s *state) error
}

// pipeline is the fixed order of passes.
func pipeline() []pass {
	return []pass{
		{"name-nodes", nameNodes},
		{"eliminate-identity", eliminateIdentity},
		{"import-qdq", importQDQ},
		{"fold-constants", foldConstants},
		{"fold-shapes", foldShapes},
		{"fold-constants-2", foldConstants},
		{"fold-layout", foldLayout},
		{"fuse-layernorm", fuseLayerNorm},
		{"fuse-gelu", fuseGelu},
		{"fuse-gelu-tanh", fuseGeluTanh},
		{"fuse-attention", fuseAttention},
		{"fold-batchnorm", foldBatchNorm},
		{"fold-batchnorm-gemm", foldBatchNormGemm},
		{"fuse-activation", fuseActivation},
		{"precision", precisionPass},
		{"fuse-residual", fuseResidual},
		{"fuse-expand-depthwise", fuseExpandDepthwise},
		{"fuse-conv-chain", fuseConvChain},
		{"transpose-gemm-weights", transposeGemmWeights},
		{"fuse-elementwise", fuseElementwise},
		{"eliminate-dead", eliminateDead},
	}
}

// NumericPasses are the passes that replace arithmetic with different
// (equally deterministic) arithmetic, so a plan built with them differs in
// the last bits from the ONNX graph run node by node: BatchNormalization
// folded into weights, LayerNorm and GELU chains computed by one kernel.
// Every other pass preserves bits exactly (compile tests check it).
var NumericPasses = []string{"fuse-layernorm", "fuse-gelu", "fuse-gelu-tanh", "fold-batchnorm", "fold-batchnorm-gemm"}

// PassNames lists the pipeline's pass names in order.
func PassNames() []string {
	var out []string
	for _, p := range pipeline() {
		out = append(out, p.name)
	}
	return out
}

// uses counts how many times each value is read (node inputs, subgraph
// references, graph outputs).
func uses(g *ir.Graph) map[string]int {
	u := map[string]int{}
	for _, n := range g.Nodes {
		for _, in := range n.Inputs {
			if in != "" {
				u[in]++
			}
		}
		for _, a := range n.Attrs {
			for _, sg := range subgraphs(a) {
				for _, name := range ir.FreeVars(sg) {
					u[name]++
				}
			}
		}
	}
	for _, o := range g.Outputs {
		u[o.Name]++
	}
	return u
}

func subgraphs(a *ir.Attr) []*ir.Graph {
	if a.G != nil {
		return append([]*ir.Graph{a.G}, a.Graphs...)
	}
	return a.Graphs
}

func isGraphOutput(g *ir.Graph, name string) bool {
	for _, o := range g.Outputs {
		if o.Name == name {
			return true
		}
	}
	return false
}

// nameNodes gives every node a unique name (layers are addressed by name).
func nameNodes(s *state) error {
	seen := map[string]bool{}
	for i, n := range s.g.Nodes {
		name := n.Name
		if name == "" || seen[name] {
			base := name
			if base == "" {
				base = n.OpType
			}
			name = fmt.Sprintf("%s_%d", base, i)
			for seen[name] {
				name += "_"
			}
			s.log.Info("name-nodes", "named", map[string]any{"index": i, "op": n.OpType, "name": name})
			n.Name = name
		}
		seen[name] = true
		s.origin[name] = []string{name}
	}
	return nil
}

// renameUses makes every reader of old read new instead, in g and in its
// subgraphs (which may reference old from the outer scope).
func renameUses(g *ir.Graph, old, new string) {
	for _, n := range g.Nodes {
		for i, in := range n.Inputs {
			if in == old {
				n.Inputs[i] = new
			}
		}
		for _, a := range n.Attrs {
			for _, sg := range subgraphs(a) {
				renameUses(sg, old, new)
			}
		}
	}
	for _, o := range g.Outputs {
		if o.Name == old {
			// subgraph outputs naming an outer value
			o.Name = new
		}
	}
}

// eliminateIdentity removes Identity nodes and inference-mode Dropout
// (whose mask output is unused) by rewiring their readers.
func eliminateIdentity(s *state) error {
	u := uses(s.g)
	var keep []*ir.Node
	for _, n := range s.g.Nodes {
		removable := n.Domain == "" && (n.OpType == "Identity" || n.OpType == "Dropout") &&
			len(n.Inputs) >= 1 && n.Inputs[0] != "" && len(n.Outputs) >= 1
		if removable && n.OpType == "Dropout" {
			if len(n.Outputs) > 1 && n.Outputs[1] != "" && u[n.Outputs[1]] > 0 {
				removable = false // the mask is used
			}
			if len(n.Inputs) > 2 && n.Inputs[2] != "" {
				removable = false // training_mode given as an input
			}
		}
		if removable && isGraphOutput(s.g, n.Outputs[0]) {
			removable = false // the output name is part of the interface
		}
		if !removable {
			keep = append(keep, n)
			continue
		}
		renameUses(s.g, n.Outputs[0], n.Inputs[0])
		s.log.Info("eliminate-identity", "removed", map[string]any{"node": n.Name, "op": n.OpType, "input": n.Inputs[0], "output": n.Outputs[0]})
	}
	s.g.Nodes = keep
	return nil
}

// maxFoldBytes bounds the size of a folded constant (a model that expands
// a tiny constant into a huge tensor keeps the expansion at run time).
const maxFoldBytes = 64 << 20

// nondeterministic ops are never folded.
var nondeterministic = map[string]bool{"RandomNormal": true, "RandomUniform": true, "RandomNormalLike": true, "RandomUniformLike": true, "Bernoulli": true, "Multinomial": true}

// foldConstants evaluates every node whose inputs are all constants,
// replacing it with initializers.
func foldConstants(s *state) error {
	var keep []*ir.Node
	for _, n := range s.g.Nodes {
		if !foldable(s.g, n) {
			keep = append(keep, n)
			continue
		}
		op, err := s.reg.Lookup(n)
		if err != nil {
			keep = append(keep, n)
			continue
		}
		in := make([]*tensor.Tensor, len(n.Inputs))
		for i, name := range n.Inputs {
			if name != "" {
				in[i] = s.g.Initializers[name]
			}
		}
		// Size the outputs from the shape function before evaluating: a
		// constant claiming 2^33 elements is not computed at build time.
		if exec.CheckOutputs(n, op, in, maxFoldBytes) != nil {
			keep = append(keep, n)
			continue
		}
		outs, err := op.Run(&kernel.Ctx{}, n, in)
		if err != nil {
			return fmt.Errorf("evaluating constant %s: %w", n.Label(), err)
		}
		size := 0
		for _, o := range outs {
			if o != nil {
				size += o.Len() * max(1, o.DType.Size())
			}
		}
		if size > maxFoldBytes || len(outs) < len(n.Outputs) {
			keep = append(keep, n)
			continue
		}
		fields := map[string]any{"node": n.Name, "op": n.OpType}
		var made []string
		for i, name := range n.Outputs {
			if name == "" {
				continue
			}
			s.g.Initializers[name] = outs[i]
			made = append(made, fmt.Sprintf("%s %v", name, outs[i]))
		}
		fields["outputs"] = made
		s.log.Info(s.pass, "folded", fields)
	}
	s.g.Nodes = keep
	return nil
}

func foldable(g *ir.Graph, n *ir.Node) bool {
	if nondeterministic[n.OpType] || n.Domain != "" {
		return false
	}
	for _, a := range n.Attrs {
		if len(subgraphs(a)) > 0 {
			return false
		}
	}
	for _, o := range n.Outputs {
		if isGraphOutput(g, o) {
			return false
		}
	}
	for _, in := range n.Inputs {
		if in == "" {
			continue
		}
		if _, ok := g.Initializers[in]; !ok {
			return false
		}
		for _, v := range g.Inputs { // a legacy initializer-input may be overridden
			if v.Name == in {
				return false
			}
		}
	}
	return true
}

// eliminateDead removes nodes none of whose outputs is read, and
// initializers nothing reads.
func eliminateDead(s *state) error {
	for {
		u := uses(s.g)
		var keep []*ir.Node
		for _, n := range s.g.Nodes {
			live := false
			for _, o := range n.Outputs {
				if o != "" && u[o] > 0 {
					live = true
				}
			}
			if live {
				keep = append(keep, n)
			} else {
				s.log.Info("eliminate-dead", "removed", map[string]any{"node": n.Name, "op": n.OpType})
			}
		}
		changed := len(keep) != len(s.g.Nodes)
		s.g.Nodes = keep
		if !changed {
			break
		}
	}
	u := uses(s.g)
	names := make([]string, 0, len(s.g.Initializers))
	for name := range s.g.Initializers {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if u[name] == 0 {
			delete(s.g.Initializers, name)
			s.log.Info("eliminate-dead", "dropped-weight", map[string]any{"weight": name})
		}
	}
	return nil
}
