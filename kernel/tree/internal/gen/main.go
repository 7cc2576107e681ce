// Command gen writes a synthetic XGBoost-style tree ensemble as ONNX, for
// benchmarks: binary logistic TreeEnsembleClassifier (ai.onnx.ml 3), BRANCH_LT
// splits, missing values tracking a random default direction, one class
// weight column, trees grown to the given depth with early leaves.
//
//	go run ./kernel/tree/internal/gen -trees 500 -depth 8 -features 20 -o /tmp/xgb500.onnx
//
// The same flags always give the same bytes (a seeded generator).
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"

	"github.com/vouchml/vouch/onnx/onnxpb"
	"google.golang.org/protobuf/proto"
)

func main() {
	trees := flag.Int("trees", 500, "number of trees")
	depth := flag.Int("depth", 8, "maximum depth")
	feats := flag.Int("features", 20, "number of features")
	stop := flag.Float64("leaf", 0.08, "chance that a node below depth 3 is a leaf")
	seed := flag.Uint64("seed", 1, "generator seed")
	out := flag.String("o", "xgb_synth.onnx", "output file")
	flag.Parse()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(model(*trees, *depth, *feats, *stop, *seed))
	if err == nil {
		err = os.WriteFile(*out, b, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func model(trees, depth, feats int, stop float64, seed uint64) *onnxpb.ModelProto {
	rng := rand.New(rand.NewPCG(seed, 15))
	var tid, nid, fid, yes, no, miss, ct, cn, cid []int64
	var modes []string
	var vals, ws []float32
	for t := 0; t < trees; t++ {
		next := int64(0)
		var grow func(d int) int64
		grow = func(d int) int64 {
			id := next
			next++
			k := len(modes)
			tid, nid = append(tid, int64(t)), append(nid, id)
			if d == depth || (d >= 3 && rng.Float64() < stop) {
				modes = append(modes, "LEAF")
				fid, vals, yes, no, miss = append(fid, 0), append(vals, 0), append(yes, 0), append(no, 0), append(miss, 0)
				ct, cn, cid = append(ct, int64(t)), append(cn, id), append(cid, 0)
				ws = append(ws, float32(rng.NormFloat64()*0.05))
				return id
			}
			modes = append(modes, "BRANCH_LT")
			fid = append(fid, int64(rng.IntN(feats)))
			vals = append(vals, float32(rng.NormFloat64()))
			yes, no, miss = append(yes, 0), append(no, 0), append(miss, int64(rng.IntN(2)))
			y := grow(d + 1)
			n := grow(d + 1)
			yes[k], no[k] = y, n
			return id
		}
		grow(0)
	}
	hit := make([]float32, len(modes))
	for i := range hit {
		hit[i] = 1
	}
	ints := func(name string, v []int64) *onnxpb.AttributeProto {
		return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_INTS.Enum(), Ints: v}
	}
	floats := func(name string, v []float32) *onnxpb.AttributeProto {
		return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_FLOATS.Enum(), Floats: v}
	}
	strs := func(name string, v []string) *onnxpb.AttributeProto {
		b := make([][]byte, len(v))
		for i, s := range v {
			b[i] = []byte(s)
		}
		return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_STRINGS.Enum(), Strings: b}
	}
	node := &onnxpb.NodeProto{Name: proto.String("trees"), OpType: proto.String("TreeEnsembleClassifier"), Domain: proto.String("ai.onnx.ml"),
		Input: []string{"X"}, Output: []string{"label", "probabilities"},
		Attribute: []*onnxpb.AttributeProto{
			ints("nodes_treeids", tid), ints("nodes_nodeids", nid), ints("nodes_featureids", fid), strs("nodes_modes", modes),
			floats("nodes_values", vals), ints("nodes_truenodeids", yes), ints("nodes_falsenodeids", no),
			ints("nodes_missing_value_tracks_true", miss), floats("nodes_hitrates", hit),
			ints("class_treeids", ct), ints("class_nodeids", cn), ints("class_ids", cid), floats("class_weights", ws),
			ints("classlabels_int64s", []int64{0, 1}), floats("base_values", []float32{0}),
			{Name: proto.String("post_transform"), Type: onnxpb.AttributeProto_STRING.Enum(), S: []byte("LOGISTIC")},
		}}
	dim := func(v int64) *onnxpb.TensorShapeProto_Dimension {
		return &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: v}}
	}
	n := &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: "N"}}
	vi := func(name string, et int32, d ...*onnxpb.TensorShapeProto_Dimension) *onnxpb.ValueInfoProto {
		return &onnxpb.ValueInfoProto{Name: proto.String(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
			TensorType: &onnxpb.TypeProto_Tensor{ElemType: proto.Int32(et), Shape: &onnxpb.TensorShapeProto{Dim: d}}}}}
	}
	return &onnxpb.ModelProto{
		IrVersion:    proto.Int64(8),
		ProducerName: proto.String("vouch kernel/tree/internal/gen"),
		OpsetImport:  []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(15)}, {Domain: proto.String("ai.onnx.ml"), Version: proto.Int64(3)}},
		Graph: &onnxpb.GraphProto{
			Name:   proto.String("xgb_synth"),
			Node:   []*onnxpb.NodeProto{node},
			Input:  []*onnxpb.ValueInfoProto{vi("X", 1, n, dim(int64(feats)))},
			Output: []*onnxpb.ValueInfoProto{vi("label", 7, n), vi("probabilities", 1, n, dim(2))},
		},
	}
}
