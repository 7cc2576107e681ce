package kernels

// The kernel names of convt.cu (ConvTranspose).
const (
	ConvT       = "vx_convt"
	ConvTFinite = "vx_convt_finite"
)

// ConvTKernels are the entry points of convt.cu (ConvTranspose).
var ConvTKernels = []string{ConvT, ConvTFinite}
