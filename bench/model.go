package bench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/vouchml/vouch/buildlog"
	"github.com/vouchml/vouch/compile"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/onnx"
	"github.com/vouchml/vouch/onnx/onnxpb"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

// ErrUnavailable is wrapped by the error of a peer that cannot run here
// (not built in, library missing, model not supported). It is a report,
// not a failure of the benchmark.
var ErrUnavailable = errors.New("unavailable")

// Model is what a benchmark runs: the plan vouch executes, the ONNX bytes the
// peers load, and the inputs every engine gets.
type Model struct {
	Path string
	Name string
	// ONNX is the model the peers load; nil when Path is a plan. When the
	// batch was relaxed (see RelaxBatch) its inputs' first dimension is
	// dynamic too.
	ONNX []byte
	Plan *plan.Plan
	// Built is true when the plan was compiled here from ONNX.
	Built  bool
	Inputs map[string]*tensor.Tensor
}

// Load reads an ONNX model (compiling it in memory with opts) or a plan
// (told apart by the plan's version line) and generates its inputs.
func Load(path string, shape Shape, seed uint64, opts compile.Options) (*Model, error) {
	shape = shape.withDefaults()
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m := &Model{Path: path, Name: modelName(path)}
	if bytes.HasPrefix(src, []byte("VOUCHPLAN ")) {
		if m.Plan, err = plan.Decode(src); err != nil {
			return nil, fmt.Errorf("bench: %s: %w", path, err)
		}
	} else {
		om, err := onnx.Decode(src, filepath.Dir(path))
		if err != nil {
			return nil, fmt.Errorf("bench: %s: %w", path, err)
		}
		m.ONNX = src
		if shape.Batch != 1 && fixedBatch(om.Graph.Inputs) {
			RelaxBatch(om.Graph)
			if m.ONNX, err = relaxONNX(src); err != nil {
				return nil, err
			}
		}
		if shape.Batch > compile.DefaultMaxBatch && len(opts.Profiles) == 0 {
			opts.Profiles = []plan.Profile{batchProfile(om.Graph, shape.Batch)}
		}
		res, err := compile.Build(om, src, m.Name, "vouch bench", opts, builtin.Registry(), buildlog.New(nil))
		if err != nil {
			return nil, fmt.Errorf("bench: building %s: %w", path, err)
		}
		if m.Plan, err = plan.Decode(res.Plan); err != nil {
			return nil, fmt.Errorf("bench: decoding the plan built from %s: %w", path, err)
		}
		m.Built = true
	}
	if m.Inputs, err = Inputs(m.Plan.Graph, shape, seed); err != nil {
		return nil, err
	}
	if _, err := m.Plan.SelectProfile(m.Inputs); err != nil {
		return nil, fmt.Errorf("bench: %s at batch %d: %w", path, shape.Batch, err)
	}
	return m, nil
}

// batchProfile is the default profile with its batch range stretched to
// batch (a tabular model benchmarked at batch 1,000 exceeds the default).
func batchProfile(g *ir.Graph, batch int) plan.Profile {
	p := plan.Profile{Inputs: map[string]plan.ShapeRange{}}
	for _, v := range g.Inputs {
		if !v.Type.RankKnown {
			continue
		}
		var r plan.ShapeRange
		for i, d := range v.Type.Shape {
			lo, opt, hi := 1, compile.DefaultOptDim, compile.DefaultMaxDim
			switch {
			case d.Known():
				lo, opt, hi = int(d.Value), int(d.Value), int(d.Value)
			case i == 0:
				opt, hi = batch, batch
			}
			r.Min, r.Opt, r.Max = append(r.Min, lo), append(r.Opt, opt), append(r.Max, hi)
		}
		p.Inputs[v.Name] = r
	}
	return p
}

func modelName(path string) string {
	if filepath.Base(path) == "model.onnx" {
		return filepath.Base(filepath.Dir(path))
	}
	return strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
}

func fixedBatch(inputs []*ir.Value) bool {
	for _, v := range inputs {
		if v.Type.RankKnown && len(v.Type.Shape) > 0 && v.Type.Shape[0].Known() {
			return true
		}
	}
	return false
}

// relaxONNX rewrites an ONNX model so that its graph inputs and outputs have
// a dynamic first dimension, and drops its value_info (shapes recorded at
// the export batch), for the peers.
func relaxONNX(src []byte) ([]byte, error) {
	var mp onnxpb.ModelProto
	if err := proto.Unmarshal(src, &mp); err != nil {
		return nil, fmt.Errorf("bench: re-reading the ONNX model: %w", err)
	}
	g := mp.GetGraph()
	for _, vi := range append(append([]*onnxpb.ValueInfoProto{}, g.GetInput()...), g.GetOutput()...) {
		tt, ok := vi.GetType().GetValue().(*onnxpb.TypeProto_TensorType)
		if !ok || tt.TensorType.GetShape() == nil || len(tt.TensorType.Shape.Dim) == 0 {
			continue
		}
		tt.TensorType.Shape.Dim[0].Value = &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: "batch"}
	}
	g.ValueInfo = nil
	return proto.Marshal(&mp)
}
