package compile

import (
	"fmt"
	"sort"
	"strings"

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
	did    counts           // what the passes did, for the build report
}

// counts are what the passes did, counted where they do it (not parsed
// back from the build log): fusions by pass (and kind, "pass:kind"),
// constants folded, nodes removed. The build report takes them as they
// are.
type counts struct {
	fusions map[string]int
	folded  int
	removed int
}

// fused logs a fusion (event "fused"), or a fold that merges nodes into a
// layer (event "folded": a BatchNormalization into its Conv, a transpose
// pair), and counts it under the running pass and fields["kind"].
func (s *state) fused(event string, fields map[string]any) {
	s.log.Info(s.pass, event, fields)
	k := s.pass
	if kind, ok := fields["kind"].(string); ok {
		k += ":" + kind
	}
	if s.did.fusions == nil {
		s.did.fusions = map[string]int{}
	}
	s.did.fusions[k]++
}

// foldedConst logs and counts a constant folded.
func (s *state) foldedConst(fields map[string]any) {
	s.log.Info(s.pass, "folded", fields)
	s.did.folded++
}

// removedNode logs and counts a removal.
func (s *state) removedNode(fields map[string]any) {
	s.log.Info(s.pass, "removed", fields)
	s.did.removed++
}

// pass is one named step of the pipeline. Names are stable: they appear in
// build logs, plans and Options.DisabledPasses. A required pass is one the
// plan cannot do without (later passes and the runtime rely on what it
// establishes); disabling it is an error, never a silent skip.
type pass struct {
	name     string
	run      func(s *state) error
	required bool
}

// pipeline is the fixed order of passes.
func pipeline() []pass {
	return []pass{
		// Layers are addressed by name: the origin map, the build log,
		// tactics, precision overrides and the plan all key on it.
		{name: "name-nodes", run: nameNodes, required: true},
		{name: "eliminate-identity", run: eliminateIdentity},
		{name: "import-qdq", run: importQDQ},
		{name: "fold-constants", run: foldConstants},
		{name: "fold-shapes", run: foldShapes},
		{name: "fold-constants-2", run: foldConstants},
		{name: "fold-shapes-fixpoint", run: foldShapesFixpoint},
		{name: "drop-inference-dropout", run: dropInferenceDropout},
		{name: "fold-channel-shuffle", run: foldChannelShuffle},
		{name: "eliminate-noop-pad", run: eliminateNoopPad},
		{name: "fold-pad-pool", run: foldPadPool},
		{name: "fold-layout", run: foldLayout},
		{name: "fuse-layernorm", run: fuseLayerNorm},
		{name: "fuse-gelu", run: fuseGelu},
		{name: "fuse-gelu-tanh", run: fuseGeluTanh},
		{name: "fuse-attention", run: fuseAttention},
		{name: "fold-batchnorm", run: foldBatchNorm},
		{name: "fold-batchnorm-gemm", run: foldBatchNormGemm},
		{name: "drop-padding-taps", run: dropPaddingTaps},
		{name: "split-padding-taps", run: splitPaddingTaps},
		{name: "point-gemm", run: pointGemm},
		{name: "fuse-activation", run: fuseActivation},
		{name: "precision", run: precisionPass},
		{name: "fuse-hard-swish", run: fuseHardSwish},
		{name: "fuse-channel-mul", run: fuseChannelMul},
		{name: "fuse-scale-shift", run: fuseScaleShift},
		{name: "fuse-residual", run: fuseResidual},
		{name: "fuse-expand-depthwise", run: fuseExpandDepthwise},
		{name: "fuse-conv-chain", run: fuseConvChain},
		{name: "transpose-gemm-weights", run: transposeGemmWeights},
		{name: "fuse-elementwise", run: fuseElementwise},
		{name: "int8-chains", run: int8ChainsPass},
		{name: "eliminate-dead", run: eliminateDead},
	}
}

// passOrder lists the constraints on the pipeline's order, each "a
// before b" with the reason; checkPassOrder enforces them on the table
// when the package starts, so a reordering that breaks one fails at once.
var passOrder = [...]struct{ a, b, why string }{
	{"name-nodes", "eliminate-identity", "every pass logs and keys layers by name"},
	{"import-qdq", "fold-constants", "the QDQ pairs of weights are read before folding turns them into plain constants"},
	{"fold-constants", "fold-shapes", "shape folding reads the constants folded first"},
	{"fold-shapes", "fold-constants-2", "the second fold evaluates what shape folding made constant"},
	{"fold-batchnorm", "fuse-activation", "a BatchNormalization folded into its Conv puts the activation next to the Conv"},
	{"fold-batchnorm-gemm", "fuse-activation", "the same for Gemm"},
	{"fuse-layernorm", "fuse-elementwise", "an elementwise chain would otherwise swallow the LayerNorm's parts"},
	{"fuse-gelu", "fuse-elementwise", "an elementwise chain would otherwise swallow the GELU's parts"},
	{"fuse-gelu-tanh", "fuse-elementwise", "the same for the tanh GELU"},
	{"fuse-activation", "precision", "precision converts fused layers (Q8 keeps their epilogue)"},
	{"precision", "fuse-residual", "a second Add is fused only into float32 layers"},
	{"fuse-activation", "fuse-residual", "fuse-residual extends a fused MatMul/Gemm with its bias Add"},
	{"precision", "fuse-expand-depthwise", "only float32 convolutions are paired"},
	{"precision", "fuse-conv-chain", "only float32 convolutions are chained"},
	{"fuse-expand-depthwise", "fuse-conv-chain", "a chain takes what pairing left"},
	{"precision", "transpose-gemm-weights", "Gemms the precision pass converted are not transposed"},
	{"fuse-elementwise", "eliminate-dead", "dead values are removed last, after every rewrite"},
	{"fuse-elementwise", "int8-chains", "the u8 edges are set between the layers of the final graph"},
	{"int8-chains", "eliminate-dead", "dead values are removed last, after every rewrite"},
	{"fold-constants-2", "eliminate-noop-pad", "a Pad's pads are an initializer only once its Constant is folded"},
	{"fold-shapes-fixpoint", "eliminate-noop-pad", "a Pad's pads computed from shapes are folded by the fixpoint"},
	{"fold-shapes-fixpoint", "drop-inference-dropout", "a Dropout's training_mode is a constant once folded"},
	{"fold-shapes-fixpoint", "fold-channel-shuffle", "the shuffle's Reshape targets are constants once folded"},
	{"fold-constants-2", "fold-pad-pool", "the same for the Pad folded into an AveragePool"},
	{"fold-batchnorm", "drop-padding-taps", "the folded weights are the ones cropped"},
	{"drop-padding-taps", "fuse-activation", "plain Convs are cropped, before they become fused layers"},
	{"drop-padding-taps", "split-padding-taps", "the taps no output reads go first; what is left is split"},
	{"split-padding-taps", "fuse-activation", "plain Convs are split, before they become fused layers"},
	{"fold-batchnorm", "point-gemm", "the folded weights are the ones rewritten"},
	{"point-gemm", "fuse-activation", "plain Convs become Gemms, before they become fused layers"},
	{"fold-batchnorm", "fuse-scale-shift", "a BatchNormalization that reads a Conv is folded into its weights, not made a layer"},
	{"precision", "fuse-scale-shift", "only float32 BatchNormalization becomes a scale-shift layer"},
	{"precision", "fuse-hard-swish", "layers the precision pass converted keep their own epilogue"},
	{"fuse-hard-swish", "fuse-elementwise", "an elementwise chain would otherwise swallow the HardSigmoid and Mul"},
	{"fuse-hard-swish", "fuse-conv-chain", "a chain takes only Relu/Clip layers: the pass sees the plain Conv first"},
	{"fuse-hard-swish", "fuse-channel-mul", "a HardSwish's Mul is the activation's, not a channel scale"},
	{"fuse-hard-swish", "fuse-expand-depthwise", "an expansion or depthwise part may carry the HardSwish"},
	{"precision", "fuse-channel-mul", "only float32 Muls become channel scales"},
}

func init() {
	if err := checkPassOrder(pipeline(), passOrder[:]); err != nil {
		panic(err) // a programmer error in the table
	}
}

// checkPassOrder reports the first constraint the table breaks, or one
// that names a pass the table lacks.
func checkPassOrder(ps []pass, order []struct{ a, b, why string }) error {
	at := map[string]int{}
	for i, p := range ps {
		if _, dup := at[p.name]; dup {
			return fmt.Errorf("compile: pass %q is in the pipeline twice", p.name)
		}
		at[p.name] = i
	}
	for _, c := range order {
		i, ok := at[c.a]
		j, ok2 := at[c.b]
		if !ok || !ok2 {
			return fmt.Errorf("compile: pass order %q before %q names a pass the pipeline lacks", c.a, c.b)
		}
		if i >= j {
			return fmt.Errorf("compile: pass %q must run before %q (%s)", c.a, c.b, c.why)
		}
	}
	return nil
}

// checkDisabled refuses a disabled pass that is required or unknown.
func checkDisabled(ps []pass, disabled []string) error {
	for _, d := range disabled {
		found := false
		for _, p := range ps {
			if p.name != d {
				continue
			}
			found = true
			if p.required {
				return fmt.Errorf("compile: pass %q is required and cannot be disabled", d)
			}
		}
		if !found {
			var names []string
			for _, p := range ps {
				names = append(names, p.name)
			}
			return fmt.Errorf("compile: no pass %q to disable (passes: %s)", d, strings.Join(names, ", "))
		}
	}
	return nil
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
		s.removedNode(map[string]any{"node": n.Name, "op": n.OpType, "input": n.Inputs[0], "output": n.Outputs[0]})
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
		s.foldedConst(fields)
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
				s.removedNode(map[string]any{"node": n.Name, "op": n.OpType})
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
