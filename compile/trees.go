package compile

import (
	"github.com/vouchml/vouch/buildlog"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/tree"
)

// logTrees leaves one build-log line per tree-ensemble layer (pass
// "trees", event "ensemble", after the tactics): its trees, nodes, leaves, depth, features
// and whether the compiled key layout applies (kernel/tree.Stats).
func logTrees(g *ir.Graph, log *buildlog.Log) {
	for _, n := range g.Nodes {
		if n.Domain != tree.Domain {
			continue
		}
		switch n.OpType {
		case "TreeEnsembleClassifier", "TreeEnsembleRegressor", "TreeEnsemble":
		default:
			continue
		}
		e, err := tree.Prepared(n)
		if err != nil {
			continue // the kernel reports it when the layer runs
		}
		s := e.Stats()
		log.Info("trees", "ensemble", map[string]any{
			"layer": n.Name, "op": s.Op, "trees": s.Trees, "nodes": s.Nodes, "leaves": s.Leaves,
			"max_depth": s.MaxDepth, "features": s.Features, "feature_span": s.FeatureSpan,
			"targets": s.Targets, "aggregate": s.Aggregate, "post_transform": s.PostTransform,
			"double": s.Double, "compiled_layout": s.Compiled, "tactic": n.String("vouch_tactic", ""),
		})
	}
}
