// Package shape implements ONNX's data-movement operators: reshaping,
// transposition, concatenation and splitting, slicing, gathering and
// scattering, padding, tiling, and the small shape-producing ops.
//
// Most kernels compute, for every output element, the flat offset of its
// source element, and let one generic routine per element type move the
// data; every element type (strings and bools included) therefore goes
// through the same code. Reshape-like ops (Reshape, Flatten, Squeeze,
// Unsqueeze, Identity, Dropout) share their input's data, which is safe
// because kernels never modify their inputs. The few ops that order or
// accumulate (ArgMax, TopK, Unique, CumSum, Scatter reductions) do so in a
// fixed sequential order, documented beside each.
package shape

import "github.com/vouchml/vouch/kernel"

// Ops returns the operators of this package.
func Ops() kernel.Table {
	t := kernel.Table{
		"ArgMax":          {Run: argReduce(true), Infer: inferArgReduce},
		"ArgMin":          {Run: argReduce(false), Infer: inferArgReduce},
		"CenterCropPad":   {Run: runCenterCropPad, Infer: inferCenterCropPad},
		"Compress":        {Run: runCompress, Infer: inferCompress},
		"Concat":          {Run: runConcat, Infer: inferConcat},
		"Constant":        {Run: runConstant, Infer: inferConstant},
		"ConstantOfShape": {Run: runConstantOfShape, Infer: inferConstantOfShape},
		"CumSum":          {Run: runCumSum, Infer: inferCumSum},
		"DepthToSpace":    {Run: runDepthToSpace, Infer: inferBlock(true)},
		"Dropout":         {Run: runDropout, Infer: inferDropout},
		"Expand":          {Run: runExpand, Infer: inferExpand},
		"EyeLike":         {Run: runEyeLike, Infer: inferEyeLike},
		"Flatten":         {Run: runFlatten, Infer: inferFlatten},
		"Gather":          {Run: runGather, Infer: inferGather},
		"GatherElements":  {Run: runGatherElements, Infer: inferGatherElements},
		"GatherND":        {Run: runGatherND, Infer: inferGatherND},
		"Identity":        {Run: runIdentity, Infer: kernel.InferSame(0)},
		"NonZero":         {Run: runNonZero, Infer: inferNonZero},
		"OneHot":          {Run: runOneHot, Infer: inferOneHot},
		"Pad":             {Run: runPad, Infer: inferPad},
		"Range":           {Run: runRange, Infer: inferRange},
		"Reshape":         {Run: runReshape, Infer: inferReshape},
		"ReverseSequence": {Run: runReverseSequence, Infer: kernel.InferSame(0)},
		"Scatter":         {Run: runScatterElements, Infer: inferScatter},
		"ScatterElements": {Run: runScatterElements, Infer: inferScatter},
		"ScatterND":       {Run: runScatterND, Infer: inferScatter},
		"Shape":           {Run: runShape, Infer: inferShape},
		"Size":            {Run: runSize, Infer: inferSize},
		"Slice":           {Run: runSlice, Infer: inferSlice},
		"SpaceToDepth":    {Run: runSpaceToDepth, Infer: inferBlock(false)},
		"Split":           {Run: runSplit, Infer: inferSplit},
		"Squeeze":         {Run: runSqueeze, Infer: inferSqueeze},
		"TopK":            {Run: runTopK, Infer: inferTopK},
		"Transpose":       {Run: runTranspose, Infer: inferTranspose},
		"Trilu":           {Run: runTrilu, Infer: kernel.InferSame(0)},
		"Tile":            {Run: runTile, Infer: inferTile},
		"Unique":          {Run: runUnique, Infer: inferUnique},
		"Unsqueeze":       {Run: runUnsqueeze, Infer: inferUnsqueeze},
	}
	addInto(t)
	return t
}
