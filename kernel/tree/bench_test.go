package tree_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/parallel"
	"github.com/vouchml/vouch/kernel/tree"
	"github.com/vouchml/vouch/onnx"
	"github.com/vouchml/vouch/tensor"
	"path/filepath"
)

func benchNode(b *testing.B, name string) *ir.Node {
	m, err := onnx.DecodeFile(filepath.Join(models, name, "model.onnx"))
	if err != nil {
		b.Skipf("%s: %v", name, err)
	}
	return m.Graph.Nodes[0]
}

// BenchmarkKernel times the tree kernel alone (no executor) on one worker.
func BenchmarkKernel(b *testing.B) {
	for _, name := range []string{"credit_xgb", "digits_rf"} {
		n := benchNode(b, name)
		e, err := tree.Prepared(n)
		if err != nil {
			b.Fatal(err)
		}
		for _, tac := range []string{tree.TacticCompiled, tree.TacticWalk} {
			for _, rows := range []int{1, 1000} {
				b.Run(fmt.Sprintf("%s/%s/batch%d", name, tac, rows), func(b *testing.B) {
					rng := rand.New(rand.NewPCG(1, 1))
					nf := e.NumFeatures()
					x := make([]float32, rows*nf)
					for i := range x {
						x[i] = float32(rng.NormFloat64())
					}
					in := []*tensor.Tensor{tensor.From(x, rows, nf)}
					n.Attrs[kernel.TacticAttr] = &ir.Attr{Kind: ir.AttrString, S: tac}
					op := tree.Ops()[n.OpType]
					out, _ := op.Run(&kernel.Ctx{}, n, in)
					p := parallel.New(1)
					defer p.Close()
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						if err := op.Into(&kernel.Ctx{Pool: p}, n, in, out); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(rows), "ns/row")
				})
			}
		}
	}
}

// BenchmarkSHAP is TreeSHAP's cost for one row of credit_xgb (200 trees of
// depth 5, covers from its 256 test rows).
func BenchmarkSHAP(b *testing.B) {
	n := benchNode(b, "credit_xgb")
	e, err := tree.FromNode(n)
	if err != nil {
		b.Fatal(err)
	}
	xt, _, err := onnx.DecodeTensorFile(filepath.Join(models, "credit_xgb", "test_data_set_0", "input_0.pb"))
	if err != nil {
		b.Fatal(err)
	}
	x := xt.Data.([]float32)
	if err := e.CoversFromData(x, xt.Shape[0]); err != nil {
		b.Fatal(err)
	}
	nf := e.NumFeatures()
	out := make([]float64, nf+1)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := i % xt.Shape[0]
		if err := e.SHAP(x[r*nf:(r+1)*nf], nf, out); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/row")
}
