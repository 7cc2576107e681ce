package exec

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// ErrBudget is wrapped by every error of a run (or a bind) that would pass
// its Limits: a value or arena larger than MaxBytes, more subgraph runs
// than MaxSubgraphRuns, a run longer than MaxDuration. The sizes are
// checked before anything is allocated.
var ErrBudget = errors.New("over budget")

// Limits bound what one run of a plan may claim, whatever its model or its
// inputs say. The zero value of a field means its default.
type Limits struct {
	// MaxBytes bounds the arena of a bound plan and every single value a
	// kernel allocates (default DefaultMaxBytes). A value's size is
	// inferred from the node's actual inputs before its kernel runs; a
	// node-by-node run (Executor.Run) also bounds the values it holds at
	// once, the next node's outputs included.
	MaxBytes int64
	// MaxSubgraphRuns bounds the body runs of Loop, Scan, If and the
	// sequence maps in one run (default DefaultMaxSubgraphRuns).
	MaxSubgraphRuns int64
	// MaxDuration bounds one run's wall time, checked between nodes and
	// between body runs (default DefaultMaxDuration; negative: none).
	MaxDuration time.Duration
}

// The defaults of Limits.
const (
	DefaultMaxBytes        = 4 << 30
	DefaultMaxSubgraphRuns = 1 << 20
	DefaultMaxDuration     = 5 * time.Minute
)

func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxSubgraphRuns <= 0 {
		l.MaxSubgraphRuns = DefaultMaxSubgraphRuns
	}
	if l.MaxDuration == 0 {
		l.MaxDuration = DefaultMaxDuration
	}
	return l
}

// SetLimits sets the limits every later Run and Bind works under. Call it
// before the executor is shared.
func (e *Executor) SetLimits(l Limits) { e.limits = l.withDefaults() }

// Limits returns the executor's limits, defaults filled in.
func (e *Executor) Limits() Limits { return e.limits }

// TypeBytes is the size in bytes of a value of static type t, saturating
// at math.MaxInt64 instead of overflowing (a hostile shape's product).
func TypeBytes(t ir.Type) (int64, bool) {
	shape, ok := t.Static()
	if !ok {
		return 0, false
	}
	size := int64(t.DType.Size())
	if size <= 0 {
		size = 16 // strings and other indirect elements: their headers
	}
	return ShapeBytes(shape, size), true
}

// ShapeBytes is the size of a tensor of shape with elements of size bytes,
// saturating at math.MaxInt64.
func ShapeBytes(shape []int, size int64) int64 {
	n := uint64(size)
	for _, d := range shape {
		if d == 0 {
			return 0
		}
	}
	for _, d := range shape {
		if d < 0 {
			return 1<<63 - 1
		}
		hi, lo := bits.Mul64(n, uint64(d))
		if hi != 0 || lo > 1<<63-1 {
			return 1<<63 - 1
		}
		n = lo
	}
	return int64(n)
}

// run is the accounting of one run: its start and its subgraph runs.
type run struct {
	limits Limits
	start  time.Time
	subs   atomic.Int64
	ctx    context.Context // nil, or the caller's (ExecuteContext): the run stops when it ends
	// live is the size of the values a node-by-node run holds at the top
	// level (inputs and weights aside): with the next node's outputs it
	// must stay within MaxBytes.
	live int64
}

func newRun(l Limits) *run { return &run{limits: l, start: time.Now()} }

// check fails once the run has passed its time budget; n names the
// node about to run (its label is built only for the error).
func (r *run) check(n *ir.Node) error {
	if r.ctx != nil {
		if err := r.ctx.Err(); err != nil {
			return fmt.Errorf("exec: %s: run stopped: %w", n.Label(), context.Cause(r.ctx))
		}
	}
	if r.limits.MaxDuration > 0 {
		if d := time.Since(r.start); d > r.limits.MaxDuration {
			return fmt.Errorf("exec: %s: %w: the run has taken %v, more than its time budget %v", n.Label(), ErrBudget, d.Round(time.Millisecond), r.limits.MaxDuration)
		}
	}
	return nil
}

// reset starts a new run's accounting.
func (r *run) reset(l Limits) {
	r.limits, r.start = l, time.Now()
	r.subs.Store(0)
	r.live = 0
}

// reserve checks, before n runs, that its outputs fit the budget alone
// and beside the values the run already holds.
func (r *run) reserve(n *ir.Node, op *kernel.Op, in []*tensor.Tensor) error {
	if op == nil {
		return nil
	}
	b, err := outputBytes(n, op, in, r.limits.MaxBytes)
	if err != nil {
		return err
	}
	if r.live+b > r.limits.MaxBytes {
		return fmt.Errorf("exec: %s: %w: its outputs (%d bytes) beside the %d bytes of values the run holds would pass the budget of %d bytes per run", n.Label(), ErrBudget, b, r.live, r.limits.MaxBytes)
	}
	return nil
}

// subgraph counts one body run.
func (r *run) subgraph(g *ir.Graph) error {
	if n := r.subs.Add(1); n > r.limits.MaxSubgraphRuns {
		return fmt.Errorf("exec: subgraph %q: %w: more than %d body runs in one run (a Loop's trip count?)", g.Name, ErrBudget, r.limits.MaxSubgraphRuns)
	}
	if r.ctx != nil {
		if err := r.ctx.Err(); err != nil {
			return fmt.Errorf("exec: subgraph %q: run stopped: %w", g.Name, context.Cause(r.ctx))
		}
	}
	if r.limits.MaxDuration > 0 {
		if d := time.Since(r.start); d > r.limits.MaxDuration {
			return fmt.Errorf("exec: subgraph %q: %w: the run has taken %v, more than its time budget %v", g.Name, ErrBudget, d.Round(time.Millisecond), r.limits.MaxDuration)
		}
	}
	return nil
}

// maxConstElems bounds the inputs handed to a shape function as constants
// when the outputs are sized before a kernel runs: shape-like inputs are
// small, and big data tensors are never read by a shape function.
const maxConstElems = 1 << 16

// CheckOutputs infers n's output types from its actual inputs (their
// shapes, and the values of small ones) and refuses the node when one of
// them is larger than the budget: a ConstantOfShape, Expand, Tile, Range,
// Pad, Resize or Reshape is refused before it allocates what a model or a
// request claims. A node whose shape function fails or gives no static
// type is left to its kernel, whose own checks apply.
func CheckOutputs(n *ir.Node, op *kernel.Op, in []*tensor.Tensor, maxBytes int64) error {
	_, err := outputBytes(n, op, in, maxBytes)
	return err
}

// outputBytes is CheckOutputs that also returns the outputs' total size,
// as far as the shape function makes it static.
func outputBytes(n *ir.Node, op *kernel.Op, in []*tensor.Tensor, maxBytes int64) (int64, error) {
	if op.Infer == nil {
		return 0, nil
	}
	ii := make([]ir.InferInput, len(in))
	for i, t := range in {
		if t == nil {
			continue
		}
		ii[i] = ir.InferInput{Present: true, Type: ir.TensorType(t)}
		if t.Len() <= maxConstElems {
			ii[i].Const = t
		}
	}
	types, err := op.Infer(n, ii)
	if err != nil {
		return 0, nil
	}
	var total int64
	for j, t := range types {
		b, ok := TypeBytes(t)
		if !ok {
			continue
		}
		if b > maxBytes {
			name := ""
			if j < len(n.Outputs) {
				name = n.Outputs[j]
			}
			return 0, fmt.Errorf("exec: %s: %w: output %q would be %v%s, %d bytes, more than the budget of %d bytes per value", n.Label(), ErrBudget, name, t.DType, shapeText(t), b, maxBytes)
		}
		total = min(total+b, 1<<62)
	}
	return total, nil
}

// tensorBytes is the size of a value a run holds.
func tensorBytes(t *tensor.Tensor) int64 {
	if t == nil {
		return 0
	}
	return ShapeBytes(t.Shape, max(int64(t.DType.Size()), 1))
}

func shapeText(t ir.Type) string {
	s, _ := t.Static()
	return tensor.ShapeString(s)
}
