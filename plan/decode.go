package plan

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/tensor"
)

// maxNesting bounds subgraph depth in a plan header.
const maxNesting = 64

// Decode parses and checks a plan file.
func Decode(b []byte) (*Plan, error) {
	if len(b) < len(versionLine) || !bytes.HasPrefix(b, []byte("VOUCHPLAN ")) {
		return nil, fmt.Errorf("%w: not a vouch plan (no version line)", ErrFormat)
	}
	nl := bytes.IndexByte(b[:min(len(b), 32)], '\n')
	if nl < 0 {
		return nil, fmt.Errorf("%w: truncated version line", ErrFormat)
	}
	version := lineVersion(string(b[:nl+1]))
	if version == 0 {
		return nil, fmt.Errorf("plan: unsupported format version %q (this vouch reads versions %d and %d)", string(b[10:nl]), FormatVersion, FormatVersionGPU)
	}
	rest := b[nl+1:]
	if len(rest) < 8 {
		return nil, fmt.Errorf("%w: truncated header length", ErrFormat)
	}
	hlen := binary.LittleEndian.Uint64(rest)
	if hlen > uint64(len(rest)-8) {
		return nil, fmt.Errorf("%w: header of %d bytes, only %d present (truncated file?)", ErrFormat, hlen, len(rest)-8)
	}
	var hdr Header
	dec := json.NewDecoder(bytes.NewReader(rest[8 : 8+hlen]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&hdr); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrFormat, err)
	}
	if hdr.FormatVersion != version {
		return nil, fmt.Errorf("plan: header says format version %d, version line says %d", hdr.FormatVersion, version)
	}
	if err := checkLabels(&hdr); err != nil {
		return nil, err
	}
	start := len(versionLine) + 8 + int(hlen)
	if r := start % align; r != 0 {
		start += align - r
	}
	if start > len(b) {
		return nil, fmt.Errorf("%w: truncated before the weights section", ErrFormat)
	}
	data, err := splitGPU(&hdr, b[start:])
	if err != nil {
		return nil, err
	}
	weights, err := decodeWeights(hdr.Graph.Weights, data)
	if err != nil {
		return nil, err
	}
	g, err := decodeGraph(&hdr.Graph, weights, 0)
	if err != nil {
		return nil, err
	}
	if err := ir.Verify(g, nil); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	return &Plan{Header: hdr, Graph: g}, nil
}

func decodeWeights(index []Weight, data []byte) (map[string]*tensor.Tensor, error) {
	out := make(map[string]*tensor.Tensor, len(index))
	var end int64
	for _, w := range index {
		if _, dup := out[w.Name]; dup {
			return nil, fmt.Errorf("%w: weight %q listed twice", ErrFormat, w.Name)
		}
		dt, err := tensor.ParseDType(w.DType)
		if err != nil {
			return nil, fmt.Errorf("%w: weight %q: %v", ErrFormat, w.Name, err)
		}
		n := int64(1)
		for _, d := range w.Shape {
			if d < 0 || (d > 0 && n > (1<<40)/int64(d)) {
				return nil, fmt.Errorf("%w: weight %q: bad shape %v", ErrFormat, w.Name, w.Shape)
			}
			n *= int64(d)
		}
		if dt == tensor.String {
			if int64(len(w.Strings)) != n {
				return nil, fmt.Errorf("%w: weight %q: %d strings for shape %v", ErrFormat, w.Name, len(w.Strings), w.Shape)
			}
			out[w.Name] = &tensor.Tensor{DType: dt, Shape: w.Shape, Data: append([]string{}, w.Strings...)}
			continue
		}
		if w.Bytes != n*int64(dt.Size()) {
			return nil, fmt.Errorf("%w: weight %q: %v%v needs %d bytes, index says %d", ErrFormat, w.Name, dt, w.Shape, n*int64(dt.Size()), w.Bytes)
		}
		if w.Offset < end || w.Offset%align != 0 || w.Offset > int64(len(data)) || w.Bytes > int64(len(data))-w.Offset {
			return nil, fmt.Errorf("%w: weight %q: bytes [%d, %d) outside the weights section (%d bytes) or out of order", ErrFormat, w.Name, w.Offset, w.Offset+w.Bytes, len(data))
		}
		end = w.Offset + w.Bytes
		t, err := tensor.FromRaw(dt, w.Shape, data[w.Offset:end])
		if err != nil {
			return nil, fmt.Errorf("%w: weight %q: %v", ErrFormat, w.Name, err)
		}
		out[w.Name] = t
	}
	if int64(len(data)) > end+align {
		return nil, fmt.Errorf("%w: %d bytes of trailing data after the last weight", ErrFormat, int64(len(data))-end)
	}
	return out, nil
}

func decodeGraph(gh *GraphHeader, weights map[string]*tensor.Tensor, depth int) (*ir.Graph, error) {
	if depth > maxNesting {
		return nil, fmt.Errorf("%w: subgraphs nested deeper than %d", ErrFormat, maxNesting)
	}
	g := &ir.Graph{Name: gh.Name, Initializers: map[string]*tensor.Tensor{}, Types: map[string]ir.Type{}}
	for _, ref := range gh.Init {
		t, ok := weights[ref.Weight]
		if !ok {
			return nil, fmt.Errorf("%w: graph %q: initializer %q refers to missing weight %q", ErrFormat, gh.Name, ref.Name, ref.Weight)
		}
		g.Initializers[ref.Name] = t
	}
	for _, v := range gh.Inputs {
		val, err := decodeValue(v)
		if err != nil {
			return nil, err
		}
		g.Inputs = append(g.Inputs, val)
	}
	for _, v := range gh.Outputs {
		val, err := decodeValue(v)
		if err != nil {
			return nil, err
		}
		g.Outputs = append(g.Outputs, val)
	}
	for _, l := range gh.Layers {
		n := &ir.Node{Name: l.Name, OpType: l.Kind, Domain: l.Domain, Version: l.Version,
			Inputs: l.Inputs, Outputs: l.Outputs, Attrs: map[string]*ir.Attr{}}
		for _, ah := range l.Attrs {
			a, err := decodeAttr(ah, weights, depth)
			if err != nil {
				return nil, fmt.Errorf("layer %q: %w", l.Name, err)
			}
			n.Attrs[a.Name] = a
		}
		g.Nodes = append(g.Nodes, n)
	}
	return g, nil
}

func decodeAttr(ah AttrHeader, weights map[string]*tensor.Tensor, depth int) (*ir.Attr, error) {
	a := &ir.Attr{Name: ah.Name, Kind: ir.AttrKind(ah.Kind), F: math.Float32frombits(ah.F), I: ah.I, S: ah.S, Ints: ah.Ints, Strings: ah.Strings}
	for _, f := range ah.Floats {
		a.Floats = append(a.Floats, math.Float32frombits(f))
	}
	get := func(name string) (*tensor.Tensor, error) {
		t, ok := weights[name]
		if !ok {
			return nil, fmt.Errorf("%w: attribute %q refers to missing weight %q", ErrFormat, ah.Name, name)
		}
		return t, nil
	}
	var err error
	if ah.T != "" {
		if a.T, err = get(ah.T); err != nil {
			return nil, err
		}
	}
	for _, name := range ah.Tensors {
		t, err := get(name)
		if err != nil {
			return nil, err
		}
		a.Tensors = append(a.Tensors, t)
	}
	if ah.G != nil {
		if a.G, err = decodeGraph(ah.G, weights, depth+1); err != nil {
			return nil, err
		}
	}
	for i := range ah.Graphs {
		sg, err := decodeGraph(&ah.Graphs[i], weights, depth+1)
		if err != nil {
			return nil, err
		}
		a.Graphs = append(a.Graphs, sg)
	}
	return a, nil
}

func decodeValue(v ValueHeader) (*ir.Value, error) {
	t := ir.Type{RankKnown: v.Rank}
	if v.DType != "undefined" {
		dt, err := tensor.ParseDType(v.DType)
		// Sequence and map values (ai.onnx.ml's ZipMap and DictVectorizer)
		// are graph values, never weights.
		switch v.DType {
		case tensor.Sequence.String():
			dt, err = tensor.Sequence, nil
		case tensor.Map.String():
			dt, err = tensor.Map, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%w: value %q: %v", ErrFormat, v.Name, err)
		}
		t.DType = dt
	}
	for _, d := range v.Shape {
		switch n, err := strconv.ParseInt(d, 10, 64); {
		case d == "?":
			t.Shape = append(t.Shape, ir.Unknown)
		case err == nil && n >= 0:
			t.Shape = append(t.Shape, ir.Dim{Value: n})
		default:
			t.Shape = append(t.Shape, ir.Dim{Value: -1, Param: d})
		}
	}
	return &ir.Value{Name: v.Name, Type: t}, nil
}
