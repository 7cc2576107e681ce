// Package cuda reaches NVIDIA GPUs from vouch's static, cgo-free binary:
// it loads the CUDA driver (libcuda.so.1) and, at build time only, NVRTC
// (libnvrtc.so) through github.com/ebitengine/purego, and wraps the few
// driver calls an inference engine needs: device query, a context, device
// and pinned host memory, modules loaded from cubin or PTX, kernel
// launches, streams, events and CUDA graphs.
//
// Nothing here compiles at load time: NVRTC turns the CUDA C kernels of
// package cuda/kernels into PTX and cubin when a plan is built (Compile),
// and a loaded Image only hands those bytes to the driver. An Image names
// the architecture it was compiled for; Image.Check refuses a device of
// another architecture with a message that says which, and what to do.
//
// Where there is no GPU, every entry point returns an error and none
// panics: Open on a machine without the driver returns an error wrapping
// ErrNoDriver ("cuda: no NVIDIA driver found (libcuda.so.1): ..."), and
// OpenNVRTC one wrapping ErrNoNVRTC.
//
// Libraries are found by Find: an explicit path first (from a flag; this
// package reads no environment variables), then the loader's search path,
// then the usual install locations (/usr/local/cuda*/lib64, the NVIDIA
// pip wheels under site-packages).
//
// A Driver, its Context and everything made from them are safe for use by
// one goroutine at a time; the context is made current on the calling OS
// thread by each call that needs it.
package cuda
