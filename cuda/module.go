package cuda

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"unsafe"
)

// Module is a loaded cubin or PTX image.
type Module struct {
	c *Context
	m uintptr
}

// LoadModule loads a cubin or a NUL-terminated PTX image (the driver
// compiles PTX for the device; cubin is used as is). It never runs NVRTC.
func (c *Context) LoadModule(image []byte) (*Module, error) {
	if len(image) == 0 {
		return nil, fmt.Errorf("cuda: empty module image")
	}
	img := image
	if !isELF(img) && img[len(img)-1] != 0 {
		img = append(append([]byte{}, img...), 0)
	}
	m := &Module{c: c}
	err := c.call("cuModuleLoadData", func() int32 { return c.d.api.moduleLoadData(&m.m, unsafe.Pointer(&img[0])) })
	runtime.KeepAlive(img)
	if err != nil {
		return nil, err
	}
	return m, nil
}

func isELF(b []byte) bool { return len(b) >= 4 && string(b[:4]) == "\x7fELF" }

// Unload unloads the module.
func (m *Module) Unload() error {
	if m == nil || m.m == 0 {
		return nil
	}
	h := m.m
	m.m = 0
	return m.c.call("cuModuleUnload", func() int32 { return m.c.d.api.moduleUnload(h) })
}

// Function is a kernel of a module.
type Function struct {
	m    *Module
	f    uintptr
	Name string
}

// Function looks up a kernel by its (extern "C") name.
func (m *Module) Function(name string) (*Function, error) {
	f := &Function{m: m, Name: name}
	if err := m.c.call("cuModuleGetFunction("+name+")", func() int32 { return m.c.d.api.moduleGetFunction(&f.f, m.m, name) }); err != nil {
		return nil, err
	}
	return f, nil
}

// Attributes of a compiled kernel (CUfunction_attribute).
type FuncAttrs struct {
	Registers, SharedBytes, LocalBytes, MaxThreads int
}

// Attrs returns the kernel's registers per thread, static shared memory,
// local (spill) memory and maximum block size.
func (f *Function) Attrs() (FuncAttrs, error) {
	var a FuncAttrs
	for _, q := range []struct {
		attr int32
		dst  *int
	}{{0, &a.MaxThreads}, {1, &a.SharedBytes}, {3, &a.LocalBytes}, {4, &a.Registers}} {
		var v int32
		if err := f.m.c.call("cuFuncGetAttribute", func() int32 { return f.m.c.d.api.funcGetAttr(&v, q.attr, f.f) }); err != nil {
			return a, err
		}
		*q.dst = int(v)
	}
	return a, nil
}

// Dim3 is a grid or block size.
type Dim3 struct{ X, Y, Z uint32 }

// Args packs kernel arguments in their C layout: each Add call appends one
// parameter. Integers and pointers are passed by value; Struct passes the
// bytes of a C struct of 4-byte fields.
type Args struct {
	vals [][]byte
}

// I32 appends an int.
func (a *Args) I32(v int32) *Args {
	b := make([]byte, 8)
	binary.LittleEndian.PutUint32(b, uint32(v))
	a.vals = append(a.vals, b)
	return a
}

// I64 appends a long long.
func (a *Args) I64(v int64) *Args {
	b := make([]byte, 8)
	binary.LittleEndian.PutUint64(b, uint64(v))
	a.vals = append(a.vals, b)
	return a
}

// Ptr appends a device pointer (0 is the null pointer).
func (a *Args) Ptr(p uint64) *Args { return a.I64(int64(p)) }

// F32 appends a float.
func (a *Args) F32(v float32) *Args { return a.I32(int32(f32bits(v))) }

// Struct appends a struct of int fields, passed by value.
func (a *Args) Struct(fields ...int32) *Args {
	b := make([]byte, 4*len(fields)+8)
	for i, f := range fields {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(f))
	}
	a.vals = append(a.vals, b)
	return a
}

// Launch runs f on grid x block threads with shm bytes of dynamic shared
// memory on stream s (nil: the default stream). The arguments are copied
// at launch; Launch does not wait for the kernel.
func (f *Function) Launch(s *Stream, grid, block Dim3, shm uint32, args *Args) error {
	if grid.X == 0 || grid.Y == 0 || grid.Z == 0 || block.X == 0 || block.Y == 0 || block.Z == 0 {
		return fmt.Errorf("cuda: %s: empty launch grid %v block %v", f.Name, grid, block)
	}
	// The values sit in one heap block (Go's heap does not move) and the
	// driver reads them, through the address array, during the call only.
	var words int
	for _, v := range args.vals {
		words += (len(v) + 7) / 8
	}
	buf := make([]uint64, words)
	ptrs := make([]uintptr, len(args.vals)+1)
	w := 0
	for i, v := range args.vals {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&buf[w])), len(v)), v)
		ptrs[i] = uintptr(unsafe.Pointer(&buf[w]))
		w += (len(v) + 7) / 8
	}
	defer runtime.KeepAlive(buf)
	pp := unsafe.Pointer(&ptrs[0])
	return f.m.c.call("cuLaunchKernel("+f.Name+")", func() int32 {
		return f.m.c.d.api.launchKernel(f.f, grid.X, grid.Y, grid.Z, block.X, block.Y, block.Z, shm, s.handle(), pp, nil)
	})
}

// D3 returns the Dim3 {x, y, z}.
func D3(x, y, z uint32) Dim3 { return Dim3{X: x, Y: y, Z: z} }
