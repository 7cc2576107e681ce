package kernels

// ConvTKernels are the entry points of convt.cu (ConvTranspose).
var ConvTKernels = []string{}
