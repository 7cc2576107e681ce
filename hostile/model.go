// Package hostile generates hostile ONNX models and requests — files of a
// few hundred bytes that claim enormous sizes, endless loops, external
// data that is a FIFO or a symlink out of the model's directory, opsets
// that do not exist, graphs deep enough to expose a quadratic pass — and
// its test runs each through decode, build, bind and run, asserting a
// clear error (never a crash, a hang or an allocation past the budget).
//
// The models are written with the project's own protobuf types
// (onnx/onnxpb), so the suite needs no outside tool and runs in CI.
package hostile

import (
	"github.com/vouchml/vouch/onnx/onnxpb"
	"google.golang.org/protobuf/proto"
)

// Model is a small builder of ModelProto bytes.
type Model struct {
	Opset  int64
	Nodes  []*onnxpb.NodeProto
	Inits  []*onnxpb.TensorProto
	Inputs []*onnxpb.ValueInfoProto
	Output []*onnxpb.ValueInfoProto
}

// Bytes encodes the model (IR version 8, default-domain opset m.Opset).
func (m *Model) Bytes() []byte {
	mp := &onnxpb.ModelProto{
		IrVersion:   proto.Int64(8),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(m.Opset)}},
		Graph:       m.Graph("g"),
	}
	b, err := proto.Marshal(mp)
	if err != nil {
		panic(err) // the builder's own types always encode
	}
	return b
}

// Graph is the model's graph.
func (m *Model) Graph(name string) *onnxpb.GraphProto {
	return &onnxpb.GraphProto{Name: proto.String(name), Node: m.Nodes, Initializer: m.Inits, Input: m.Inputs, Output: m.Output}
}

// Node appends a node.
func (m *Model) Node(op string, in, out []string, attrs ...*onnxpb.AttributeProto) {
	m.Nodes = append(m.Nodes, &onnxpb.NodeProto{Name: proto.String(out[0]), OpType: proto.String(op), Input: in, Output: out, Attribute: attrs})
}

// Ints64 appends an int64 initializer.
func (m *Model) Ints64(name string, dims []int64, v ...int64) {
	m.Inits = append(m.Inits, &onnxpb.TensorProto{Name: proto.String(name), DataType: proto.Int32(int32(onnxpb.TensorProto_INT64)), Dims: dims, Int64Data: v})
}

// Floats appends a float32 initializer.
func (m *Model) Floats(name string, dims []int64, v ...float32) {
	m.Inits = append(m.Inits, &onnxpb.TensorProto{Name: proto.String(name), DataType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)), Dims: dims, FloatData: v})
}

// In declares a graph input (dim -1: a symbolic dimension).
func (m *Model) In(name string, dt onnxpb.TensorProto_DataType, dims ...int64) {
	m.Inputs = append(m.Inputs, valueInfo(name, dt, dims))
}

// Out declares a graph output of unknown shape.
func (m *Model) Out(name string, dt onnxpb.TensorProto_DataType) {
	m.Output = append(m.Output, &onnxpb.ValueInfoProto{Name: proto.String(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{ElemType: proto.Int32(int32(dt))}}}})
}

func valueInfo(name string, dt onnxpb.TensorProto_DataType, dims []int64) *onnxpb.ValueInfoProto {
	sh := &onnxpb.TensorShapeProto{}
	for i, d := range dims {
		if d < 0 {
			sh.Dim = append(sh.Dim, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: "d" + string(rune('a'+i))}})
			continue
		}
		sh.Dim = append(sh.Dim, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d}})
	}
	return &onnxpb.ValueInfoProto{Name: proto.String(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{ElemType: proto.Int32(int32(dt)), Shape: sh}}}}
}

// AttrInts is an INTS attribute.
func AttrInts(name string, v ...int64) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_INTS.Enum(), Ints: v}
}

// AttrInt is an INT attribute.
func AttrInt(name string, v int64) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(v)}
}

// AttrTensor is a TENSOR attribute.
func AttrTensor(name string, t *onnxpb.TensorProto) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_TENSOR.Enum(), T: t}
}

// AttrGraph is a GRAPH attribute.
func AttrGraph(name string, g *onnxpb.GraphProto) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_GRAPH.Enum(), G: g}
}
