package builtin

import (
	"strings"
	"testing"

	"github.com/vouchml/vouch/ir"
)

// required is the engine-core issue's operator list: every one must be
// registered with both a kernel and a shape function.
const required = `Abs Acos Acosh Add And ArgMax ArgMin Asin Asinh Atan Atanh AveragePool
BatchNormalization BitShift Cast CastLike Ceil Celu Clip Compress Concat Constant
ConstantOfShape Conv ConvInteger ConvTranspose Cos Cosh CumSum DepthToSpace DequantizeLinear
Div Dropout DynamicQuantizeLinear Einsum Elu Equal Erf Exp Expand EyeLike Flatten Floor GRU
Gather GatherElements GatherND Gemm GlobalAveragePool GlobalMaxPool Greater GreaterOrEqual
GridSample HardSigmoid HardSwish Hardmax Identity If InstanceNormalization IsInf IsNaN LRN
LSTM LayerNormalization LeakyRelu Less LessOrEqual Log LogSoftmax Loop LpNormalization MatMul
MatMulInteger Max MaxPool MaxUnpool Mean MeanVarianceNormalization Min Mod Mul Neg
NegativeLogLikelihoodLoss NonMaxSuppression NonZero Not OneHot Or PRelu Pad Pow QLinearConv
QLinearMatMul QuantizeLinear RNN Range Reciprocal ReduceL1 ReduceL2 ReduceLogSum
ReduceLogSumExp ReduceMax ReduceMean ReduceMin ReduceProd ReduceSum ReduceSumSquare Relu
Reshape Resize ReverseSequence RoiAlign Round Scan Scatter ScatterElements ScatterND Selu
Shape Shrink Sigmoid Sign Sin Sinh Size Slice Softmax SoftmaxCrossEntropyLoss Softplus
Softsign SpaceToDepth Split Sqrt Squeeze Sub Sum Tan Tanh ThresholdedRelu Tile TopK Transpose
Trilu Unique Unsqueeze Upsample Where Xor`

func TestRequiredOperators(t *testing.T) {
	r := Registry()
	for _, op := range strings.Fields(required) {
		o, err := r.Lookup(&ir.Node{OpType: op})
		if err != nil {
			t.Errorf("%s: %v", op, err)
			continue
		}
		if o.Run == nil || o.Infer == nil {
			t.Errorf("%s: missing kernel or shape function", op)
		}
	}
	if n := len(r.Names()); n < 160 {
		t.Errorf("only %d operators registered", n)
	}
	if _, err := r.Lookup(&ir.Node{OpType: "Fused", Domain: "vouch"}); err != nil {
		t.Error(err)
	}
}
