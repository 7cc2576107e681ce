package hostile

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/vouchml/vouch/onnx/onnxpb"
	"github.com/vouchml/vouch/tensor"
	"google.golang.org/protobuf/proto"
)

const (
	f32 = onnxpb.TensorProto_FLOAT
	i64 = onnxpb.TensorProto_INT64
)

// Case is one hostile input: a model (and the files beside it) and, for
// the cases that reach a run, the request's inputs.
type Case struct {
	Name  string
	Model []byte
	// Setup prepares the model's directory (external data files).
	Setup func(dir string) error
	// Inputs is the request; nil for a case refused before a run.
	Inputs map[string]*tensor.Tensor
	// Want is a fragment of the clear error the case must get; "" for a
	// case that must succeed (the long chains: in bounded time).
	Want string
}

// Cases are the hostile inputs. chain is the length of the long-chain
// cases (the is 20,000).
func Cases(chain int) []Case {
	var cs []Case
	add := func(name, want string, m *Model, in map[string]*tensor.Tensor) {
		cs = append(cs, Case{Name: name, Model: m.Bytes(), Inputs: in, Want: want})
	}
	x1 := map[string]*tensor.Tensor{"x": tensor.From([]float32{1}, 1)}

	// ConstantOfShape and Expand to 2^33 and 2^32 elements, from constants.
	m := &Model{Opset: 17}
	m.Ints64("shape", []int64{1}, 1<<33)
	m.Node("ConstantOfShape", []string{"shape"}, []string{"y"})
	m.Out("y", f32)
	add("constantofshape-2e33", "budget", m, map[string]*tensor.Tensor{})

	m = &Model{Opset: 17}
	m.In("x", f32, 1)
	m.Ints64("shape", []int64{2}, 1<<16, 1<<16)
	m.Node("Expand", []string{"x", "shape"}, []string{"y"})
	m.Out("y", f32)
	add("expand-2e32", "budget", m, x1)

	// ConstantOfShape of a request's input: [65536, 65536] from 16 bytes.
	m = &Model{Opset: 17}
	m.In("s", i64, 2)
	m.Node("ConstantOfShape", []string{"s"}, []string{"y"})
	m.Out("y", f32)
	add("constantofshape-of-request", "budget", m, map[string]*tensor.Tensor{"s": tensor.From([]int64{65536, 65536}, 2)})

	// Pad by 2^30 on each side, and Conv pads of 2^30.
	m = &Model{Opset: 17}
	m.In("x", f32, 1, 1, 4, 4)
	m.Ints64("pads", []int64{8}, 0, 0, 1<<30, 1<<30, 0, 0, 1<<30, 1<<30)
	m.Node("Pad", []string{"x", "pads"}, []string{"y"})
	m.Out("y", f32)
	x4 := map[string]*tensor.Tensor{"x": tensor.New(tensor.Float32, 1, 1, 4, 4)}
	add("pad-2e30", "budget", m, x4)

	m = &Model{Opset: 17}
	m.In("x", f32, 1, 1, 4, 4)
	m.Floats("w", []int64{1, 1, 1, 1}, 1)
	m.Node("Conv", []string{"x", "w"}, []string{"y"}, AttrInts("pads", 1<<30, 1<<30, 1<<30, 1<<30))
	m.Out("y", f32)
	add("conv-pads-2e30", "budget", m, x4)

	// MaxPool with strides of 2^31.
	m = &Model{Opset: 17}
	m.In("x", f32, 1, 1, 4, 4)
	m.Node("MaxPool", []string{"x"}, []string{"y"}, AttrInts("kernel_shape", 2, 2), AttrInts("strides", 1<<31, 1<<31))
	m.Out("y", f32)
	add("maxpool-strides-2e31", "", m, x4)

	m = &Model{Opset: 17}
	m.In("x", f32, 1, 1, 4, 4)
	m.Node("AveragePool", []string{"x"}, []string{"y"}, AttrInts("kernel_shape", 2, 2), AttrInts("strides", 1<<31, 1<<31))
	m.Out("y", f32)
	add("averagepool-strides-2e31", "", m, x4)

	m = &Model{Opset: 17}
	m.In("x", f32, 1, 1, 4, 4)
	m.Floats("w", []int64{1, 1, 1, 1}, 1)
	m.Node("ConvTranspose", []string{"x", "w"}, []string{"y"}, AttrInts("strides", 1<<20, 1<<20))
	m.Out("y", f32)
	add("convtranspose-strides-2e20", "budget", m, x4)

	// Resize to sizes, and OneHot of a depth, given by the request.
	m = &Model{Opset: 17}
	m.In("x", f32, 1, 1, 2, 2)
	m.In("sizes", i64, 4)
	m.Node("Resize", []string{"x", "", "", "sizes"}, []string{"y"})
	m.Out("y", f32)
	add("resize-sizes-of-request", "budget", m, map[string]*tensor.Tensor{"x": tensor.New(tensor.Float32, 1, 1, 2, 2), "sizes": tensor.From([]int64{1, 1, 1 << 20, 1 << 20}, 4)})

	m = &Model{Opset: 17}
	m.In("i", i64, 4)
	m.In("depth", i64)
	m.Floats("vals", []int64{2}, 0, 1)
	m.Node("OneHot", []string{"i", "depth", "vals"}, []string{"y"})
	m.Out("y", f32)
	add("onehot-depth-of-request", "budget", m, map[string]*tensor.Tensor{"i": tensor.From([]int64{0, 1, 2, 3}, 4), "depth": tensor.Scalar(int64(1 << 40))})

	// Tile by 2^31, Range of 2^40 elements, Resize by 10^6, Reshape to a
	// claimed 2^32 elements.
	m = &Model{Opset: 17}
	m.In("x", f32, 1)
	m.Ints64("r", []int64{1}, 1<<31)
	m.Node("Tile", []string{"x", "r"}, []string{"y"})
	m.Out("y", f32)
	add("tile-2e31", "budget", m, x1)

	m = &Model{Opset: 17}
	m.In("lim", i64)
	m.Ints64("zero", nil, 0)
	m.Ints64("one", nil, 1)
	m.Node("Range", []string{"zero", "lim", "one"}, []string{"y"})
	m.Out("y", i64)
	add("range-2e33-of-request", "budget", m, map[string]*tensor.Tensor{"lim": tensor.Scalar(int64(1 << 33))})

	m = &Model{Opset: 17}
	m.In("x", f32, 1, 1, 2, 2)
	m.Floats("scales", []int64{4}, 1, 1, 1e6, 1e6)
	m.Node("Resize", []string{"x", "", "scales"}, []string{"y"})
	m.Out("y", f32)
	add("resize-scales-1e6", "budget", m, map[string]*tensor.Tensor{"x": tensor.New(tensor.Float32, 1, 1, 2, 2)})

	m = &Model{Opset: 17}
	m.In("x", f32, 4)
	m.In("s", i64, 2)
	m.Node("Reshape", []string{"x", "s"}, []string{"y"})
	m.Out("y", f32)
	add("reshape-claims-2e32", "reshape", m, map[string]*tensor.Tensor{"x": tensor.New(tensor.Float32, 4), "s": tensor.From([]int64{65536, 65536}, 2)})

	// A Loop of 2^40 iterations.
	cs = append(cs, Case{Name: "loop-2e40", Model: loopModel(1 << 40), Inputs: map[string]*tensor.Tensor{"x": tensor.From([]float32{1}, 1)}, Want: "body runs"})

	// Opsets that do not exist.
	for _, v := range []int64{0, 99999} {
		m = &Model{Opset: v}
		m.In("x", f32, 1)
		m.Node("Relu", []string{"x"}, []string{"y"})
		m.Out("y", f32)
		add(fmt.Sprintf("opset-%d", v), "opset", m, nil)
	}

	// External data: a FIFO, a symlink to /etc/passwd, a symlinked
	// directory, and a path out of the model's directory.
	ext := func(name, loc, want string, setup func(dir string) error) {
		m := &Model{Opset: 17}
		m.In("x", f32, 4)
		m.Inits = append(m.Inits, &onnxpb.TensorProto{Name: proto.String("w"), DataType: proto.Int32(int32(f32)), Dims: []int64{4},
			DataLocation: onnxpb.TensorProto_EXTERNAL.Enum(),
			ExternalData: []*onnxpb.StringStringEntryProto{{Key: proto.String("location"), Value: proto.String(loc)}}})
		m.Node("Add", []string{"x", "w"}, []string{"y"})
		m.Out("y", f32)
		cs = append(cs, Case{Name: name, Model: m.Bytes(), Setup: setup, Want: want})
	}
	ext("external-fifo", "w.bin", "not a regular file", func(dir string) error { return syscall.Mkfifo(filepath.Join(dir, "w.bin"), 0o600) })
	ext("external-symlink-passwd", "w.bin", "symlink", func(dir string) error { return os.Symlink("/etc/passwd", filepath.Join(dir, "w.bin")) })
	ext("external-symlinked-dir", "d/w.bin", "symlink", func(dir string) error { return os.Symlink("/etc", filepath.Join(dir, "d")) })
	ext("external-escape", "../w.bin", "inside the model's directory", nil)

	// Long chains: they must build, in near-linear time.
	cs = append(cs, Case{Name: fmt.Sprintf("chain-relu-%d", chain), Model: chainModel(chain, "Relu"), Inputs: map[string]*tensor.Tensor{"x": tensor.From([]float32{-1, 2}, 2)}})
	cs = append(cs, Case{Name: fmt.Sprintf("chain-transpose-%d", chain), Model: chainModel(chain, "Transpose"), Inputs: map[string]*tensor.Tensor{"x": tensor.From([]float32{-1, 2, 3, 4}, 2, 2)}})
	return cs
}

// loopModel is a Loop with trip count trips whose body passes its carried
// value through an Identity.
func loopModel(trips int64) []byte {
	body := &Model{}
	body.In("i", i64)
	body.In("c", onnxpb.TensorProto_BOOL)
	body.In("v", f32, 1)
	body.Node("Identity", []string{"c"}, []string{"c2"})
	body.Node("Identity", []string{"v"}, []string{"v2"})
	body.Out("c2", onnxpb.TensorProto_BOOL)
	body.Out("v2", f32)
	m := &Model{Opset: 17}
	m.In("x", f32, 1)
	m.Ints64("M", nil, trips)
	m.Inits = append(m.Inits, &onnxpb.TensorProto{Name: proto.String("cond"), DataType: proto.Int32(int32(onnxpb.TensorProto_BOOL)), Int32Data: []int32{1}})
	m.Node("Loop", []string{"M", "cond", "x"}, []string{"y"}, AttrGraph("body", body.Graph("body")))
	m.Out("y", f32)
	return m.Bytes()
}

// chainModel is n nodes of op, each reading the one before (Transposes
// of a 2x2 input, each swapping the axes).
func chainModel(n int, op string) []byte {
	m := &Model{Opset: 17}
	if op == "Transpose" {
		m.In("x", f32, 2, 2)
	} else {
		m.In("x", f32, 2)
	}
	prev := "x"
	for i := 0; i < n; i++ {
		out := fmt.Sprintf("v%d", i)
		if op == "Transpose" {
			m.Node(op, []string{prev}, []string{out}, AttrInts("perm", 1, 0))
		} else {
			m.Node(op, []string{prev}, []string{out})
		}
		prev = out
	}
	m.Out(prev, f32)
	return m.Bytes()
}
