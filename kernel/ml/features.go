package ml

import (
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// runArrayFeatureExtractor selects the elements at indices Y along X's
// last axis: X [..., C] gives [..., len(Y)], and a one-dimensional X gives
// [1, len(Y)] (ONNX Runtime's shape). An index outside [0, C) is an error.
func runArrayFeatureExtractor(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, yi := kernel.Input(in, 0), kernel.Input(in, 1)
	if x == nil || yi == nil {
		return nil, errorf(n, "needs inputs X and Y")
	}
	if len(x.Shape) == 0 {
		return nil, errorf(n, "input X is a scalar")
	}
	idx, ok := yi.Data.([]int64)
	if !ok {
		return nil, errorf(n, "indices Y are %v (int64 only)", yi.DType)
	}
	cols := x.Shape[len(x.Shape)-1]
	for i, v := range idx {
		if v < 0 || v >= int64(cols) {
			return nil, errorf(n, "index Y[%d] = %d is outside [0, %d)", i, v, cols)
		}
	}
	shape := append([]int{}, x.Shape...)
	if len(shape) == 1 {
		shape = []int{1, cols}
	}
	shape[len(shape)-1] = len(idx)
	rows := tensor.NumElems(shape[:len(shape)-1])
	if len(idx) > 0 && rows > maxAttr/len(idx) {
		return nil, errorf(n, "output %v is too large", shape)
	}
	y := tensor.New(x.DType, shape...)
	switch d := x.Data.(type) {
	case []float32:
		extract(y.Data.([]float32), d, idx, rows, cols)
	case []float64:
		extract(y.Data.([]float64), d, idx, rows, cols)
	case []int64:
		extract(y.Data.([]int64), d, idx, rows, cols)
	case []int32:
		extract(y.Data.([]int32), d, idx, rows, cols)
	case []string:
		extract(y.Data.([]string), d, idx, rows, cols)
	default:
		return nil, errorf(n, "input X has dtype %v (float, double, int64, int32 or string)", x.DType)
	}
	return []*tensor.Tensor{y}, nil
}

func extract[T any](y, x []T, idx []int64, rows, cols int) {
	k := len(idx)
	for r := range rows {
		for j, v := range idx {
			y[r*k+j] = x[r*cols+int(v)]
		}
	}
}

func inferArrayFeatureExtractor(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	if !present(in, 0) || !present(in, 1) {
		return nil, errorf(n, "needs inputs X and Y")
	}
	x, y := in[0].Type, in[1].Type
	if !x.RankKnown {
		return []ir.Type{kernel.UnknownRank(x.DType)}, nil
	}
	if len(x.Shape) == 0 {
		return nil, errorf(n, "input X is a scalar")
	}
	k := ir.Unknown
	if s, ok := y.Static(); ok {
		k = ir.Fixed(tensor.NumElems(s))
	}
	shape := append([]ir.Dim{}, x.Shape...)
	if len(shape) == 1 {
		shape = []ir.Dim{ir.Fixed(1), ir.Unknown}
	}
	shape[len(shape)-1] = k
	return []ir.Type{rowsType(x.DType, shape...)}, nil
}

// runFeatureVectorizer concatenates its inputs' feature columns: input i
// ([N, C_i], or [C_i] for one row) contributes inputdimensions[i] columns,
// its first C_i values and zeros past them (or its first
// inputdimensions[i] values when C_i is larger).
func runFeatureVectorizer(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	dims, total, err := featureDims(n, len(in))
	if err != nil {
		return nil, err
	}
	rows := -1
	parts := make([][]float32, len(in))
	widths := make([]int, len(in))
	for i, x := range in {
		if x == nil {
			return nil, errorf(n, "input %d is missing", i)
		}
		r, w := 1, 0
		switch len(x.Shape) {
		case 0:
			return nil, errorf(n, "input %d is a scalar", i)
		case 1:
			w = x.Shape[0]
		default:
			r, w = x.Shape[0], tensor.NumElems(x.Shape[1:])
		}
		if rows >= 0 && r != rows {
			return nil, errorf(n, "input %d has %d rows, input 0 has %d", i, r, rows)
		}
		rows = r
		if parts[i], err = toFloat32(n, x); err != nil {
			return nil, err
		}
		widths[i] = w
	}
	if rows < 0 {
		return nil, errorf(n, "no inputs")
	}
	if total > 0 && rows > maxClaim/total {
		return nil, errorf(n, "output [%d %d] is too large", rows, total)
	}
	y := tensor.New(tensor.Float32, rows, total)
	out := y.Data.([]float32)
	for r := range rows {
		o := out[r*total:]
		for i, d := range dims {
			copy(o[:d], parts[i][r*widths[i]:r*widths[i]+min(d, widths[i])])
			o = o[d:]
		}
	}
	return []*tensor.Tensor{y}, nil
}

func featureDims(n *ir.Node, inputs int) ([]int, int, error) {
	ds := n.Ints("inputdimensions", nil)
	if len(ds) != inputs {
		return nil, 0, errorf(n, "inputdimensions has %d entries for %d inputs", len(ds), inputs)
	}
	out := make([]int, len(ds))
	total := 0
	for i, d := range ds {
		if d < 0 || d > maxClaim || int64(total)+d > maxClaim {
			return nil, 0, errorf(n, "inputdimensions[%d] is %d", i, d)
		}
		out[i] = int(d)
		total += int(d)
	}
	return out, total, nil
}

func inferFeatureVectorizer(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	_, total, err := featureDims(n, len(in))
	if err != nil {
		return nil, err
	}
	b := ir.Unknown
	if len(in) > 0 && in[0].Present && in[0].Type.RankKnown {
		if len(in[0].Type.Shape) == 1 {
			b = ir.Fixed(1)
		} else if len(in[0].Type.Shape) > 1 {
			b = in[0].Type.Shape[0]
		}
	}
	return []ir.Type{rowsType(tensor.Float32, b, ir.Fixed(total))}, nil
}

// runDictVectorizer writes a map's values at the positions of their keys
// in string_vocabulary or int64_vocabulary: one row [1, V] of the map's
// value dtype, zero (or "") where the map has no entry; keys outside the
// vocabulary are ignored.
func runDictVectorizer(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := kernel.Input(in, 0)
	if x == nil {
		return nil, errorf(n, "missing input X")
	}
	m, ok := x.MapOf()
	if !ok {
		return nil, errorf(n, "input X is %v, not a map", x.DType)
	}
	vocab, err := dictVocabulary(n)
	if err != nil {
		return nil, err
	}
	switch m.Values.DType {
	case tensor.Float32, tensor.Float64, tensor.Int64, tensor.String:
	default:
		return nil, errorf(n, "map values are %v (float, double, int64 or string)", m.Values.DType)
	}
	pos, err := newKeyIndex(vocab).lookup(n, m.Keys)
	if err != nil {
		return nil, err
	}
	y := tensor.New(m.Values.DType, 1, vocab.Len())
	switch v := m.Values.Data.(type) {
	case []float32:
		scatter(y.Data.([]float32), v, pos)
	case []float64:
		scatter(y.Data.([]float64), v, pos)
	case []int64:
		scatter(y.Data.([]int64), v, pos)
	case []string:
		scatter(y.Data.([]string), v, pos)
	}
	return []*tensor.Tensor{y}, nil
}

func scatter[T any](y, v []T, pos []int) {
	for i, p := range pos {
		if p >= 0 {
			y[p] = v[i]
		}
	}
}

func dictVocabulary(n *ir.Node) (*tensor.Tensor, error) {
	strs, ints := stringsAttr(n, "string_vocabulary"), n.Ints("int64_vocabulary", nil)
	switch {
	case len(strs) > 0 && len(ints) > 0:
		return nil, errorf(n, "both string_vocabulary and int64_vocabulary are set")
	case len(strs) > maxAttr || len(ints) > maxAttr:
		return nil, errorf(n, "the vocabulary is too large")
	case len(strs) > 0:
		return tensor.From(append([]string{}, strs...), len(strs)), nil
	case len(ints) > 0:
		return tensor.From(append([]int64{}, ints...), len(ints)), nil
	}
	return nil, errorf(n, "one of string_vocabulary and int64_vocabulary is required")
}

func inferDictVectorizer(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	if !present(in, 0) {
		return nil, errorf(n, "missing input X")
	}
	if dt := in[0].Type.DType; dt != tensor.Undefined && dt != tensor.Map {
		return nil, errorf(n, "input X is %v, not a map", dt)
	}
	v, err := dictVocabulary(n)
	if err != nil {
		return nil, err
	}
	// The element type is the map's value type, which ir.Type does not
	// carry; it is known when the node runs.
	return []ir.Type{rowsType(tensor.Undefined, ir.Fixed(1), ir.Fixed(v.Len()))}, nil
}

// runZipMap turns each row of class scores into a map from the class
// labels (classlabels_int64s or classlabels_strings) to the scores: a
// sequence of N maps for X [N, C] (one for X [C]). The maps share one keys
// tensor; the order of entries is the class order. For servers (server/,
// explain/): read the value with Elems and MapOf; a map's Keys are int64 or
// string and its Values float32, one per class, in this order.
func runZipMap(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := kernel.Input(in, 0)
	if x == nil {
		return nil, errorf(n, "missing input X")
	}
	d, ok := x.Data.([]float32)
	if !ok {
		return nil, errorf(n, "input X is %v (float only)", x.DType)
	}
	keys, err := zipMapKeys(n)
	if err != nil {
		return nil, err
	}
	rows, cols := 1, 0
	switch len(x.Shape) {
	case 1:
		cols = x.Shape[0]
	case 2:
		rows, cols = x.Shape[0], x.Shape[1]
	default:
		return nil, errorf(n, "input X must be [C] or [N,C], got shape %v", x.Shape)
	}
	if cols != keys.Len() {
		return nil, errorf(n, "input has %d columns for %d class labels", cols, keys.Len())
	}
	maps := make([]*tensor.Tensor, rows)
	for r := range rows {
		v := append([]float32{}, d[r*cols:(r+1)*cols]...)
		maps[r] = tensor.NewMap(keys, tensor.From(v, cols))
	}
	return []*tensor.Tensor{tensor.NewSequence(maps)}, nil
}

func zipMapKeys(n *ir.Node) (*tensor.Tensor, error) {
	ints, strs := n.Ints("classlabels_int64s", nil), stringsAttr(n, "classlabels_strings")
	switch {
	case len(ints) > 0 && len(strs) > 0:
		return nil, errorf(n, "both classlabels_int64s and classlabels_strings are set")
	case len(ints) > maxAttr || len(strs) > maxAttr:
		return nil, errorf(n, "too many class labels")
	case len(ints) > 0:
		return tensor.From(append([]int64{}, ints...), len(ints)), nil
	case len(strs) > 0:
		return tensor.From(append([]string{}, strs...), len(strs)), nil
	}
	return nil, errorf(n, "one of classlabels_int64s and classlabels_strings is required")
}

func inferZipMap(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	if !present(in, 0) {
		return nil, errorf(n, "missing input X")
	}
	if _, err := zipMapKeys(n); err != nil {
		return nil, err
	}
	return []ir.Type{{DType: tensor.Sequence}}, nil
}

// UnzipOutputs rewrites every graph output of g that a ZipMap produces,
// and that no node reads, into the ZipMap's input (the class scores
// tensor, [N, C] float) under the output's own name: the ZipMap node
// becomes an Identity node of the default domain, and the output's type
// becomes the scores' type. It returns the names of the outputs it
// rewrote, in graph order, so that the compiler can log each one (the
// class labels of a rewritten output are the ZipMap's, which the caller
// may record beside it). A client then gets the probabilities as a
// tensor instead of a sequence of maps. g must have been verified; its
// types are those of ir.Infer when it has run.
//
// The compiler offers it as a build option (owned by package compile);
// without it, ZipMap outputs are sequences of maps.
func UnzipOutputs(g *ir.Graph) []string {
	read := map[string]bool{}
	for _, n := range g.Nodes {
		for _, x := range n.Inputs {
			read[x] = true
		}
	}
	outputs := map[string]*ir.Value{}
	for _, v := range g.Outputs {
		outputs[v.Name] = v
	}
	var done []string
	for _, n := range g.Nodes {
		if n.OpType != "ZipMap" || n.Domain != Domain || len(n.Inputs) != 1 || len(n.Outputs) != 1 {
			continue
		}
		out := n.Outputs[0]
		v, ok := outputs[out]
		if !ok || read[out] {
			continue
		}
		scores := n.Inputs[0]
		n.OpType, n.Domain, n.Version, n.Attrs = "Identity", "", 0, map[string]*ir.Attr{}
		t, known := g.Types[scores]
		if !known {
			t = ir.Type{DType: tensor.Float32}
		}
		v.Type = t
		if g.Types != nil {
			g.Types[out] = t
		}
		done = append(done, out)
	}
	return done
}
