// Package ml implements the classical machine-learning operators of the
// ai.onnx.ml domain other than the tree ensembles (those are in
// kernel/tree): linear models, SVMs, scalers and encoders, and the map
// operators (DictVectorizer, ZipMap).
//
// Every operator computes in float32, whatever its numeric input type (as
// ONNX Runtime does; the scores outputs are float by the spec), and follows
// the project's determinism rules: a dot product is one vmath.FMA32 chain
// over the features in ascending order, starting from the intercept (or
// zero, for an SVM kernel value); sums run in ascending index order; the
// post transforms use vmath's own exp and log, never the platform's. A row's
// result depends only on that row, so results do not depend on the batch.
//
// Where the ONNX-ML specification leaves a behaviour open, the kernels do
// what ONNX Runtime does (it is the runtime the converters target); each
// such choice is named in a comment and in docs/ml.md.
package ml

import (
	"fmt"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// Domain is the ONNX-ML operator domain.
const Domain = "ai.onnx.ml"

// Ops returns the operators, for domain Domain.
func Ops() kernel.Table {
	return kernel.Table{
		"LinearClassifier":      {Run: runLinearClassifier, Infer: inferLinear, Into: intoLinear},
		"LinearRegressor":       {Run: runLinearRegressor, Infer: inferLinear, Into: intoLinear},
		"SVMClassifier":         {Run: runSVMClassifier, Infer: inferSVMClassifier},
		"SVMRegressor":          {Run: runSVMRegressor, Infer: inferSVMRegressor},
		"Scaler":                {Run: runScaler, Infer: inferScaler, Into: intoScaler},
		"Normalizer":            {Run: runNormalizer, Infer: inferFloatSame, Into: intoNormalizer},
		"Binarizer":             {Run: runBinarizer, Infer: inferBinarizer},
		"Imputer":               {Run: runImputer, Infer: inferImputer},
		"OneHotEncoder":         {Run: runOneHotEncoder, Infer: inferOneHotEncoder},
		"LabelEncoder":          {Run: runLabelEncoder, Infer: inferLabelEncoder},
		"CategoryMapper":        {Run: runCategoryMapper, Infer: inferCategoryMapper},
		"ArrayFeatureExtractor": {Run: runArrayFeatureExtractor, Infer: inferArrayFeatureExtractor},
		"FeatureVectorizer":     {Run: runFeatureVectorizer, Infer: inferFeatureVectorizer},
		"DictVectorizer":        {Run: runDictVectorizer, Infer: inferDictVectorizer},
		"ZipMap":                {Run: runZipMap, Infer: inferZipMap},
	}
}

// maxAttr bounds the elements of any one attribute list that a kernel
// derives sizes from (2^28: 1 GiB of float32), so that a hostile model
// gets an error instead of an allocation it cannot afford.
const maxAttr = 1 << 28

// maxClaim bounds an output size that an attribute states rather than
// holds (FeatureVectorizer's inputdimensions): 2^24 elements, 64 MiB.
const maxClaim = 1 << 24

// errorf prefixes the package and the operator.
func errorf(n *ir.Node, format string, args ...any) error {
	return fmt.Errorf("ml: %s: "+format, append([]any{n.OpType}, args...)...)
}

// floatRows returns a numeric input as float32 rows: [C] is one row of C
// features, [N,C] N rows. Other ranks are refused.
func floatRows(n *ir.Node, x *tensor.Tensor) (data []float32, rows, cols int, err error) {
	if x == nil {
		return nil, 0, 0, errorf(n, "missing input X")
	}
	switch len(x.Shape) {
	case 1:
		rows, cols = 1, x.Shape[0]
	case 2:
		rows, cols = x.Shape[0], x.Shape[1]
	default:
		return nil, 0, 0, errorf(n, "input X must be [C] or [N,C], got shape %v", x.Shape)
	}
	data, err = toFloat32(n, x)
	return data, rows, cols, err
}

// toFloat32 converts a numeric tensor's elements to float32 (shared, not
// copied, when it already is).
func toFloat32(n *ir.Node, x *tensor.Tensor) ([]float32, error) {
	switch d := x.Data.(type) {
	case []float32:
		return d, nil
	case []float64:
		return convert(d), nil
	case []int64:
		return convert(d), nil
	case []int32:
		return convert(d), nil
	}
	return nil, errorf(n, "input X has dtype %v (float, double, int64 or int32 only)", x.DType)
}

func convert[T float64 | int64 | int32](d []T) []float32 {
	out := make([]float32, len(d))
	for i, v := range d {
		out[i] = float32(v)
	}
	return out
}

// batchDim is the leading dimension of an [N,C] or [C] input type (1 for
// [C], unknown when the rank is).
func batchDim(t ir.Type) (ir.Dim, bool) {
	if !t.RankKnown {
		return ir.Unknown, false
	}
	switch len(t.Shape) {
	case 1:
		return ir.Fixed(1), true
	case 2:
		return t.Shape[0], true
	}
	return ir.Unknown, false
}

// featureDim is the feature count of an [N,C] or [C] input type.
func featureDim(t ir.Type) ir.Dim {
	if !t.RankKnown || len(t.Shape) == 0 || len(t.Shape) > 2 {
		return ir.Unknown
	}
	return t.Shape[len(t.Shape)-1]
}

func present(in []ir.InferInput, i int) bool { return i < len(in) && in[i].Present }

// checkNumericInput refuses a first input type that floatRows would refuse.
func checkNumericInput(n *ir.Node, in []ir.InferInput) error {
	if !present(in, 0) {
		return errorf(n, "missing input X")
	}
	t := in[0].Type
	switch t.DType {
	case tensor.Float32, tensor.Float64, tensor.Int64, tensor.Int32, tensor.Undefined:
	default:
		return errorf(n, "input X has dtype %v (float, double, int64 or int32 only)", t.DType)
	}
	if t.RankKnown && (len(t.Shape) < 1 || len(t.Shape) > 2) {
		return errorf(n, "input X must be [C] or [N,C], got %v", t)
	}
	return nil
}

// inputFeatures checks input 0's type and returns its feature count (-1
// when it is not known).
func inputFeatures(n *ir.Node, in []ir.InferInput) (int, error) {
	if err := checkNumericInput(n, in); err != nil {
		return 0, err
	}
	if d := featureDim(in[0].Type); d.Known() {
		return int(d.Value), nil
	}
	return -1, nil
}

// labels is a classifier's class labels: int64s or strings.
type labels struct {
	ints []int64
	strs []string
}

func parseLabels(n *ir.Node, intsAttr, strsAttr string) (labels, error) {
	l := labels{ints: n.Ints(intsAttr, nil), strs: stringsAttr(n, strsAttr)}
	if len(l.ints) > 0 && len(l.strs) > 0 {
		return l, errorf(n, "both %s and %s are set", intsAttr, strsAttr)
	}
	if l.len() > maxAttr {
		return l, errorf(n, "%d class labels is too many", l.len())
	}
	return l, nil
}

func (l labels) len() int { return max(len(l.ints), len(l.strs)) }

func (l labels) dtype() tensor.DType {
	if len(l.strs) > 0 {
		return tensor.String
	}
	return tensor.Int64
}

// stringsAttr returns a strings attribute (nil when absent).
func stringsAttr(n *ir.Node, name string) []string {
	if a, ok := n.Attrs[name]; ok {
		return a.Strings
	}
	return nil
}

// labelOut is a classifier's label output of N rows.
type labelOut struct {
	t    *tensor.Tensor
	ints []int64
	strs []string
}

func newLabelOut(t *tensor.Tensor) labelOut {
	o := labelOut{t: t}
	o.ints, _ = t.Data.([]int64)
	o.strs, _ = t.Data.([]string)
	return o
}

// setClass writes class k of l as row i's label.
func (o labelOut) setClass(i int, l labels, k int) {
	if o.strs != nil {
		o.strs[i] = l.strs[k]
	} else {
		o.ints[i] = l.ints[k]
	}
}

// setBinary writes row i's label for a one-score binary decision: the
// second label when there are two (the first otherwise), or 1 and 0 ("1"
// and "0") when the labels are not a pair, as ONNX Runtime does.
func (o labelOut) setBinary(i int, l labels, positive bool) {
	if l.len() == 2 {
		k := 0
		if positive {
			k = 1
		}
		o.setClass(i, l, k)
		return
	}
	switch {
	case o.strs != nil && positive:
		o.strs[i] = "1"
	case o.strs != nil:
		o.strs[i] = "0"
	case positive:
		o.ints[i] = 1
	default:
		o.ints[i] = 0
	}
}

// argmax returns the first index of the largest element (NaN never wins).
func argmax(v []float32) int {
	best := 0
	for j := 1; j < len(v); j++ {
		if v[j] > v[best] {
			best = j
		}
	}
	return best
}

func rowsType(dt tensor.DType, dims ...ir.Dim) ir.Type {
	return ir.Type{DType: dt, Shape: dims, RankKnown: true}
}
