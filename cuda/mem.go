package cuda

import (
	"fmt"
	"math"
	"runtime"
	"unsafe"
)

// Buffer is device memory.
type Buffer struct {
	c    *Context
	Ptr  uint64 // the device address
	Size uint64 // bytes
}

// MaxAlloc bounds one allocation (a plan's arena is one allocation).
const MaxAlloc = 1 << 40

// Alloc allocates n bytes of device memory.
func (c *Context) Alloc(n uint64) (*Buffer, error) {
	if n == 0 || n > MaxAlloc {
		return nil, fmt.Errorf("cuda: allocation of %d bytes out of range (1 to %d)", n, uint64(MaxAlloc))
	}
	b := &Buffer{c: c, Size: n}
	if err := c.call("cuMemAlloc", func() int32 { return c.d.api.memAlloc(&b.Ptr, n) }); err != nil {
		return nil, err
	}
	return b, nil
}

// Free releases the buffer.
func (b *Buffer) Free() error {
	if b == nil || b.Ptr == 0 {
		return nil
	}
	p := b.Ptr
	b.Ptr = 0
	return b.c.call("cuMemFree", func() int32 { return b.c.d.api.memFree(p) })
}

// At returns the device address off bytes into the buffer.
func (b *Buffer) At(off uint64) uint64 { return b.Ptr + off }

// HostBuffer is page-locked (pinned) host memory, the staging area for
// copies to and from the device.
type HostBuffer struct {
	c    *Context
	p    unsafe.Pointer
	Size uint64
}

// AllocHost allocates n bytes of pinned host memory.
func (c *Context) AllocHost(n uint64) (*HostBuffer, error) {
	if n == 0 || n > MaxAlloc {
		return nil, fmt.Errorf("cuda: pinned allocation of %d bytes out of range (1 to %d)", n, uint64(MaxAlloc))
	}
	h := &HostBuffer{c: c, Size: n}
	if err := c.call("cuMemAllocHost", func() int32 { return c.d.api.memAllocHost(&h.p, n) }); err != nil {
		return nil, err
	}
	return h, nil
}

// Bytes is the buffer's memory as a byte slice.
func (h *HostBuffer) Bytes() []byte { return unsafe.Slice((*byte)(h.p), h.Size) }

// Float32s is the buffer's memory as float32s.
func (h *HostBuffer) Float32s() []float32 { return unsafe.Slice((*float32)(h.p), h.Size/4) }

// Free releases the buffer.
func (h *HostBuffer) Free() error {
	if h == nil || h.p == nil {
		return nil
	}
	p := h.p
	h.p = nil
	return h.c.call("cuMemFreeHost", func() int32 { return h.c.d.api.memFreeHost(p) })
}

// Stream is a CUDA stream; the zero Stream (nil) is the legacy default.
type Stream struct {
	c *Context
	s uintptr
}

// NewStream creates a non-blocking stream.
func (c *Context) NewStream() (*Stream, error) {
	s := &Stream{c: c}
	const nonBlocking = 1
	if err := c.call("cuStreamCreate", func() int32 { return c.d.api.streamCreate(&s.s, nonBlocking) }); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Stream) handle() uintptr {
	if s == nil {
		return 0
	}
	return s.s
}

// Synchronize waits for the stream's work.
func (s *Stream) Synchronize() error {
	return s.c.call("cuStreamSynchronize", func() int32 { return s.c.d.api.streamSynchronize(s.s) })
}

// Destroy destroys the stream.
func (s *Stream) Destroy() error {
	if s == nil || s.s == 0 {
		return nil
	}
	h := s.s
	s.s = 0
	return s.c.call("cuStreamDestroy", func() int32 { return s.c.d.api.streamDestroy(h) })
}

// CopyToDevice copies src (host memory, pinned for an asynchronous copy)
// to device address dst on stream s, and waits when wait is set. src must
// stay alive and unchanged until the copy is done.
func (c *Context) CopyToDevice(s *Stream, dst uint64, src unsafe.Pointer, n uint64, wait bool) error {
	return c.do(func() error {
		if err := c.d.check("cuMemcpyHtoDAsync", c.d.api.memcpyHtoDAsync(dst, src, n, s.handle())); err != nil {
			return err
		}
		if wait {
			return c.d.check("cuStreamSynchronize", c.d.api.streamSynchronize(s.handle()))
		}
		return nil
	})
}

// CopyFromDevice copies n bytes from device address src to dst.
func (c *Context) CopyFromDevice(s *Stream, dst unsafe.Pointer, src uint64, n uint64, wait bool) error {
	return c.do(func() error {
		if err := c.d.check("cuMemcpyDtoHAsync", c.d.api.memcpyDtoHAsync(dst, src, n, s.handle())); err != nil {
			return err
		}
		if wait {
			return c.d.check("cuStreamSynchronize", c.d.api.streamSynchronize(s.handle()))
		}
		return nil
	})
}

// CopyDevice copies n bytes between device addresses on s.
func (c *Context) CopyDevice(s *Stream, dst, src uint64, n uint64) error {
	return c.call("cuMemcpyDtoDAsync", func() int32 { return c.d.api.memcpyDtoDAsync(dst, src, n, s.handle()) })
}

// Fill32 sets n 32-bit words at dst to v on s (the poison before a test).
func (c *Context) Fill32(s *Stream, dst uint64, v uint32, n uint64) error {
	return c.call("cuMemsetD32Async", func() int32 { return c.d.api.memsetD32Async(dst, v, n, s.handle()) })
}

// Upload copies float32s to the device through a pinned staging buffer
// and waits (a convenience for tests and weights).
func (c *Context) Upload(dst *Buffer, v []float32) error {
	n := uint64(len(v)) * 4
	if n == 0 {
		return nil
	}
	if n > dst.Size {
		return fmt.Errorf("cuda: upload of %d bytes into a buffer of %d", n, dst.Size)
	}
	h, err := c.AllocHost(n)
	if err != nil {
		return err
	}
	defer h.Free()
	copy(h.Float32s(), v)
	return c.CopyToDevice(nil, dst.Ptr, h.p, n, true)
}

// UploadInt32 copies int32s to the device and waits (index tables).
func (c *Context) UploadInt32(dst *Buffer, v []int32) error {
	f := unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(v))), len(v))
	return c.Upload(dst, f)
}

// UploadUint16 copies an even number of 16-bit values (packed FP16/BF16
// weights) to the device and waits.
func (c *Context) UploadUint16(dst *Buffer, v []uint16) error {
	if len(v)%2 != 0 {
		return fmt.Errorf("cuda: upload of %d 16-bit values (want an even number)", len(v))
	}
	f := unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(v))), len(v)/2)
	return c.Upload(dst, f)
}

// Download copies len(v) float32s from the device through pinned memory.
func (c *Context) Download(v []float32, src *Buffer) error {
	n := uint64(len(v)) * 4
	if n == 0 {
		return nil
	}
	if n > src.Size {
		return fmt.Errorf("cuda: download of %d bytes from a buffer of %d", n, src.Size)
	}
	h, err := c.AllocHost(n)
	if err != nil {
		return err
	}
	defer h.Free()
	if err := c.CopyFromDevice(nil, h.p, src.Ptr, n, true); err != nil {
		return err
	}
	copy(v, h.Float32s())
	return nil
}

// Event is a CUDA event, for timing.
type Event struct {
	c *Context
	e uintptr
}

// NewEvent creates a timing event.
func (c *Context) NewEvent() (*Event, error) {
	e := &Event{c: c}
	if err := c.call("cuEventCreate", func() int32 { return c.d.api.eventCreate(&e.e, 0) }); err != nil {
		return nil, err
	}
	return e, nil
}

// Record records the event on s.
func (e *Event) Record(s *Stream) error {
	return e.c.call("cuEventRecord", func() int32 { return e.c.d.api.eventRecord(e.e, s.handle()) })
}

// Elapsed waits for end and returns the milliseconds from e to end.
func (e *Event) Elapsed(end *Event) (float64, error) {
	var ms float32
	err := e.c.do(func() error {
		if err := e.c.d.check("cuEventSynchronize", e.c.d.api.eventSynchronize(end.e)); err != nil {
			return err
		}
		return e.c.d.check("cuEventElapsedTime", e.c.d.api.eventElapsedTime(&ms, e.e, end.e))
	})
	return float64(ms), err
}

// Destroy destroys the event.
func (e *Event) Destroy() error {
	if e == nil || e.e == 0 {
		return nil
	}
	h := e.e
	e.e = 0
	return e.c.call("cuEventDestroy", func() int32 { return e.c.d.api.eventDestroy(h) })
}

// Graph is an instantiated CUDA graph, captured from a stream.
type Graph struct {
	c     *Context
	g, ex uintptr
}

// Capture records the launches that f makes on s into a graph (nothing
// runs during capture) and instantiates it. The calling goroutine stays on
// one OS thread from the capture's start to its end: a thread-local
// capture must end on the thread that began it (CUDA_ERROR_STREAM_CAPTURE_
// WRONG_THREAD otherwise, seen on the H200 once several streams captured),
// and no other goroutine's call may land on that thread meanwhile.
func (c *Context) Capture(s *Stream, f func() error) (*Graph, error) {
	if s == nil {
		return nil, fmt.Errorf("cuda: graph capture needs a stream other than the default")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const modeThreadLocal = 1
	if err := c.call("cuStreamBeginCapture", func() int32 { return c.d.api.beginCapture(s.s, modeThreadLocal) }); err != nil {
		return nil, err
	}
	ferr := f()
	g := &Graph{c: c}
	if err := c.call("cuStreamEndCapture", func() int32 { return c.d.api.endCapture(s.s, &g.g) }); err != nil {
		return nil, err
	}
	if ferr != nil {
		g.Destroy()
		return nil, ferr
	}
	if err := c.call("cuGraphInstantiate", func() int32 { return c.d.api.graphInstantiate(&g.ex, g.g, 0) }); err != nil {
		g.Destroy()
		return nil, err
	}
	return g, nil
}

// Launch replays the graph on s.
func (g *Graph) Launch(s *Stream) error {
	return g.c.call("cuGraphLaunch", func() int32 { return g.c.d.api.graphLaunch(g.ex, s.handle()) })
}

// Destroy frees the graph.
func (g *Graph) Destroy() error {
	var err error
	if g.ex != 0 {
		x := g.ex
		g.ex = 0
		err = g.c.call("cuGraphExecDestroy", func() int32 { return g.c.d.api.graphExecDestroy(x) })
	}
	if g.g != 0 {
		h := g.g
		g.g = 0
		if e := g.c.call("cuGraphDestroy", func() int32 { return g.c.d.api.graphDestroy(h) }); err == nil {
			err = e
		}
	}
	return err
}

// f32bits is math.Float32bits, kept here so kernel arguments need no math.
func f32bits(v float32) uint32 { return math.Float32bits(v) }
