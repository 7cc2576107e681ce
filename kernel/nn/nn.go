// Package nn implements ONNX's neural-network operators: MatMul, Gemm and
// convolutions (including their integer and quantized forms), pooling,
// normalization, quantize/dequantize and Einsum.
//
// Every float32 dot product (MatMul, Gemm, Conv, ConvTranspose) goes
// through the GEMM of gemm.go, whose doc comment states the determinism
// rules: one FMA chain per output over k ascending, bias and scaling after
// the chain, no dependence on blocking, batching or threads. The direct
// convolution (conv_direct.go), the depthwise kernels (dw_direct.go) and
// the fused expansion + depthwise layer (expand_dw.go) compute the same
// chains without the GEMM's packing.
package nn

import (
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// Ops returns the operators of this package.
func Ops() kernel.Table {
	same := kernel.InferSame(0)
	return kernel.Table{
		"MatMul":                    {Run: runMatMul, Infer: inferMatMulAs(func(a ir.Type) tensor.DType { return a.DType }), Into: intoMatMul, Prepare: prepareMatMul},
		"MatMulInteger":             {Run: runMatMulInteger, Infer: inferMatMulAs(func(ir.Type) tensor.DType { return tensor.Int32 })},
		"QLinearMatMul":             {Run: runQLinearMatMul, Infer: inferQLinearMatMul},
		"Gemm":                      {Run: runGemm, Infer: inferGemm, Into: intoGemm, Tactics: gemmTactics, Prepare: prepareGemm},
		"Conv":                      {Run: runConv, Infer: inferConv, Into: intoConv, Tactics: convTactics, Prepare: prepareConv},
		"ConvTranspose":             {Run: runConvTranspose, Into: intoConvTranspose, Infer: inferConv},
		"ConvInteger":               {Run: runConvInteger, Infer: inferConv},
		"QLinearConv":               {Run: runQLinearConv, Infer: inferConv},
		"QuantizeLinear":            {Run: runQuantize, Infer: inferQuantize},
		"DequantizeLinear":          {Run: runDequantize, Infer: inferDequantize},
		"DynamicQuantizeLinear":     {Run: runDynamicQuantize, Infer: inferDynamicQuantize},
		"AveragePool":               {Run: runAveragePool, Infer: inferPool, Into: intoAveragePool, Prepare: preparePool},
		"MaxPool":                   {Run: runMaxPool, Infer: inferPool, Into: intoMaxPool, Prepare: preparePool},
		"LpPool":                    {Run: runLpPool, Infer: inferPool},
		"MaxUnpool":                 {Run: runMaxUnpool, Infer: inferMaxUnpool},
		"GlobalAveragePool":         {Run: runGlobalPool, Infer: inferGlobalPool, Into: intoGlobalPool},
		"GlobalMaxPool":             {Run: runGlobalPool, Infer: inferGlobalPool, Into: intoGlobalPool},
		"BatchNormalization":        {Run: runBatchNorm, Infer: inferBatchNorm},
		"InstanceNormalization":     {Run: runInstanceNorm, Infer: same},
		"LayerNormalization":        {Run: runLayerNorm, Infer: inferLayerNorm, Into: intoLayerNorm},
		"LRN":                       {Run: runLRN, Infer: inferSameFloat},
		"LpNormalization":           {Run: runLpNorm, Infer: inferSameFloat},
		"MeanVarianceNormalization": {Run: runMVN, Infer: inferSameFloat},
		"Einsum":                    {Run: runEinsum, Infer: inferEinsum},
	}
}

func inferQLinearMatMul(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	if err := needT(in, 8, "QLinearMatMul"); err != nil {
		return nil, err
	}
	dt := in[7].Type.DType
	return inferMatMulAs(func(ir.Type) tensor.DType { return dt })(n, in)
}
