package kernels

// The elementwise family's kernel names (extern "C" entry points of
// elementwise.cu).
const (
	Arith      = "vx_arith"
	ArithBcast = "vx_arith_bcast"
	Cast       = "vx_cast"
	Act        = "vx_act"
	ScaleShift = "vx_scale_shift"
	Resize     = "vx_resize"
)

// ElementwiseKernels are the entry points of elementwise.cu (binary and unary elementwise ops, Cast, linear Resize).
var ElementwiseKernels = []string{Arith, ArithBcast, Cast, Act, ScaleShift, Resize}
