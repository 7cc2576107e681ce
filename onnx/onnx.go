// Package onnx decodes ONNX models (IR versions 3 to 10) and TensorProto
// files into vouch's ir and tensor types.
//
// vouch declares its own subset of onnx.proto (package onnxpb); fields it
// does not know are skipped. Decoding never trusts the file: sizes are
// checked against the bytes present before anything is allocated, names are
// checked for duplicates, external data must stay inside the model's
// directory, and subgraph nesting is bounded.
package onnx

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/onnx/onnxpb"
	"github.com/vouchml/vouch/tensor"
	"google.golang.org/protobuf/proto"
)

// maxDepth bounds subgraph nesting (If inside Loop inside ...).
const maxDepth = 64

// DecodeFile reads and decodes a model file; external tensor data is read
// from the file's directory.
func DecodeFile(path string) (*ir.Model, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("onnx: %w", err)
	}
	m, err := Decode(b, filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// Opset ranges accepted: ONNX's default domain up to 23 (ONNX 1.18) and
// ai.onnx.ml up to 5; another domain's versions are its own, bounded only
// so that a version cannot be a hostile number that later code trusts.
const (
	maxDefaultOpset = 23
	maxMLOpset      = 5
	maxOtherOpset   = 1000
)

func maxOpset(domain string) int64 {
	switch domain {
	case "":
		return maxDefaultOpset
	case "ai.onnx.ml":
		return maxMLOpset
	}
	return maxOtherOpset
}

// openExternal opens an external data file named by a tensor, refusing
// anything but a regular file reached without symlinks inside dir: a
// location naming a FIFO or device would hang or stream forever, and a
// symlink (to /etc/passwd, or a symlinked directory) would read outside
// the model's directory.
func openExternal(dir, loc string) (*os.File, error) {
	clean := filepath.Clean(filepath.FromSlash(loc))
	if loc == "" || filepath.IsAbs(clean) || clean == "." || clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) {
		return nil, fmt.Errorf("external data location %q must be a relative path inside the model's directory", loc)
	}
	// Every component below dir must be a real directory or, last, a
	// regular file: Lstat does not follow symlinks.
	p := dir
	parts := strings.Split(clean, string(filepath.Separator))
	for i, part := range parts {
		p = filepath.Join(p, part)
		st, err := os.Lstat(p)
		if err != nil {
			return nil, err
		}
		switch {
		case st.Mode()&os.ModeSymlink != 0:
			return nil, fmt.Errorf("external data location %q: %s is a symlink (refused: it may point outside the model's directory)", loc, p)
		case i < len(parts)-1 && !st.IsDir():
			return nil, fmt.Errorf("external data location %q: %s is not a directory", loc, p)
		case i == len(parts)-1 && !st.Mode().IsRegular():
			return nil, fmt.Errorf("external data location %q: %s is not a regular file (%v)", loc, p, st.Mode().Type())
		}
	}
	// O_NOFOLLOW and O_NONBLOCK close the race with a swap after the
	// checks: a symlink put there fails to open, and a FIFO does not block
	// the open; the Stat after it must still say regular file.
	f, err := os.OpenFile(p, os.O_RDONLY|openFlags, 0)
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("external data location %q: %s is not a regular file", loc, p)
	}
	return f, nil
}

// Decode decodes a serialized ModelProto. dir is where external data lives
// ("" refuses external data). The returned graph is verified (ir.Verify).
func Decode(b []byte, dir string) (*ir.Model, error) {
	var mp onnxpb.ModelProto
	if err := proto.Unmarshal(b, &mp); err != nil {
		return nil, fmt.Errorf("onnx: decoding ModelProto: %w", err)
	}
	return FromProto(&mp, dir)
}

// FromProto converts a decoded ModelProto.
func FromProto(mp *onnxpb.ModelProto, dir string) (*ir.Model, error) {
	if mp.Graph == nil {
		return nil, fmt.Errorf("onnx: model has no graph")
	}
	ver := mp.GetIrVersion()
	if ver < 3 || ver > 10 {
		return nil, fmt.Errorf("onnx: IR version %d is not supported (3 to 10)", ver)
	}
	m := &ir.Model{
		IRVersion:    ver,
		Opsets:       map[string]int64{},
		Producer:     mp.GetProducerName(),
		ModelVersion: mp.GetModelVersion(),
		DocString:    mp.GetDocString(),
		Metadata:     map[string]string{},
	}
	for _, o := range mp.OpsetImport {
		d := o.GetDomain()
		if d == "ai.onnx" {
			d = ""
		}
		v := o.GetVersion()
		if hi := maxOpset(d); v < 1 || v > hi {
			return nil, fmt.Errorf("onnx: opset %d of domain %q is not supported (1 to %d)", v, d, hi)
		}
		if prev, dup := m.Opsets[d]; dup && prev != v {
			return nil, fmt.Errorf("onnx: domain %q imported twice, as opsets %d and %d", d, prev, v)
		}
		m.Opsets[d] = v
	}
	if _, ok := m.Opsets[""]; !ok {
		return nil, fmt.Errorf("onnx: model imports no default-domain opset")
	}
	for _, kv := range mp.MetadataProps {
		m.Metadata[kv.GetKey()] = kv.GetValue()
	}
	d := &decoder{opsets: m.Opsets, dir: dir}
	g, err := d.graph(mp.Graph, 0)
	if err != nil {
		return nil, err
	}
	if err := ir.Verify(g, nil); err != nil {
		return nil, err
	}
	m.Graph = g
	return m, nil
}

type decoder struct {
	opsets map[string]int64
	dir    string
}

func (d *decoder) graph(gp *onnxpb.GraphProto, depth int) (*ir.Graph, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("onnx: subgraphs nested deeper than %d", maxDepth)
	}
	g := &ir.Graph{
		Name:         gp.GetName(),
		Initializers: map[string]*tensor.Tensor{},
		Types:        map[string]ir.Type{},
	}
	for _, tp := range gp.Initializer {
		t, err := TensorFromProto(tp, d.dir)
		if err != nil {
			return nil, fmt.Errorf("onnx: graph %q: initializer: %w", g.Name, err)
		}
		if _, dup := g.Initializers[tp.GetName()]; dup {
			return nil, fmt.Errorf("onnx: graph %q: initializer %q given twice", g.Name, tp.GetName())
		}
		g.Initializers[tp.GetName()] = t
	}
	if len(gp.SparseInitializer) > 0 {
		return nil, fmt.Errorf("onnx: graph %q: sparse initializers are not supported", g.Name)
	}
	for _, vi := range gp.ValueInfo {
		t, err := valueType(vi)
		if err != nil {
			return nil, fmt.Errorf("onnx: graph %q: %w", g.Name, err)
		}
		g.Types[vi.GetName()] = t
	}
	for _, vi := range gp.Input {
		t, err := valueType(vi)
		if err != nil {
			return nil, fmt.Errorf("onnx: graph %q: input: %w", g.Name, err)
		}
		// Legacy models (IR < 4) list initializers among the inputs; such an
		// input is a constant unless the caller overrides it, which we keep
		// as an ordinary input only when it has no initializer.
		if _, isInit := g.Initializers[vi.GetName()]; isInit {
			continue
		}
		g.Inputs = append(g.Inputs, &ir.Value{Name: vi.GetName(), Type: t})
		g.Types[vi.GetName()] = t
	}
	for _, vi := range gp.Output {
		t, err := valueType(vi)
		if err != nil {
			return nil, fmt.Errorf("onnx: graph %q: output: %w", g.Name, err)
		}
		g.Outputs = append(g.Outputs, &ir.Value{Name: vi.GetName(), Type: t})
	}
	for i, np := range gp.Node {
		n, err := d.node(np, depth)
		if err != nil {
			return nil, fmt.Errorf("onnx: graph %q: node %d (%s %q): %w", g.Name, i, np.GetOpType(), np.GetName(), err)
		}
		g.Nodes = append(g.Nodes, n)
	}
	return g, nil
}

func (d *decoder) node(np *onnxpb.NodeProto, depth int) (*ir.Node, error) {
	dom := np.GetDomain()
	if dom == "ai.onnx" {
		dom = ""
	}
	ver, ok := d.opsets[dom]
	if !ok {
		return nil, fmt.Errorf("domain %q is not imported by the model", dom)
	}
	n := &ir.Node{
		Name:    np.GetName(),
		OpType:  np.GetOpType(),
		Domain:  dom,
		Version: ver,
		Inputs:  append([]string{}, np.Input...),
		Outputs: append([]string{}, np.Output...),
		Attrs:   map[string]*ir.Attr{},
	}
	for _, ap := range np.Attribute {
		a, err := d.attr(ap, depth)
		if err != nil {
			return nil, err
		}
		if _, dup := n.Attrs[a.Name]; dup {
			return nil, fmt.Errorf("attribute %q given twice", a.Name)
		}
		n.Attrs[a.Name] = a
	}
	return n, nil
}

func (d *decoder) attr(ap *onnxpb.AttributeProto, depth int) (*ir.Attr, error) {
	a := &ir.Attr{Name: ap.GetName(), Kind: ir.AttrKind(ap.GetType())}
	if ap.GetRefAttrName() != "" {
		return nil, fmt.Errorf("attribute %q: function attribute references are not supported", a.Name)
	}
	if ap.Type == nil { // IR version 1 files leave type unset; guess from the field present
		switch {
		case ap.F != nil:
			a.Kind = ir.AttrFloat
		case ap.I != nil:
			a.Kind = ir.AttrInt
		case ap.S != nil:
			a.Kind = ir.AttrString
		case ap.T != nil:
			a.Kind = ir.AttrTensor
		case ap.G != nil:
			a.Kind = ir.AttrGraph
		case len(ap.Floats) > 0:
			a.Kind = ir.AttrFloats
		case len(ap.Ints) > 0:
			a.Kind = ir.AttrInts
		case len(ap.Strings) > 0:
			a.Kind = ir.AttrStrings
		}
	}
	var err error
	switch a.Kind {
	case ir.AttrFloat:
		a.F = ap.GetF()
	case ir.AttrInt:
		a.I = ap.GetI()
	case ir.AttrString:
		a.S = string(ap.S)
	case ir.AttrTensor:
		if ap.T == nil {
			return nil, fmt.Errorf("attribute %q: tensor missing", a.Name)
		}
		a.T, err = TensorFromProto(ap.T, d.dir)
	case ir.AttrGraph:
		if ap.G == nil {
			return nil, fmt.Errorf("attribute %q: graph missing", a.Name)
		}
		a.G, err = d.graph(ap.G, depth+1)
	case ir.AttrFloats:
		a.Floats = append([]float32{}, ap.Floats...)
	case ir.AttrInts:
		a.Ints = append([]int64{}, ap.Ints...)
	case ir.AttrStrings:
		for _, s := range ap.Strings {
			a.Strings = append(a.Strings, string(s))
		}
	case ir.AttrTensors:
		for _, tp := range ap.Tensors {
			var t *tensor.Tensor
			if t, err = TensorFromProto(tp, d.dir); err != nil {
				break
			}
			a.Tensors = append(a.Tensors, t)
		}
	case ir.AttrGraphs:
		for _, gp := range ap.Graphs {
			var g *ir.Graph
			if g, err = d.graph(gp, depth+1); err != nil {
				break
			}
			a.Graphs = append(a.Graphs, g)
		}
	case ir.AttrKind(onnxpb.AttributeProto_SPARSE_TENSOR), ir.AttrKind(onnxpb.AttributeProto_SPARSE_TENSORS):
		return nil, fmt.Errorf("attribute %q: sparse tensors are not supported", a.Name)
	case ir.AttrKind(onnxpb.AttributeProto_TYPE_PROTO), ir.AttrKind(onnxpb.AttributeProto_TYPE_PROTOS):
		return nil, fmt.Errorf("attribute %q: type attributes are not supported", a.Name)
	default:
		return nil, fmt.Errorf("attribute %q: unknown attribute type %d", a.Name, a.Kind)
	}
	if err != nil {
		return nil, fmt.Errorf("attribute %q: %w", a.Name, err)
	}
	return a, nil
}

func valueType(vi *onnxpb.ValueInfoProto) (ir.Type, error) {
	tp := vi.GetType()
	if tp == nil {
		return ir.Type{}, nil
	}
	tt := tp.GetTensorType()
	if tt == nil {
		switch {
		case tp.GetSequenceType() != nil:
			return ir.Type{DType: tensor.Sequence}, nil
		case tp.GetMapType() != nil:
			// ai.onnx.ml maps (DictVectorizer inputs): the key and value
			// types are checked by the kernel when the value arrives.
			return ir.Type{DType: tensor.Map}, nil
		case tp.GetOptionalType() != nil:
			return ir.Type{}, fmt.Errorf("value %q: optional types are not supported", vi.GetName())
		case tp.GetSparseTensorType() != nil:
			return ir.Type{}, fmt.Errorf("value %q: sparse tensor types are not supported", vi.GetName())
		}
		return ir.Type{}, nil
	}
	t := ir.Type{DType: tensor.DType(tt.GetElemType())}
	if tt.Shape != nil {
		t.RankKnown = true
		t.Shape = make([]ir.Dim, len(tt.Shape.Dim))
		for i, dim := range tt.Shape.Dim {
			switch v := dim.Value.(type) {
			case *onnxpb.TensorShapeProto_Dimension_DimValue:
				if v.DimValue < 0 {
					return ir.Type{}, fmt.Errorf("value %q: negative dimension %d", vi.GetName(), v.DimValue)
				}
				t.Shape[i] = ir.Dim{Value: v.DimValue}
			case *onnxpb.TensorShapeProto_Dimension_DimParam:
				t.Shape[i] = ir.Dim{Value: -1, Param: v.DimParam}
			default:
				t.Shape[i] = ir.Unknown
			}
		}
	}
	return t, nil
}
