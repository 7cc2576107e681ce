package tree

import (
	"fmt"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/tensor"
)

// Tactics of the tree operators; both reach the same leaves and share the
// summation, so they give the same bits.
const (
	// TacticCompiled walks the key layout (see compiled), interleaving
	// rows (a batch) or trees (one row).
	TacticCompiled = "tree.compiled"
	// TacticWalk walks the parsed trees node by node with the ONNX-ML
	// comparisons: the portable reference twin.
	TacticWalk = "tree.walk"
)

// Ops returns the tree-ensemble operators, for domain Domain.
func Ops() kernel.Table {
	return kernel.Table{
		"TreeEnsembleClassifier": {Run: run, Into: into, Infer: infer, Tactics: tactics, Prepare: prepareOp, MinVersion: 1, MaxVersion: 5},
		"TreeEnsembleRegressor":  {Run: run, Into: into, Infer: infer, Tactics: tactics, Prepare: prepareOp, MinVersion: 1, MaxVersion: 5},
		"TreeEnsemble":           {Run: run, Into: into, Infer: infer, Tactics: tactics, Prepare: prepareOp, MinVersion: 5},
	}
}

// prepared is a node's parsed ensemble and its compiled layout.
type prepared struct {
	e *Ensemble
	c *compiled
}

// preparedKey keys a node's prepared ensemble in its kernel.State (the
// bound plan's, freed with it).
type preparedKey struct{ n *ir.Node }

// Prepared parses n's ensemble (each call parses anew: callers keep it).
func Prepared(n *ir.Node) (*Ensemble, error) { return FromNode(n) }

// build parses and lays out n's ensemble.
func build(n *ir.Node) (*prepared, error) {
	e, err := FromNode(n)
	if err != nil {
		return nil, err
	}
	return &prepared{e: e, c: e.compile()}, nil
}

// prepare returns n's prepared ensemble from c's per-node state, built
// once per bound plan (at bind, through prepareOp); without a state it is
// built for this call.
func prepare(c *kernel.Ctx, n *ir.Node) (*prepared, error) {
	return kernel.Prepared(c, preparedKey{n}, nil, func() (*prepared, error) { return build(n) })
}

// prepareOp is the operators' Op.Prepare: the ensemble parsed and laid
// out when the plan is bound, not on its first request.
func prepareOp(c *kernel.Ctx, n *ir.Node, _ []*tensor.Tensor) error {
	_, err := prepare(c, n)
	return err
}

func tactics(n *ir.Node, in []ir.Type) []string {
	p, err := build(n)
	if err != nil || p.c == nil || len(in) < 1 || in[0].DType == tensor.Float64 {
		return nil
	}
	return []string{TacticCompiled, TacticWalk}
}

// inputRows checks X against e and returns its row count and row stride.
func inputRows(e *Ensemble, n *ir.Node, x *tensor.Tensor) (int, int, error) {
	switch x.DType {
	case tensor.Float32, tensor.Float64, tensor.Int64, tensor.Int32:
	case tensor.Float16:
		if n.OpType != "TreeEnsemble" {
			return 0, 0, fmt.Errorf("tree: %s: input X is float16, which only TreeEnsemble accepts", n.OpType)
		}
	default:
		return 0, 0, fmt.Errorf("tree: %s: input X is %v, want float, double, int64 or int32", n.OpType, x.DType)
	}
	var rows, f int
	switch len(x.Shape) {
	case 1:
		rows, f = 1, x.Shape[0]
	case 2:
		rows, f = x.Shape[0], x.Shape[1]
	default:
		return 0, 0, fmt.Errorf("tree: %s: input X has shape %v, want [N, F] or [F]", n.OpType, x.Shape)
	}
	if f < e.nfeat {
		return 0, 0, fmt.Errorf("tree: %s: input X has %d features, the model reads feature %d", n.OpType, f, e.nfeat-1)
	}
	return rows, f, nil
}

func infer(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	if len(in) != 1 || !in[0].Present {
		return nil, fmt.Errorf("tree: %s takes one input, X", n.OpType)
	}
	e, err := FromNode(n)
	if err != nil {
		return nil, err
	}
	x := in[0].Type
	rows := ir.Dim{Value: -1}
	if x.RankKnown {
		switch len(x.Shape) {
		case 1:
			rows = ir.Fixed(1)
		case 2:
			rows = x.Shape[0]
			if d := x.Shape[1]; d.Known() && d.Value < int64(e.nfeat) {
				return nil, fmt.Errorf("tree: %s: input X has %d features, the model reads feature %d", n.OpType, d.Value, e.nfeat-1)
			}
		default:
			return nil, fmt.Errorf("tree: %s: input X has rank %d, want 1 or 2", n.OpType, len(x.Shape))
		}
	}
	scores := ir.Type{DType: tensor.Float32, Shape: []ir.Dim{rows, ir.Fixed(e.ntargets)}, RankKnown: true}
	switch n.OpType {
	case "TreeEnsembleClassifier":
		lt := tensor.Int64
		if e.labelsStr != nil {
			lt = tensor.String
		}
		return []ir.Type{{DType: lt, Shape: []ir.Dim{rows}, RankKnown: true}, scores}, nil
	case "TreeEnsemble":
		switch x.DType {
		case tensor.Float64, tensor.Float16:
			scores.DType = x.DType
		}
	}
	return []ir.Type{scores}, nil
}

func run(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	if len(in) != 1 || in[0] == nil {
		return nil, fmt.Errorf("tree: %s takes one input, X", n.OpType)
	}
	p, err := prepare(c, n)
	if err != nil {
		return nil, err
	}
	rows, _, err := inputRows(p.e, n, in[0])
	if err != nil {
		return nil, err
	}
	out := outputs(p.e, n, in[0].DType, rows)
	if err := into(c, n, in, out); err != nil {
		return nil, err
	}
	return out, nil
}

// outputs allocates n's outputs for rows rows of an X of type dt.
func outputs(e *Ensemble, n *ir.Node, dt tensor.DType, rows int) []*tensor.Tensor {
	nt := e.ntargets
	switch n.OpType {
	case "TreeEnsembleClassifier":
		lt := tensor.Int64
		if e.labelsStr != nil {
			lt = tensor.String
		}
		return []*tensor.Tensor{tensor.New(lt, rows), tensor.New(tensor.Float32, rows, nt)}
	case "TreeEnsemble":
		if dt == tensor.Float64 || dt == tensor.Float16 {
			return []*tensor.Tensor{tensor.New(dt, rows, nt)}
		}
	}
	return []*tensor.Tensor{tensor.New(tensor.Float32, rows, nt)}
}

func into(c *kernel.Ctx, n *ir.Node, in, out []*tensor.Tensor) error {
	if len(in) != 1 || in[0] == nil {
		return fmt.Errorf("tree: %s takes one input, X", n.OpType)
	}
	p, err := prepare(c, n)
	if err != nil {
		return err
	}
	e := p.e
	x := in[0]
	rows, stride, err := inputRows(e, n, x)
	if err != nil {
		return err
	}
	var label, scores *tensor.Tensor
	if e.classifier {
		if len(out) != 2 {
			return fmt.Errorf("tree: %s has %d outputs, want 2 (Y, Z)", n.OpType, len(out))
		}
		label, scores = out[0], out[1]
	} else {
		if len(out) != 1 {
			return fmt.Errorf("tree: %s has %d outputs, want 1", n.OpType, len(out))
		}
		scores = out[0]
	}
	if scores != nil && scores.Len() != rows*e.ntargets {
		return fmt.Errorf("tree: %s: scores output has %d elements, want %d", n.OpType, scores.Len(), rows*e.ntargets)
	}
	if label != nil && label.Len() != rows {
		return fmt.Errorf("tree: %s: label output has %d elements, want %d", n.OpType, label.Len(), rows)
	}
	cl := p.c
	if kernel.Tactic(n) == TacticWalk || x.DType == tensor.Float64 {
		cl = nil
	}
	j := &job{e: e, c: cl, x: x, stride: stride, rows: rows, label: label, scores: scores, dbl: e.double || x.DType == tensor.Float64}
	var pool *parallel.Pool // nil: the caller alone
	if c != nil {
		pool = c.Pool
	}
	blocks := (rows + lanes - 1) / lanes
	pool.Run(blocks, rows*len(e.feat)/4+1, j)
	return j.firstErr()
}
