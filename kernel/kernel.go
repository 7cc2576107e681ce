// Package kernel defines how vouch implements operators: an Op pairs a shape
// function with a portable Go kernel, and a Registry maps (domain, op type)
// to Ops. The operator families live in subpackages (elementwise, shape, nn,
// reduce, control, ...), each exporting its table; package kernel/builtin
// assembles them.
//
// Kernels follow DESIGN.md's determinism rules: every dot-product output is
// one fused multiply-add chain over k in a fixed order (see vmath.FMA32),
// threads split outputs and never reductions, and transcendental functions
// use vmath's own polynomials, never the platform's. A kernel's output is
// therefore a pure function of its inputs and attributes.
package kernel

import (
	"fmt"
	"sort"
	"time"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/kernel/vmath"
	"github.com/vouchml/vouch/tensor"
)

// RunFunc computes a node's outputs. in[i] is nil for an omitted optional
// input. It must not modify its inputs. Errors describe what is wrong with
// the inputs or attributes; the executor adds the node's name.
type RunFunc func(c *Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error)

// InferFunc computes a node's output types from its inputs' types (and
// constant values, when known). An output whose shape depends on input
// values that are not known returns a Type with RankKnown false or unknown
// dimensions.
type InferFunc func(n *ir.Node, in []ir.InferInput) ([]ir.Type, error)

// IntoFunc computes a node's outputs into out, which the executor has
// allocated (from its arena) with the dtypes and shapes that shape inference
// gives for these inputs: out[i].Data already has the right length, and its
// contents are garbage. It must produce exactly the bits Run produces, and
// should not allocate on its hot path (plans are run with zero allocations
// per inference after warm-up). It must not write to its inputs. out has
// one entry per node output; an omitted optional output is nil. out never
// aliases an input, except where the Op is marked InPlace (see there).
type IntoFunc func(c *Ctx, n *ir.Node, in, out []*tensor.Tensor) error

// Op is one operator: its kernel and its shape function.
type Op struct {
	Run   RunFunc
	Infer InferFunc
	// Into, when set, is the allocation-free form of Run.
	Into IntoFunc
	// Prepare, when set, builds the node's per-node state (State) before
	// its first call: the executor calls it once per step when it binds a
	// plan (exec.Executor.Bind), under the Ctx the step will run with, so
	// that geometry, packed or quantized weights and parsed fused bodies
	// are made at bind time and kept in the bound plan. in holds every
	// input's dtype and shape, and the values of the constant ones
	// (initializers); a non-constant input's Data is nil and Prepare MUST
	// NOT read it. It keeps what it builds with Prepared, under the keys
	// Run and Into look up (they build anything it left out). An error
	// fails the Bind.
	Prepare func(c *Ctx, n *ir.Node, in []*tensor.Tensor) error
	// InPlace marks an Into that tolerates out[0] sharing its storage with
	// any input of the same dtype and the same shape as out[0] (the
	// executor does this when that input dies at this node). Only kernels
	// that read each input element before writing the output element at
	// the same offset, and read nothing else from that input, may set it.
	InPlace bool
	// View marks an op whose only output is input 0's elements, in order,
	// under another shape (Reshape, Flatten, Squeeze, Unsqueeze, Identity,
	// inference Dropout). The executor may bind the output to input 0's
	// storage and skip the kernel; Into must still copy when it is called.
	View bool
	// Tactics, when set, lists the implementations the kernel can use for
	// this node and these input types, heuristic preference first. The
	// compiler times them (or takes the first, under the heuristic policy)
	// and records the choice in the node's TacticAttr attribute, which Run
	// and Into honour. Tactics of one op must give identical bits: the
	// choice changes speed, never results.
	Tactics func(n *ir.Node, in []ir.Type) []string
	// MinVersion and MaxVersion bound the opset versions this Op
	// implements (0 means no bound).
	MinVersion, MaxVersion int64
}

// SubgraphRunner runs a subgraph (If branches, Loop and Scan bodies) with
// the given inputs bound to its declared inputs, in the scope of the node
// being run. The executor provides it.
type SubgraphRunner interface {
	RunSubgraph(g *ir.Graph, inputs []*tensor.Tensor) ([]*tensor.Tensor, error)
}

// Ctx carries what a kernel may use besides its inputs: the machine it
// runs on (instruction set, worker pool) and the caller's hooks. It is the
// only place kernels read such choices from; no kernel package keeps them
// in package variables. exec fills it from exec.Options, so that a plan's
// runner, not the process, decides how its kernels run. The zero Ctx (and a
// nil *Ctx) runs at the CPU's best instruction set on the caller alone.
type Ctx struct {
	// Sub runs subgraphs; nil where the caller provides none.
	Sub SubgraphRunner
	// State is the node's prepared state (see State and Prepared), owned
	// by the executor and freed with the plan; nil where the caller keeps
	// none, and kernels then prepare on every call.
	State *State
	// ISA caps the instruction set (see Level); the zero value, ISABest,
	// is the CPU's best. Every level gives the same bits, so it is a speed
	// and test knob, never part of a plan.
	ISA ISA
	// Pool runs a kernel's output ranges on persistent workers; nil runs
	// them on the caller. It never changes a kernel's bits.
	Pool *parallel.Pool
	// Epilogue is set only by a fused layer (kernel/fused) around its base
	// kernel's Into call, and is zero everywhere else. A kernel that
	// supports it (today: nn's float32 Conv and MatMul Into) applies it to every
	// output as the output is stored and sets Epilogue.Applied; any other
	// kernel ignores it, and the fused layer then runs the separate passes.
	Epilogue Epilogue
	// Trace, when set (a profiled run: `vouch bench --layers`), is called
	// by a layer made of other layers (a ConvChain) with each part's wall
	// time; the layer's own time is reported by its caller as usual.
	Trace func(n *ir.Node, d time.Duration)
	// Test, when set, holds a kernel package's own choices between code
	// paths that give the same bits (a tile shape, a packing), which only
	// that package's tests make; each package reads only its own
	// unexported type, and everyone else leaves it nil. It replaces
	// test-only package variables, so that such tests can run in parallel.
	Test any
}

// Epilogue is the elementwise work that follows a base op in a fused
// layer, handed to the base kernel so that it is done while each output
// tile is still in cache rather than in later passes over memory. It is
// exactly the float32 operations of the unfused nodes, in their order, on
// each output y (after the base op's own bias, y = acc + bias):
//
//	if Residual != nil { y = y + Residual[i] }   // the Add, output first
//	if ColBias != nil { y = y + ColBias[i%N] }    // the Add of a [N] operand
//	if Residual2 != nil { y = y + Residual2[i] } // a second Add, after the first
//	if HasLo && y < Lo { y = Lo }                 // Relu (Lo = 0), Clip's min
//	if HasHi && y > Hi { y = Hi }                 // Clip's max
//	if Act != nil { y = act(y) }                  // Gelu, ... (see Act)
//
// so NaNs pass through the bounds and -0 stays -0 (elementwise's Relu and
// Clip). Residual has the output's layout and length. ColBias (at most one
// of Residual and ColBias is set) is an Add operand that broadcasts over
// every axis but the last: N = len(ColBias) is the output's last dimension
// (a MatMul's bias). Residual2 is the residual Add that follows a bias Add
// (a transformer's y = (x·W + b) + x'): it has the output's layout and
// length and is added, as its own float32 addition, after ColBias (or
// Residual). A kernel that does not know a field that is set must leave
// the epilogue alone.
type Epilogue struct {
	Residual     []float32
	ColBias      []float32
	Residual2    []float32
	Lo, Hi       float32
	HasLo, HasHi bool
	// Act, when set, is an elementwise activation applied last, in place:
	// the kernel calls Act(vec, y, y) on runs of finished outputs (each output
	// exactly once, after the bias, the Add and the bounds). It must be
	// the very slice function the unfused activation's kernel uses (e.g.
	// vmath.Vec.GeluErf32s), elementwise so that where the runs start and
	// end changes nothing; the kernel passes it its Ctx's Vec.
	Act func(v vmath.Vec, dst, src []float32)
	// Applied is set by the kernel that did the work.
	Applied bool
}

// Active reports whether e asks for any work.
func (e *Epilogue) Active() bool {
	return e.Residual != nil || e.ColBias != nil || e.Residual2 != nil || e.HasLo || e.HasHi || e.Act != nil
}

// TacticAttr is the node attribute that holds the tactic the compiler
// chose ("" or absent: the kernel's own default).
const TacticAttr = "vouch_tactic"

// Tactic returns the tactic recorded on n, or "".
func Tactic(n *ir.Node) string { return n.String(TacticAttr, "") }

// constInputs maps a tactic to the inputs it needs to be constant
// (initializers): a kernel that packs weights once per layer relies on it.
var constInputs = map[string][]int{}

// RegisterConstInputs records that tactic needs inputs idx of its node to
// be constant. Kernels call it from init; the compiler offers the tactic
// only where those inputs are initializers, and exec refuses a plan that
// sets it elsewhere.
func RegisterConstInputs(tactic string, idx ...int) { constInputs[tactic] = idx }

// ConstInputs returns the inputs of n that its tactic needs to be
// constant (none for most nodes).
func ConstInputs(n *ir.Node) []int { return TacticConstInputs(Tactic(n)) }

// TacticConstInputs returns the inputs that tactic needs to be constant.
func TacticConstInputs(tactic string) []int { return constInputs[tactic] }

// Table maps op types to Ops, for one family of operators.
type Table map[string]*Op

// Registry maps a domain and op type to its Op.
type Registry struct {
	ops map[string]*Op // key: domain + "::" + op type
}

// NewRegistry returns a registry holding the given tables. A name defined
// in two tables is a programmer error and panics.
func NewRegistry(domain string, tables ...Table) *Registry {
	r := &Registry{ops: map[string]*Op{}}
	for _, t := range tables {
		r.Add(domain, t)
	}
	return r
}

// Add registers every op of t under domain.
func (r *Registry) Add(domain string, t Table) {
	for name, op := range t {
		k := key(domain, name)
		if _, dup := r.ops[k]; dup {
			panic(fmt.Sprintf("kernel: op %s registered twice", k))
		}
		r.ops[k] = op
	}
}

// With returns a copy of r with t registered under domain as well (r is
// not changed).
func (r *Registry) With(domain string, t Table) *Registry {
	c := &Registry{ops: make(map[string]*Op, len(r.ops)+len(t))}
	for k, op := range r.ops {
		c.ops[k] = op
	}
	c.Add(domain, t)
	return c
}

func key(domain, op string) string {
	if domain == "ai.onnx" {
		domain = ""
	}
	return domain + "::" + op
}

// Lookup returns the Op for a node, or an error naming what is missing.
func (r *Registry) Lookup(n *ir.Node) (*Op, error) {
	op, ok := r.ops[key(n.Domain, n.OpType)]
	if !ok {
		if n.Domain != "" {
			return nil, fmt.Errorf("kernel: unsupported operator %s in domain %q", n.OpType, n.Domain)
		}
		return nil, fmt.Errorf("kernel: unsupported operator %s", n.OpType)
	}
	if op.MinVersion > 0 && n.Version > 0 && n.Version < op.MinVersion {
		return nil, fmt.Errorf("kernel: %s is implemented from opset %d, model uses opset %d", n.OpType, op.MinVersion, n.Version)
	}
	if op.MaxVersion > 0 && n.Version > op.MaxVersion {
		return nil, fmt.Errorf("kernel: %s is implemented up to opset %d, model uses opset %d", n.OpType, op.MaxVersion, n.Version)
	}
	return op, nil
}

// Names lists the registered op types of the default domain, sorted.
func (r *Registry) Names() []string {
	var out []string
	for k := range r.ops {
		if len(k) > 2 && k[:2] == "::" {
			out = append(out, k[2:])
		}
	}
	sort.Strings(out)
	return out
}

// InferNode implements ir.Inferrer.
func (r *Registry) InferNode(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	op, err := r.Lookup(n)
	if err != nil {
		return nil, err
	}
	if op.Infer == nil {
		return nil, fmt.Errorf("kernel: %s has no shape function", n.OpType)
	}
	return op.Infer(n, in)
}
