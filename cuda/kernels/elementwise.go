package kernels

// ElementwiseKernels are the entry points of elementwise.cu (binary and unary elementwise ops, Cast, linear Resize).
var ElementwiseKernels = []string{}
