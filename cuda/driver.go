package cuda

import (
	"fmt"
	"runtime"
	"unsafe"
)

// Driver is the loaded CUDA driver library.
type Driver struct {
	Path string // the library file that loaded
	api  driverAPI
}

// driverAPI holds the driver entry points (CUresult is int32).
type driverAPI struct {
	init              func(flags uint32) int32
	driverGetVersion  func(v *int32) int32
	deviceGetCount    func(n *int32) int32
	deviceGet         func(d *int32, ordinal int32) int32
	deviceGetName     func(name *byte, n int32, d int32) int32
	deviceGetAttr     func(v *int32, attr int32, d int32) int32
	deviceTotalMem    func(b *uint64, d int32) int32
	primaryCtxRetain  func(ctx *uintptr, d int32) int32
	primaryCtxRelease func(d int32) int32
	ctxSetCurrent     func(ctx uintptr) int32
	ctxSynchronize    func() int32
	memAlloc          func(p *uint64, n uint64) int32
	memFree           func(p uint64) int32
	memAllocHost      func(p *unsafe.Pointer, n uint64) int32
	memFreeHost       func(p unsafe.Pointer) int32
	memcpyHtoDAsync   func(dst uint64, src unsafe.Pointer, n uint64, s uintptr) int32
	memcpyDtoHAsync   func(dst unsafe.Pointer, src uint64, n uint64, s uintptr) int32
	memcpyDtoDAsync   func(dst, src uint64, n uint64, s uintptr) int32
	memsetD32Async    func(dst uint64, v uint32, n uint64, s uintptr) int32
	moduleLoadData    func(m *uintptr, image unsafe.Pointer) int32
	moduleUnload      func(m uintptr) int32
	moduleGetFunction func(f *uintptr, m uintptr, name string) int32
	funcGetAttr       func(v *int32, attr int32, f uintptr) int32
	launchKernel      func(f uintptr, gx, gy, gz, bx, by, bz, shm uint32, s uintptr, params, extra unsafe.Pointer) int32
	streamCreate      func(s *uintptr, flags uint32) int32
	streamDestroy     func(s uintptr) int32
	streamSynchronize func(s uintptr) int32
	eventCreate       func(e *uintptr, flags uint32) int32
	eventDestroy      func(e uintptr) int32
	eventRecord       func(e, s uintptr) int32
	eventSynchronize  func(e uintptr) int32
	eventElapsedTime  func(ms *float32, start, end uintptr) int32
	beginCapture      func(s uintptr, mode int32) int32
	endCapture        func(s uintptr, g *uintptr) int32
	graphInstantiate  func(x *uintptr, g uintptr, flags uint64) int32
	graphLaunch       func(x, s uintptr) int32
	graphExecDestroy  func(x uintptr) int32
	graphDestroy      func(g uintptr) int32
	getErrorName      func(r int32, s *unsafe.Pointer) int32
	getErrorString    func(r int32, s *unsafe.Pointer) int32
}

func (a *driverAPI) symbols() []symbol {
	return []symbol{
		{&a.init, []string{"cuInit"}},
		{&a.driverGetVersion, []string{"cuDriverGetVersion"}},
		{&a.deviceGetCount, []string{"cuDeviceGetCount"}},
		{&a.deviceGet, []string{"cuDeviceGet"}},
		{&a.deviceGetName, []string{"cuDeviceGetName"}},
		{&a.deviceGetAttr, []string{"cuDeviceGetAttribute"}},
		{&a.deviceTotalMem, []string{"cuDeviceTotalMem_v2"}},
		{&a.primaryCtxRetain, []string{"cuDevicePrimaryCtxRetain"}},
		{&a.primaryCtxRelease, []string{"cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"}},
		{&a.ctxSetCurrent, []string{"cuCtxSetCurrent"}},
		{&a.ctxSynchronize, []string{"cuCtxSynchronize"}},
		{&a.memAlloc, []string{"cuMemAlloc_v2"}},
		{&a.memFree, []string{"cuMemFree_v2"}},
		{&a.memAllocHost, []string{"cuMemAllocHost_v2"}},
		{&a.memFreeHost, []string{"cuMemFreeHost"}},
		{&a.memcpyHtoDAsync, []string{"cuMemcpyHtoDAsync_v2"}},
		{&a.memcpyDtoHAsync, []string{"cuMemcpyDtoHAsync_v2"}},
		{&a.memcpyDtoDAsync, []string{"cuMemcpyDtoDAsync_v2"}},
		{&a.memsetD32Async, []string{"cuMemsetD32Async"}},
		{&a.moduleLoadData, []string{"cuModuleLoadData"}},
		{&a.moduleUnload, []string{"cuModuleUnload"}},
		{&a.moduleGetFunction, []string{"cuModuleGetFunction"}},
		{&a.funcGetAttr, []string{"cuFuncGetAttribute"}},
		{&a.launchKernel, []string{"cuLaunchKernel"}},
		{&a.streamCreate, []string{"cuStreamCreate"}},
		{&a.streamDestroy, []string{"cuStreamDestroy_v2", "cuStreamDestroy"}},
		{&a.streamSynchronize, []string{"cuStreamSynchronize"}},
		{&a.eventCreate, []string{"cuEventCreate"}},
		{&a.eventDestroy, []string{"cuEventDestroy_v2", "cuEventDestroy"}},
		{&a.eventRecord, []string{"cuEventRecord"}},
		{&a.eventSynchronize, []string{"cuEventSynchronize"}},
		{&a.eventElapsedTime, []string{"cuEventElapsedTime_v2", "cuEventElapsedTime"}},
		{&a.beginCapture, []string{"cuStreamBeginCapture_v2", "cuStreamBeginCapture"}},
		{&a.endCapture, []string{"cuStreamEndCapture"}},
		{&a.graphInstantiate, []string{"cuGraphInstantiateWithFlags"}},
		{&a.graphLaunch, []string{"cuGraphLaunch"}},
		{&a.graphExecDestroy, []string{"cuGraphExecDestroy"}},
		{&a.graphDestroy, []string{"cuGraphDestroy"}},
		{&a.getErrorName, []string{"cuGetErrorName"}},
		{&a.getErrorString, []string{"cuGetErrorString"}},
	}
}

// Open loads the CUDA driver (path, or libcuda.so.1 from the usual
// places when path is empty) and initialises it. Without a driver the
// error wraps ErrNoDriver.
func Open(path string) (*Driver, error) {
	h, p, err := dlopen(ErrNoDriver, Find(path, "libcuda.so.1", "libcuda.so"))
	if err != nil {
		return nil, err
	}
	d := &Driver{Path: p}
	if err := bind(p, h, d.api.symbols()); err != nil {
		return nil, err
	}
	if err := d.check("cuInit", d.api.init(0)); err != nil {
		return nil, err
	}
	return d, nil
}

// Error is a failed driver call: the call's name and the CUresult.
type Error struct {
	Call   string
	Code   int32
	Name   string // e.g. CUDA_ERROR_OUT_OF_MEMORY
	Detail string // the driver's description
}

func (e *Error) Error() string {
	return fmt.Sprintf("cuda: %s: %s (%d): %s", e.Call, e.Name, e.Code, e.Detail)
}

// cudaErrorNoDevice is CUDA_ERROR_NO_DEVICE.
const cudaErrorNoDevice = 100

func (d *Driver) check(call string, r int32) error {
	if r == 0 {
		return nil
	}
	e := &Error{Call: call, Code: r}
	var p unsafe.Pointer
	if d.api.getErrorName != nil && d.api.getErrorName(r, &p) == 0 {
		e.Name = goString(p)
	}
	if d.api.getErrorString != nil && d.api.getErrorString(r, &p) == 0 {
		e.Detail = goString(p)
	}
	if r == cudaErrorNoDevice {
		return fmt.Errorf("%w: %w", ErrNoDevice, e)
	}
	return e
}

// Version returns the driver's CUDA version as major*1000 + minor*10
// (13000 for CUDA 13.0).
func (d *Driver) Version() (int, error) {
	var v int32
	err := d.check("cuDriverGetVersion", d.api.driverGetVersion(&v))
	return int(v), err
}

// Count returns the number of CUDA devices.
func (d *Driver) Count() (int, error) {
	var n int32
	err := d.check("cuDeviceGetCount", d.api.deviceGetCount(&n))
	return int(n), err
}

// DeviceInfo describes one device, as a plan records it.
type DeviceInfo struct {
	Ordinal       int    `json:"ordinal"`
	Name          string `json:"name"`
	Major         int    `json:"major"` // compute capability
	Minor         int    `json:"minor"`
	Multiproc     int    `json:"multiprocessors"`
	MemoryBytes   uint64 `json:"memory_bytes"`
	SharedOptin   int    `json:"shared_optin_bytes"`
	L2Bytes       int    `json:"l2_bytes"`
	DriverVersion int    `json:"driver_cuda_version"`
}

// Arch is the device's architecture name, e.g. "sm_90".
func (i DeviceInfo) Arch() string { return fmt.Sprintf("sm_%d%d", i.Major, i.Minor) }

// Device attribute numbers (CUdevice_attribute).
const (
	attrMultiprocessors = 16
	attrL2Size          = 38
	attrCCMajor         = 75
	attrCCMinor         = 76
	attrSharedOptin     = 97
)

// Device returns the description of device ordinal.
func (d *Driver) Device(ordinal int) (DeviceInfo, error) {
	info := DeviceInfo{Ordinal: ordinal}
	n, err := d.Count()
	if err != nil {
		return info, err
	}
	if ordinal < 0 || ordinal >= n {
		return info, fmt.Errorf("%w: device %d requested, the driver reports %d", ErrNoDevice, ordinal, n)
	}
	var dev int32
	if err := d.check("cuDeviceGet", d.api.deviceGet(&dev, int32(ordinal))); err != nil {
		return info, err
	}
	var name [256]byte
	if err := d.check("cuDeviceGetName", d.api.deviceGetName(&name[0], int32(len(name)), dev)); err != nil {
		return info, err
	}
	info.Name = goString(unsafe.Pointer(&name[0]))
	for _, a := range []struct {
		attr int32
		dst  *int
	}{{attrCCMajor, &info.Major}, {attrCCMinor, &info.Minor}, {attrMultiprocessors, &info.Multiproc}, {attrSharedOptin, &info.SharedOptin}, {attrL2Size, &info.L2Bytes}} {
		var v int32
		if err := d.check("cuDeviceGetAttribute", d.api.deviceGetAttr(&v, a.attr, dev)); err != nil {
			return info, err
		}
		*a.dst = int(v)
	}
	if err := d.check("cuDeviceTotalMem", d.api.deviceTotalMem(&info.MemoryBytes, dev)); err != nil {
		return info, err
	}
	info.DriverVersion, err = d.Version()
	return info, err
}

// Context is a device's primary context.
type Context struct {
	d    *Driver
	dev  int32
	ctx  uintptr
	Info DeviceInfo
}

// Context retains device ordinal's primary context. Close releases it.
func (d *Driver) Context(ordinal int) (*Context, error) {
	info, err := d.Device(ordinal)
	if err != nil {
		return nil, err
	}
	c := &Context{d: d, Info: info}
	if err := d.check("cuDeviceGet", d.api.deviceGet(&c.dev, int32(ordinal))); err != nil {
		return nil, err
	}
	if err := d.check("cuDevicePrimaryCtxRetain", d.api.primaryCtxRetain(&c.ctx, c.dev)); err != nil {
		return nil, err
	}
	return c, nil
}

// do runs f with the context current on a locked OS thread.
func (c *Context) do(f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := c.d.check("cuCtxSetCurrent", c.d.api.ctxSetCurrent(c.ctx)); err != nil {
		return err
	}
	return f()
}

// call runs one driver call with the context current.
func (c *Context) call(name string, f func() int32) error {
	return c.do(func() error { return c.d.check(name, f()) })
}

// Synchronize waits for all work in the context.
func (c *Context) Synchronize() error {
	return c.call("cuCtxSynchronize", c.d.api.ctxSynchronize)
}

// Close releases the primary context.
func (c *Context) Close() error {
	if c.ctx == 0 {
		return nil
	}
	c.ctx = 0
	return c.d.check("cuDevicePrimaryCtxRelease", c.d.api.primaryCtxRelease(c.dev))
}
