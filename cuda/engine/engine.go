package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/vouchml/vouch/cuda"
	"github.com/vouchml/vouch/cuda/exact"
	"github.com/vouchml/vouch/cuda/fast"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel/fused"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

// ErrPlan wraps every refusal of a plan: no GPU section, or a section that
// does not fit this device.
var ErrPlan = errors.New("engine: GPU plan")

// Backend is what a Program records as the audit record's backend.
const Backend = "cuda-exact"

// CheckDevice reports whether a plan's GPU section can run on the device:
// the cubin's architecture must be the device's, and the image must be the
// one the header describes. Otherwise the error says what to rebuild.
func CheckDevice(gpu *plan.GPU, info cuda.DeviceInfo) (*cuda.Image, error) {
	if gpu == nil {
		return nil, fmt.Errorf("%w: the plan was built for the CPU and has no GPU kernels: rebuild it with vouch build --device cuda:%d", ErrPlan, info.Ordinal)
	}
	if gpu.Arch != info.Arch() {
		return nil, fmt.Errorf("%w: %w: the plan was built for %s (%s, compute capability %s), device %d (%s) is %s: rebuild the plan for this GPU (vouch build --device cuda:%d --arch %s)",
			ErrPlan, cuda.ErrArch, gpu.Arch, gpu.Build.GPU, gpu.Build.ComputeCapability, info.Ordinal, info.Name, info.Arch(), info.Ordinal, info.Arch())
	}
	img, err := cuda.DecodeImage(gpu.Image)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPlan, err)
	}
	if img.Arch != gpu.Arch || img.SourceDigest != gpu.Kernels.SourceSHA256 || digest(img.PTX) != gpu.Kernels.PTXSHA256 || digest(img.Cubin) != gpu.Kernels.CubinSHA256 {
		return nil, fmt.Errorf("%w: the kernel image (%s, source %s) is not the one the header describes (%s, source %s)", ErrPlan, img.Arch, img.SourceDigest, gpu.Arch, gpu.Kernels.SourceSHA256)
	}
	if err := img.Check(info); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPlan, err)
	}
	return img, nil
}

// DeviceName is the audit record's device: "cuda:0 NVIDIA H200 (sm_90,
// driver 580.159.04, CUDA 13.0)".
func DeviceName(info cuda.DeviceInfo, release string) string {
	drv := ""
	if release != "" {
		drv = "driver " + release + ", "
	}
	return fmt.Sprintf("cuda:%d %s (%s, %sCUDA %s)", info.Ordinal, info.Name, info.Arch(), drv, cuda.CUDAVersion(info.DriverVersion))
}

// CPULayer runs one layer with vouch's CPU kernels, as the CPU engine
// would (its kernel context: subgraph runner, worker pool, limits). outer
// holds the values of the enclosing graph that the layer's subgraphs (a
// Loop's or an If's body) read without taking them as inputs; it is empty
// for a layer without subgraphs.
type CPULayer func(ctx context.Context, n *ir.Node, in []*tensor.Tensor, outer map[string]*tensor.Tensor) ([]*tensor.Tensor, error)

// Program is a GPU plan loaded on one device: its kernels, its weights in
// device memory, its placement, and per input shape the buffers of a run
// (allocated by the first run of that shape, reused by every later one: the
// device arena) and, when every layer runs on the GPU, the CUDA graph of
// the layers' launches, captured by the second run and replayed from then
// on. Run is safe for concurrent use: each concurrent run takes a lane
// (its own CUDA stream, pinned staging, buffers and graphs per shape),
// made on demand up to maxLanes, so an engine pool of N workers runs on N
// streams. A lane's first run of a shape (it allocates) and its capture
// hold the program exclusively; graph replays and later direct runs run
// side by side. Lanes change where and when a run executes, never its
// arithmetic: every lane runs the same kernels on the same chains.
type Program struct {
	// setup is held exclusively by runs that allocate or capture, shared
	// by the others.
	setup   sync.RWMutex
	mu      sync.Mutex // guards the fields below it
	free    []*lane
	lanes   []*lane
	wake    *sync.Cond // a lane came back
	last    float64    // milliseconds of the latest timed run's layers
	closing bool
	c       *cuda.Context
	e       *exact.Engine
	g       *ir.Graph
	place   map[*ir.Node]bool   // top-level layers placed on cuda
	kernel  map[*ir.Node]string // their placed kernels
	stages  []stage             // the integer inputs' uploads (staging.go)
	allGPU  bool
	cpu     CPULayer
	weights map[wkey]*cuda.Buffer
	device  string
	// fe and fast: the fast kernels and the layers (top-level, or a
	// ConvChain's body nodes) the placement runs with them.
	fe   *fast.Engine
	fe8  *fast.Int8Engine // fast_int8.cu's kernels (fast_int8.go)
	fast map[*ir.Node]*fastSpec
	// prof, set by Profile (under setup), makes runs direct, with an event
	// after each layer.
	prof *profiler
	// foldedOut: the fused attentions whose output a folded Transpose
	// reads (fold.go).
	foldedOut map[*ir.Node]bool
}

// lane is one stream's resources: runs on a lane are serial.
type lane struct {
	c      *cuda.Context
	st     *cuda.Stream
	stage  *cuda.HostBuffer // pinned staging for copies, grown as needed
	bounds map[string]*bound
	// ev0, ev1 bracket a run's layers on the stream.
	ev0, ev1 *cuda.Event
}

// maxLanes bounds the streams (concurrent runs) of a program.
const maxLanes = 8

func newLane(c *cuda.Context) (*lane, error) {
	l := &lane{c: c, bounds: map[string]*bound{}}
	var err error
	if l.st, err = c.NewStream(); err == nil {
		if l.ev0, err = c.NewEvent(); err == nil {
			l.ev1, err = c.NewEvent()
		}
	}
	if err != nil {
		l.close()
		return nil, err
	}
	return l, nil
}

func (l *lane) close() error {
	var err error
	for k, b := range l.bounds {
		b.free()
		delete(l.bounds, k)
	}
	if l.stage != nil {
		l.stage.Free()
		l.stage = nil
	}
	for _, ev := range []*cuda.Event{l.ev0, l.ev1} {
		if ev != nil {
			err = errors.Join(err, ev.Destroy())
		}
	}
	l.ev0, l.ev1 = nil, nil
	if l.st != nil {
		err = errors.Join(err, l.st.Destroy())
		l.st = nil
	}
	return err
}

// acquire takes a free lane, makes one (up to maxLanes), or waits.
func (pr *Program) acquire() (*lane, error) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	for {
		if pr.closing {
			return nil, fmt.Errorf("engine: run on a closed program")
		}
		if n := len(pr.free); n > 0 {
			l := pr.free[n-1]
			pr.free = pr.free[:n-1]
			return l, nil
		}
		if len(pr.lanes) < maxLanes {
			l, err := newLane(pr.c)
			if err != nil {
				return nil, err
			}
			pr.lanes = append(pr.lanes, l)
			return l, nil
		}
		pr.wake.Wait()
	}
}

func (pr *Program) release(l *lane) {
	pr.mu.Lock()
	pr.free = append(pr.free, l)
	pr.mu.Unlock()
	// Broadcast: a run waiting for a lane and Close waiting for all of
	// them wait on the same condition.
	pr.wake.Broadcast()
}

// Lanes is the number of streams the program has made (its peak number
// of concurrent runs, at most maxLanes).
func (pr *Program) Lanes() int {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return len(pr.lanes)
}

type wkey struct {
	g    *ir.Graph
	name string
}

// bound is one input shape's buffers and graph.
type bound struct {
	bufs  []*cuda.Buffer // in the order the run allocates them
	runs  int
	graph *cuda.Graph
	outs  []*val // the outputs' places, for graph runs
	// maps holds each Resize layer's output shape once its gather map
	// is in this shape's buffers (uploaded by the first run).
	maps map[*ir.Node][]int
}

// maxShapes bounds the shapes a program keeps buffers for; past it the
// oldest are freed (the next run of that shape allocates again).
const maxShapes = 16

// Open loads p's GPU section on device ordinal of d (refusing another
// architecture), uploads the weights its GPU layers read, and runs the
// CPU layers with cpu. It never compiles.
func Open(d *cuda.Driver, ordinal int, p *plan.Plan, cpu CPULayer) (*Program, error) {
	info, err := d.Device(ordinal)
	if err != nil {
		return nil, err
	}
	img, err := CheckDevice(p.Header.GPU, info)
	if err != nil {
		return nil, err
	}
	layers := p.Header.GPU.Layers
	if len(layers) != len(p.Graph.Nodes) {
		return nil, fmt.Errorf("%w: placement of %d layers for %d", ErrPlan, len(layers), len(p.Graph.Nodes))
	}
	c, err := d.Context(ordinal)
	if err != nil {
		return nil, err
	}
	e, err := exact.Load(c, img)
	if err != nil {
		c.Close()
		return nil, err
	}
	pr := &Program{c: c, e: e, g: p.Graph, place: map[*ir.Node]bool{}, kernel: map[*ir.Node]string{}, allGPU: true, cpu: cpu, weights: map[wkey]*cuda.Buffer{},
		device: DeviceName(info, d.Release())}
	pr.wake = sync.NewCond(&pr.mu)
	l, err := newLane(c)
	if err != nil {
		pr.Close()
		return nil, err
	}
	pr.lanes, pr.free = []*lane{l}, []*lane{l}
	for i, n := range p.Graph.Nodes {
		if layers[i].Backend != plan.BackendCUDA {
			pr.allGPU = false
			continue
		}
		pr.place[n] = true
		pr.kernel[n] = layers[i].Kernel
		if err := pr.upload(p.Graph, n); err != nil {
			pr.Close()
			return nil, err
		}
	}
	pr.foldedOut = foldedOutputs(p.Graph, pr.kernel)
	if err := pr.openFast(p.Graph, layers); err != nil {
		pr.Close()
		return nil, err
	}
	// A GPU layer may read an integer input on the host (a Reshape's
	// shape); a captured graph would keep the first run's values, unless
	// every reader takes the input staged (staging.go).
	stages, staged := planStages(p.Graph, pr.kernel)
	if staged {
		pr.stages = stages
	}
	for _, in := range p.Graph.Inputs {
		if in.Type.DType != tensor.Float32 && !staged {
			pr.allGPU = false
		}
	}
	if hostOutputs(p.Graph, pr.kernel) {
		pr.allGPU = false
	}
	return pr, nil
}

// upload puts the float32 initializers n reads (a chain's body's too) on
// the device, once.
func (pr *Program) upload(g *ir.Graph, n *ir.Node) error {
	for _, in := range n.Inputs {
		t, ok := g.Initializers[in]
		if !ok || t.DType != tensor.Float32 || pr.weights[wkey{g, in}] != nil {
			continue
		}
		b, err := pr.c.Alloc(uint64(max(t.Len(), 1)) * 4)
		if err != nil {
			return err
		}
		if err := pr.c.Upload(b, t.Data.([]float32)); err != nil {
			b.Free()
			return err
		}
		pr.weights[wkey{g, in}] = b
	}
	if a := n.Attrs["body"]; (n.OpType == "ConvChain" || n.OpType == "Attention") && a != nil && a.G != nil {
		for _, b := range a.G.Nodes {
			if err := pr.upload(a.G, b); err != nil {
				return err
			}
		}
	}
	return nil
}

// Graphs reports whether the program runs as CUDA graphs (every layer on
// the GPU and no integer input): the runs a warm-up captures.
func (pr *Program) Graphs() bool { return pr.allGPU }

// LastDeviceTime is the GPU time of the latest run's layers (between
// events on the stream, without the input and output copies), or 0 when
// that run had CPU layers.
func (pr *Program) LastDeviceTime() time.Duration {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return time.Duration(pr.last * float64(time.Millisecond))
}

// Backend returns "cuda-fast" for a plan with fast layers, else
// "cuda-exact".
func (pr *Program) Backend() string {
	if len(pr.fast) > 0 {
		return FastBackend
	}
	return Backend
}

// Device names the device the program runs on.
func (pr *Program) Device() string { return pr.device }

func (b *bound) free() {
	if b.graph != nil {
		b.graph.Destroy()
		b.graph = nil
	}
	for _, x := range b.bufs {
		x.Free()
	}
	b.bufs = nil
	b.maps = nil
}

// Close waits for the runs in progress, then frees the lanes, the
// weights, the buffers and graphs, and unloads the kernels.
func (pr *Program) Close() error {
	pr.mu.Lock()
	if pr.closing {
		pr.mu.Unlock()
		return nil
	}
	// No run starts from now on; wait for those that hold a lane.
	pr.closing = true
	pr.wake.Broadcast()
	for len(pr.free) < len(pr.lanes) {
		pr.wake.Wait()
	}
	pr.mu.Unlock()
	pr.setup.Lock()
	defer pr.setup.Unlock()
	var err error
	for _, l := range pr.lanes {
		err = errors.Join(err, l.close())
	}
	pr.lanes, pr.free = nil, nil
	for k, b := range pr.weights {
		b.Free()
		delete(pr.weights, k)
	}
	if pr.e != nil {
		err = errors.Join(err, pr.e.Close())
		pr.e = nil
	}
	if pr.c != nil {
		err = errors.Join(err, pr.c.Close())
		pr.c = nil
	}
	return err
}

// val is a value of a run: on the device (ptr), on the host, or both.
type val struct {
	ptr   uint64
	shape []int
	host  *tensor.Tensor
	// strides: a folded move's strided view (fold.go; nil: contiguous),
	// which only the fused attention reads.
	strides []int
}

type state struct {
	pr   *Program
	l    *lane
	ctx  context.Context
	g    *ir.Graph
	vals map[string]*val
	b    *bound
	next int // the next of b.bufs to hand out
	// cur is the fast kernel of the layer gpu runs (nil: exact).
	cur *fastSpec
	// staged holds the buffers of the staged integer inputs' readers.
	staged map[*ir.Node]uint64
}

// Run runs the plan on inputs (in graph-input order) and returns the
// outputs in graph-output order, on the host.
func (pr *Program) Run(ctx context.Context, inputs []*tensor.Tensor) (outs []*tensor.Tensor, err error) {
	if len(inputs) != len(pr.g.Inputs) {
		return nil, fmt.Errorf("engine: %d inputs for %d", len(inputs), len(pr.g.Inputs))
	}
	l, err := pr.acquire()
	if err != nil {
		return nil, err
	}
	defer pr.release(l)
	key := make([]byte, 0, 64)
	for _, t := range inputs {
		key = fmt.Appendf(key, "%v%v;", t.DType, t.Shape)
	}
	b := l.bounds[string(key)]
	// Allocating (a first run, or a new shape evicting an old one) and
	// capturing hold the program alone; the rest shares it.
	if b == nil || b.runs == 0 || (pr.allGPU && b.graph == nil) {
		pr.setup.Lock()
		defer pr.setup.Unlock()
	} else {
		pr.setup.RLock()
		defer pr.setup.RUnlock()
	}
	if b == nil {
		if len(l.bounds) >= maxShapes {
			for k, o := range l.bounds {
				o.free()
				delete(l.bounds, k)
				break
			}
		}
		b = &bound{}
		l.bounds[string(key)] = b
	}
	defer func() {
		if err != nil {
			// A failed run leaves its buffers in no known state.
			b.free()
			delete(l.bounds, string(key))
		}
	}()
	s := &state{pr: pr, l: l, ctx: ctx, g: pr.g, vals: map[string]*val{}, b: b}
	for i, v := range pr.g.Inputs {
		t := inputs[i]
		x := &val{shape: t.Shape, host: t}
		if t.DType == tensor.Float32 {
			buf, err := s.alloc(t.Len())
			if err != nil {
				return nil, err
			}
			if err := l.toDevice(buf.Ptr, t.Data.([]float32)); err != nil {
				return nil, err
			}
			x.ptr = buf.Ptr
		}
		s.vals[v.Name] = x
	}
	if err := s.stageInputs(inputs); err != nil {
		return nil, err
	}
	prof := pr.prof
	layers := func() error {
		if prof != nil {
			if err := prof.start(pr.c, l.st); err != nil {
				return err
			}
		}
		for i, n := range pr.g.Nodes {
			if err := ctx.Err(); err != nil {
				return err
			}
			var err error
			if pr.place[n] {
				err = s.gpu(n)
			} else {
				err = s.cpu(n)
			}
			if err != nil {
				return fmt.Errorf("engine: layer %s (%s): %w", n.Name, n.OpType, err)
			}
			if prof != nil {
				if err := prof.layer(l.st, i, n); err != nil {
					return err
				}
			}
		}
		return nil
	}
	timed := false
	launch := func() error {
		if err := l.ev0.Record(l.st); err != nil {
			return err
		}
		if err := b.graph.Launch(l.st); err != nil {
			return err
		}
		timed = true
		return l.ev1.Record(l.st)
	}
	switch {
	case prof != nil:
		err = layers()
	case !pr.allGPU || b.runs == 0:
		// The first run of a shape runs directly: it allocates the
		// buffers and the kernels' tables, which a capture cannot.
		// (Only a run whose layers are all on the GPU is timed: a CPU
		// layer synchronises the stream in the middle.)
		if pr.allGPU {
			if err = l.ev0.Record(l.st); err == nil {
				if err = layers(); err == nil {
					err = l.ev1.Record(l.st)
					timed = true
				}
			}
		} else {
			err = layers()
		}
	case b.graph == nil:
		if b.graph, err = pr.c.Capture(l.st, layers); err == nil {
			for _, o := range pr.g.Outputs {
				b.outs = append(b.outs, s.vals[o.Name])
			}
			err = launch()
		}
	default:
		for i, o := range pr.g.Outputs {
			s.vals[o.Name] = &val{ptr: b.outs[i].ptr, shape: b.outs[i].shape}
		}
		err = launch()
	}
	if err != nil {
		return nil, err
	}
	last := 0.0
	if timed {
		if last, err = l.ev0.Elapsed(l.ev1); err != nil {
			return nil, err
		}
	}
	pr.mu.Lock()
	pr.last = last
	pr.mu.Unlock()
	for _, o := range pr.g.Outputs {
		t, err := s.host(o.Name)
		if err != nil {
			return nil, fmt.Errorf("engine: output %s: %w", o.Name, err)
		}
		outs = append(outs, t)
	}
	b.runs++
	return outs, nil
}

// staging returns the lane's pinned staging buffer, at least n bytes.
func (l *lane) staging(n uint64) (*cuda.HostBuffer, error) {
	if l.stage != nil && l.stage.Size >= n {
		return l.stage, nil
	}
	if l.stage != nil {
		l.stage.Free()
		l.stage = nil
	}
	h, err := l.c.AllocHost(max(n, 1<<20))
	if err != nil {
		return nil, err
	}
	l.stage = h
	return h, nil
}

// toDevice copies v to dst on the lane's stream and waits.
func (l *lane) toDevice(dst uint64, v []float32) error {
	n := uint64(len(v)) * 4
	if n == 0 {
		return nil
	}
	h, err := l.staging(n)
	if err != nil {
		return err
	}
	copy(h.Float32s(), v)
	return l.c.CopyToDevice(l.st, dst, unsafe.Pointer(&h.Bytes()[0]), n, true)
}

// toHost copies len(v) floats from src into v after the stream's work.
func (l *lane) toHost(v []float32, src uint64) error {
	n := uint64(len(v)) * 4
	if n == 0 {
		return l.st.Synchronize()
	}
	h, err := l.staging(n)
	if err != nil {
		return err
	}
	if err := l.c.CopyFromDevice(l.st, unsafe.Pointer(&h.Bytes()[0]), src, n, true); err != nil {
		return err
	}
	copy(v, h.Float32s())
	return nil
}

// dev returns a value's device address and shape, uploading a host value
// or reading a weight.
func (s *state) dev(name string) (uint64, []int, error) {
	if v := s.vals[name]; v != nil {
		if v.strides != nil {
			return 0, nil, fmt.Errorf("value %s is a folded strided view (%s), which only a fused attention reads", name, foldKernel)
		}
		if v.ptr == 0 && v.host != nil {
			if v.host.DType != tensor.Float32 {
				return 0, nil, fmt.Errorf("value %s is %v, GPU kernels take float32", name, v.host.DType)
			}
			b, err := s.alloc(v.host.Len())
			if err != nil {
				return 0, nil, err
			}
			if err := s.l.toDevice(b.Ptr, v.host.Data.([]float32)); err != nil {
				return 0, nil, err
			}
			v.ptr = b.Ptr
		}
		return v.ptr, v.shape, nil
	}
	if b := s.pr.weights[wkey{s.g, name}]; b != nil {
		return b.Ptr, s.g.Initializers[name].Shape, nil
	}
	return 0, nil, fmt.Errorf("input %q is not a float32 value or weight on the device", name)
}

// host returns a value on the host, downloading it once.
func (s *state) host(name string) (*tensor.Tensor, error) {
	if v := s.vals[name]; v != nil {
		if v.host == nil {
			d := make([]float32, tensor.NumElems(v.shape))
			if err := s.l.toHost(d, v.ptr); err != nil {
				return nil, err
			}
			v.host = tensor.From(d, v.shape...)
		}
		return v.host, nil
	}
	if t, ok := s.g.Initializers[name]; ok {
		return t, nil
	}
	return nil, fmt.Errorf("no value %q", name)
}

// alloc hands out the run's next buffer: the one the first run of this
// shape allocated at this point, or a new one during that first run.
func (s *state) alloc(n int) (*cuda.Buffer, error) {
	size := uint64(max(n, 1)) * 4
	if s.next < len(s.b.bufs) {
		b := s.b.bufs[s.next]
		if b.Size != size {
			return nil, fmt.Errorf("engine: buffer %d of this shape's run holds %d bytes, the run asks for %d (the run is not the first run's)", s.next, b.Size, size)
		}
		s.next++
		return b, nil
	}
	if s.b.runs > 0 {
		return nil, fmt.Errorf("engine: a run of this shape allocates more buffers than its first run")
	}
	b, err := s.pr.c.Alloc(size)
	if err != nil {
		return nil, err
	}
	s.b.bufs = append(s.b.bufs, b)
	s.next++
	return b, nil
}

func (s *state) out(name string, shape []int) (uint64, error) {
	b, err := s.alloc(tensor.NumElems(shape))
	if err != nil {
		return 0, err
	}
	s.vals[name] = &val{ptr: b.Ptr, shape: shape}
	return b.Ptr, nil
}

// cpu runs a layer with vouch's CPU kernels.
func (s *state) cpu(n *ir.Node) (err error) {
	in := make([]*tensor.Tensor, len(n.Inputs))
	for i, name := range n.Inputs {
		if name == "" {
			continue
		}
		if in[i], err = s.host(name); err != nil {
			return err
		}
	}
	outer, err := s.captured(n)
	if err != nil {
		return err
	}
	outs, err := s.pr.cpu(s.ctx, n, in, outer)
	if err != nil {
		return err
	}
	for i, name := range n.Outputs {
		if name == "" {
			continue
		}
		if i >= len(outs) || outs[i] == nil {
			return fmt.Errorf("the CPU kernel produced no %s", name)
		}
		s.vals[name] = &val{shape: outs[i].Shape, host: outs[i]}
	}
	return nil
}

// captured gathers, on the host, the values of this graph that n's
// subgraphs read from the enclosing scope: a CPU Loop or If whose body
// reads a value a GPU layer produced finds it downloaded, as the CPU
// engine's scope would hold it. A name this graph does not hold is left
// out: the subgraph runner reports it, naming the subgraph.
func (s *state) captured(n *ir.Node) (map[string]*tensor.Tensor, error) {
	outer := map[string]*tensor.Tensor{}
	for _, name := range ir.Captures(n) {
		if _, done := outer[name]; done {
			continue
		}
		if s.vals[name] == nil {
			if _, ok := s.g.Initializers[name]; !ok {
				continue
			}
		}
		t, err := s.host(name)
		if err != nil {
			return nil, fmt.Errorf("a subgraph of %s reads %q: %w", n.Label(), name, err)
		}
		outer[name] = t
	}
	return outer, nil
}

func ints(n *ir.Node, name string, def ...int) []int { return n.IntList(name, def...) }

// gpu runs a layer placed on cuda.
func (s *state) gpu(n *ir.Node) error {
	e := s.pr.e
	s.cur = s.pr.fast[n]
	defer func() { s.cur = nil }()
	if s.pr.kernel[n] == foldKernel {
		return s.fold(n)
	}
	if ok, err := s.extraGPU(n); ok {
		return err
	}
	switch n.OpType {
	case fused.OpFused:
		h, _ := fused.LayerOf(n)
		if err := h.Check(len(n.Inputs)); err != nil {
			return err
		}
		base := &ir.Node{OpType: h.Base, Attrs: n.Attrs}
		var res string
		if h.Adds == 1 {
			res = n.Inputs[h.BaseInputs]
		}
		switch base.OpType {
		case "MatMul":
			return s.matmulFused(n, h)
		case "Conv":
			var bias string
			if h.BaseInputs == 3 {
				bias = n.Inputs[2]
			}
			ca, err := s.convAct(n, h, h.BaseInputs+h.Adds)
			if err != nil {
				return err
			}
			return s.conv(base, n.Inputs[0], n.Inputs[1], bias, res, ca, n.Outputs[0])
		case "Gemm":
			ca, err := s.convAct(n, h, h.BaseInputs+h.Adds)
			if err != nil {
				return err
			}
			return s.gemm(base, n.Inputs[0], n.Inputs[1], n.Inputs[2], ca, n.Outputs[0])
		}
	case "Conv":
		return s.conv(n, n.Input(0), n.Input(1), n.Input(2), "", exact.Act{}, n.Outputs[0])
	case "Gemm":
		return s.gemm(n, n.Input(0), n.Input(1), n.Input(2), exact.Act{}, n.Outputs[0])
	case fused.ExpandDepthwise:
		a, b, err := edwParts(n)
		if err != nil {
			return err
		}
		if err := s.gpu(a); err != nil {
			return fmt.Errorf("expansion: %w", err)
		}
		if err := s.gpu(b); err != nil {
			return fmt.Errorf("depthwise: %w", err)
		}
		return nil
	case "ConvChain":
		return s.body(n, n.Inputs[:1])
	case "Clip":
		x, shape, err := s.dev(n.Inputs[0])
		if err != nil {
			return err
		}
		y, err := s.out(n.Outputs[0], shape)
		if err != nil {
			return err
		}
		lo, hi, hasLo, hasHi, err := s.clipBounds(n, n.Version, 1, "")
		if err != nil {
			return err
		}
		return e.Clip(s.l.st, x, y, int64(tensor.NumElems(shape)), lo, hi, hasLo, hasHi)
	case "Relu":
		x, shape, err := s.dev(n.Inputs[0])
		if err != nil {
			return err
		}
		y, err := s.out(n.Outputs[0], shape)
		if err != nil {
			return err
		}
		return e.Unary(s.l.st, exact.Relu, x, y, int64(tensor.NumElems(shape)))
	case "Add", "Div":
		return s.binary(n)
	case "MatMul":
		_, _, err := s.matmul(n.Inputs[0], n.Inputs[1], n.Outputs[0])
		return err
	case "Attention":
		// The body's nodes one after the other on the GPU, the
		// operations of the nodes the layer replaced (kernel/fused's
		// chain; its fused scores step does the same operations).
		if len(n.Attrs["body"].G.Inputs) != len(n.Inputs) {
			return fmt.Errorf("Attention body of %d inputs for %d", len(n.Attrs["body"].G.Inputs), len(n.Inputs))
		}
		return s.body(n, n.Inputs)
	case "MaxPool", "AveragePool":
		x, shape, err := s.dev(n.Inputs[0])
		if err != nil {
			return err
		}
		if len(shape) != 4 {
			return fmt.Errorf("%s of a rank-%d value", n.OpType, len(shape))
		}
		k := ints(n, "kernel_shape")
		p := ints(n, "pads", 0, 0, 0, 0)
		st, d := ints(n, "strides", 1, 1), ints(n, "dilations", 1, 1)
		pg := exact.PoolGeom{Planes: shape[0] * shape[1], H: shape[2], W: shape[3], KH: k[0], KW: k[1], SH: st[0], SW: st[1],
			PBH: p[0], PBW: p[1], PEH: p[2], PEW: p[3], DH: d[0], DW: d[1]}
		pg.OH = (pg.H+pg.PBH+pg.PEH-((pg.KH-1)*pg.DH+1))/pg.SH + 1
		pg.OW = (pg.W+pg.PBW+pg.PEW-((pg.KW-1)*pg.DW+1))/pg.SW + 1
		if pg.OH < 1 || pg.OW < 1 {
			return fmt.Errorf("%s window larger than its padded input %v", n.OpType, shape)
		}
		y, err := s.out(n.Outputs[0], []int{shape[0], shape[1], pg.OH, pg.OW})
		if err != nil {
			return err
		}
		if n.OpType == "AveragePool" {
			return e.AvgPool2D(s.l.st, pg, n.Int("count_include_pad", 0) != 0, x, y)
		}
		return e.MaxPool2D(s.l.st, pg, x, y)
	case "GlobalAveragePool":
		x, shape, err := s.dev(n.Inputs[0])
		if err != nil {
			return err
		}
		if len(shape) < 3 {
			return fmt.Errorf("GlobalAveragePool of a rank-%d value", len(shape))
		}
		os := []int{shape[0], shape[1]}
		for range shape[2:] {
			os = append(os, 1)
		}
		y, err := s.out(n.Outputs[0], os)
		if err != nil {
			return err
		}
		return e.GlobalAvg(s.l.st, x, y, int64(shape[0]*shape[1]), tensor.NumElems(shape[2:]))
	case "Flatten":
		x, shape, err := s.dev(n.Inputs[0])
		if err != nil {
			return err
		}
		ax := int(n.Int("axis", 1))
		if ax < 0 {
			ax += len(shape)
		}
		if ax < 0 || ax > len(shape) {
			return fmt.Errorf("Flatten axis %d of a rank-%d value", ax, len(shape))
		}
		s.vals[n.Outputs[0]] = &val{ptr: x, shape: []int{tensor.NumElems(shape[:ax]), tensor.NumElems(shape[ax:])}}
		return nil
	case "Transpose", "Slice", "Split", "Concat", "Gather":
		return s.move(n)
	case "Reshape":
		return s.reshape(n)
	case "Resize":
		return s.resize(n)
	case "LayerNormalization":
		x, shape, err := s.dev(n.Inputs[0])
		if err != nil {
			return err
		}
		if len(shape) == 0 {
			return fmt.Errorf("LayerNormalization of a scalar")
		}
		D := shape[len(shape)-1]
		scale, ss, err := s.dev(n.Inputs[1])
		if err != nil {
			return err
		}
		var bias uint64
		if n.Input(2) != "" {
			var bs []int
			if bias, bs, err = s.dev(n.Inputs[2]); err != nil {
				return err
			}
			if tensor.NumElems(bs) != D {
				return fmt.Errorf("LayerNormalization bias of shape %v over rows of %d", bs, D)
			}
		}
		if tensor.NumElems(ss) != D {
			return fmt.Errorf("LayerNormalization scale of shape %v over rows of %d", ss, D)
		}
		y, err := s.out(n.Outputs[0], shape)
		if err != nil {
			return err
		}
		return e.LayerNorm(s.l.st, x, scale, bias, n.Float("epsilon", 1e-5), y, int64(tensor.NumElems(shape)/max(D, 1)), D)
	case "Softmax":
		x, shape, err := s.dev(n.Inputs[0])
		if err != nil {
			return err
		}
		if len(shape) == 0 {
			return fmt.Errorf("Softmax of a scalar")
		}
		D := shape[len(shape)-1]
		y, err := s.out(n.Outputs[0], shape)
		if err != nil {
			return err
		}
		return e.Softmax(s.l.st, x, y, int64(tensor.NumElems(shape)/max(D, 1)), D)
	}
	return fmt.Errorf("placed on the GPU, but this vouch has no GPU kernel for it")
}

// conv runs kernel/nn's Conv (chain, then + bias) and, fused, + res and
// then the activation, in the kernel's epilogue, in the order kernel/fused
// runs the parts.
func (s *state) conv(n *ir.Node, xn, wn, bn, rn string, act exact.Act, out string) error {
	x, xs, err := s.dev(xn)
	if err != nil {
		return err
	}
	w, ws, err := s.dev(wn)
	if err != nil {
		return err
	}
	if len(xs) != 4 || len(ws) != 4 {
		return fmt.Errorf("Conv of %v with weights %v: the GPU kernel is 2-D", xs, ws)
	}
	p := ints(n, "pads", 0, 0, 0, 0)
	st, d := ints(n, "strides", 1, 1), ints(n, "dilations", 1, 1)
	g := exact.ConvGeom{N: xs[0], C: xs[1], H: xs[2], W: xs[3], M: ws[0], G: int(n.Int("group", 1)),
		KH: ws[2], KW: ws[3], SH: st[0], SW: st[1], PH: p[0], PW: p[1], DH: d[0], DW: d[1]}
	if g.G < 1 || g.C%g.G != 0 || ws[1] != g.C/g.G {
		return fmt.Errorf("Conv of %v with weights %v in %d groups", xs, ws, g.G)
	}
	g.OH = (g.H+2*g.PH-((g.KH-1)*g.DH+1))/g.SH + 1
	g.OW = (g.W+2*g.PW-((g.KW-1)*g.DW+1))/g.SW + 1
	if g.OH < 1 || g.OW < 1 {
		return fmt.Errorf("Conv kernel larger than its padded input %v", xs)
	}
	os := []int{g.N, g.M, g.OH, g.OW}
	var bias, res uint64
	if bn != "" {
		var bs []int
		if bias, bs, err = s.dev(bn); err != nil {
			return err
		}
		if tensor.NumElems(bs) != g.M {
			return fmt.Errorf("Conv bias of shape %v for %d filters", bs, g.M)
		}
	}
	if rn != "" {
		var rs []int
		if res, rs, err = s.dev(rn); err != nil {
			return err
		}
		if !slices.Equal(rs, os) {
			return fmt.Errorf("residual of shape %v for an output of %v", rs, os)
		}
	}
	y, err := s.out(out, os)
	if err != nil {
		return err
	}
	if s.cur != nil {
		return s.fastConv(g, wn, x, bias, res, act, y)
	}
	return s.pr.e.Conv2DAct(s.l.st, g, x, w, bias, res, act, y)
}

// convAct is a fused Conv layer's activation as the conv epilogue's:
// Relu, Clip's bounds (its inputs from first on), or none.
func (s *state) convAct(n *ir.Node, h fused.Layer, first int) (exact.Act, error) {
	switch h.Activation {
	case "":
		return exact.Act{}, nil
	case "Relu":
		return exact.Act{Relu: true}, nil
	case "Clip":
		lo, hi, hasLo, hasHi, err := s.clipBounds(n, h.ActVersion, first, fused.ActPrefix)
		if err != nil {
			return exact.Act{}, err
		}
		return exact.Act{Lo: lo, Hi: hi, HasLo: hasLo, HasHi: hasHi}, nil
	}
	return exact.Act{}, fmt.Errorf("fused activation %s has no GPU epilogue", h.Activation)
}

// gemm runs kernel/nn's Gemm with alpha = beta = 1: the chain over k from
// +0, then acc + C as one rounded addition (on the GPU x*1 + C: the
// product is exact), then the fused activation. With B transposed and C
// absent or one row, it is the 1x1 convolution of images A[i] (K channels
// of one pixel) by filters B[j]: the same chains and the same epilogue,
// on the batch-folded conv tiles.
func (s *state) gemm(n *ir.Node, an, bn, cn string, act exact.Act, out string) error {
	a, as, err := s.dev(an)
	if err != nil {
		return err
	}
	b, bs, err := s.dev(bn)
	if err != nil {
		return err
	}
	if len(as) != 2 || len(bs) != 2 {
		return fmt.Errorf("Gemm of %v and %v", as, bs)
	}
	M, K := as[0], as[1]
	bm := exact.Mat{Ptr: b, RS: int64(bs[1]), CS: 1}
	N := bs[1]
	if n.Int("transB", 0) != 0 {
		N = bs[0]
		bm = exact.Mat{Ptr: b, RS: 1, CS: int64(K)}
		if bs[1] != K {
			return fmt.Errorf("Gemm of %v and %vᵀ", as, bs)
		}
	} else if bs[0] != K {
		return fmt.Errorf("Gemm of %v and %v", as, bs)
	}
	if s.cur != nil {
		return s.fastGemm(a, M, N, K, bn, cn, act, out)
	}
	if n.Int("transB", 0) != 0 {
		var bias uint64
		ok := true
		if cn != "" {
			c, cs, err := s.dev(cn)
			if err != nil {
				return err
			}
			bias, ok = c, tensor.NumElems(cs) == N && (len(cs) == 1 || len(cs) == 2 && cs[0] == 1)
		}
		if ok {
			y, err := s.out(out, []int{M, N})
			if err != nil {
				return err
			}
			g := exact.ConvGeom{N: M, C: K, H: 1, W: 1, M: N, OH: 1, OW: 1, G: 1, KH: 1, KW: 1, SH: 1, SW: 1, DH: 1, DW: 1}
			return s.pr.e.Conv2DAct(s.l.st, g, a, b, bias, 0, act, y)
		}
	}
	y, err := s.out(out, []int{M, N})
	if err != nil {
		return err
	}
	if err := s.pr.e.SGEMM(s.l.st, M, N, K, exact.Mat{Ptr: a, RS: int64(K), CS: 1}, bm, y, int64(N)); err != nil {
		return err
	}
	if cn != "" {
		c, cs, err := s.dev(cn)
		if err != nil {
			return err
		}
		switch tensor.NumElems(cs) {
		case N:
			ones, err := s.ones(N)
			if err != nil {
				return err
			}
			if err := s.pr.e.ChannelAffine(s.l.st, y, ones, c, y, int64(M*N), 1, N); err != nil {
				return err
			}
		case M * N:
			if len(cs) != 2 {
				return fmt.Errorf("Gemm C of shape %v", cs)
			}
			if err := s.pr.e.Add(s.l.st, y, c, y, int64(M*N)); err != nil {
				return err
			}
		default:
			return fmt.Errorf("Gemm C of shape %v for an output of [%d %d]", cs, M, N)
		}
	}
	count := int64(M * N)
	if act.Relu {
		if err := s.pr.e.Unary(s.l.st, exact.Relu, y, y, count); err != nil {
			return err
		}
	}
	if act.HasLo || act.HasHi {
		return s.pr.e.Clip(s.l.st, y, y, count, act.Lo, act.Hi, act.HasLo, act.HasHi)
	}
	return nil
}

// body runs a ConvChain's or Attention's body graph on the GPU, node by
// node, its first inputs the layer's inputs ins (a ConvChain binds its
// first alone, as before), its output the layer's.
func (s *state) body(n *ir.Node, ins []string) error {
	body := n.Attrs["body"].G
	if len(body.Inputs) < len(ins) || len(body.Outputs) != 1 {
		return fmt.Errorf("%s body of %d inputs, %d outputs for %d inputs", n.OpType, len(body.Inputs), len(body.Outputs), len(ins))
	}
	// The inputs first: uploading a host input takes the run's next
	// buffer, so the body's state starts counting after them.
	vals := map[string]*val{}
	for i, in := range ins {
		ptr, shape, err := s.dev(in)
		if err != nil {
			return err
		}
		vals[body.Inputs[i].Name] = &val{ptr: ptr, shape: shape}
	}
	sub := &state{pr: s.pr, l: s.l, ctx: s.ctx, g: body, vals: vals, b: s.b, next: s.next}
	for _, b := range body.Nodes {
		if err := sub.gpu(b); err != nil {
			return fmt.Errorf("body layer %s: %w", b.Name, err)
		}
	}
	s.next = sub.next
	v := sub.vals[body.Outputs[0].Name]
	if v == nil {
		return fmt.Errorf("the body did not produce %s", body.Outputs[0].Name)
	}
	s.vals[n.Outputs[0]] = &val{ptr: v.ptr, shape: v.shape}
	return nil
}

// matmul runs kernel/nn's float32 MatMul of an by bn into out: A of rank
// >= 2 by a 2-D B (A's batches folded into rows), or A and B of one rank
// >= 3 with equal batch dimensions (one product per batch); each output
// one chain over k ascending from +0.
func (s *state) matmul(an, bn, out string) (uint64, []int, error) {
	return s.matmulEpi(an, bn, out, nil, fused.Layer{})
}

// matmulEpi is matmul; for a fast MatMul whose placement names an
// epilogue (s.cur.epi), fused layer n's (layout h) first Adds run in the
// kernel's epilogue.
func (s *state) matmulEpi(an, bn, out string, n *ir.Node, h fused.Layer) (uint64, []int, error) {
	a, as, err := s.dev(an)
	if err != nil {
		return 0, nil, err
	}
	b, bs, err := s.dev(bn)
	if err != nil {
		return 0, nil, err
	}
	r := len(as)
	batched := r >= 3 && len(bs) == r && slices.Equal(as[:r-2], bs[:r-2])
	if r < 2 || (len(bs) != 2 && !batched) || as[r-1] != bs[len(bs)-2] {
		return 0, nil, fmt.Errorf("MatMul of %v by %v", as, bs)
	}
	K, N := bs[len(bs)-2], bs[len(bs)-1]
	M, batch := tensor.NumElems(as)/max(K, 1), 1
	if batched {
		M, batch = as[r-2], tensor.NumElems(as[:r-2])
	}
	os := append(slices.Clone(as[:r-1]), N)
	y, err := s.out(out, os)
	if err != nil {
		return 0, nil, err
	}
	if M == 0 || N == 0 || batch == 0 {
		return y, os, nil
	}
	if K == 0 {
		return 0, nil, fmt.Errorf("MatMul with k = 0 on the GPU")
	}
	if s.cur != nil {
		if batched {
			return 0, nil, fmt.Errorf("fast MatMul of %v by %v (the fast kernel takes a 2-D B)", as, bs)
		}
		var bias, res uint64
		if len(s.cur.epi) > 0 {
			if n == nil {
				return 0, nil, fmt.Errorf("fast MatMul epilogue %v outside a fused layer", s.cur.epi)
			}
			if bias, res, err = s.epilogueOperands(n, h, os); err != nil {
				return 0, nil, err
			}
		}
		return y, os, s.fastMatMul(a, M, N, K, bn, bias, res, y)
	}
	if !batched {
		if ok, err := s.smallProduct(bn, M, N, K, a, y); ok {
			return y, os, err
		}
	}
	am, bm := exact.Mat{Ptr: a, RS: int64(K), CS: 1}, exact.Mat{Ptr: b, RS: int64(N), CS: 1}
	if batched {
		err = s.pr.e.SGEMMGeneral(s.l.st, M, N, K, am, bm, y, int64(N), batch, int64(M*K), int64(K*N), int64(M*N))
	} else {
		err = s.pr.e.SGEMM(s.l.st, M, N, K, am, bm, y, int64(N))
	}
	return y, os, err
}

// binary runs a float32 Add or Div, broadcasting as ONNX does.
func (s *state) binary(n *ir.Node) error {
	a, sa, err := s.dev(n.Inputs[0])
	if err != nil {
		return err
	}
	b, sb, err := s.dev(n.Inputs[1])
	if err != nil {
		return err
	}
	if n.OpType == "Add" && slices.Equal(sa, sb) {
		y, err := s.out(n.Outputs[0], sa)
		if err != nil {
			return err
		}
		return s.pr.e.Add(s.l.st, a, b, y, int64(tensor.NumElems(sa)))
	}
	c, err := exact.Broadcast(sa, sb)
	if err != nil {
		return err
	}
	y, err := s.out(n.Outputs[0], c.Dims)
	if err != nil {
		return err
	}
	if n.OpType == "Div" {
		return s.pr.e.DivBroadcast(s.l.st, c, a, tensor.NumElems(sa), b, tensor.NumElems(sb), y)
	}
	return s.pr.e.AddBroadcast(s.l.st, c, a, tensor.NumElems(sa), b, tensor.NumElems(sb), y)
}

// move runs Transpose, Slice, Split, Concat and Gather (by constant
// indices) as exact.Copy's strided copies: the values move with their
// bits, as kernel/shape's do.
func (s *state) move(n *ir.Node) error {
	var srcs []uint64
	var shapes [][]int
	nin := 1
	if n.OpType == "Concat" {
		nin = len(n.Inputs)
	}
	for _, name := range n.Inputs[:nin] {
		p, sh, err := s.dev(name)
		if err != nil {
			return err
		}
		if len(sh) > exact.MaxCopyRank && n.OpType != "Gather" {
			return fmt.Errorf("a rank-%d value (the copy takes %d axes)", len(sh), exact.MaxCopyRank)
		}
		srcs, shapes = append(srcs, p), append(shapes, sh)
	}
	sh := shapes[0]
	var copies []exact.Copy
	var outs [][]int
	var src, dst []int // per copy: the input read, the output written
	one := func(c exact.Copy, out []int, err error) error {
		copies, outs, src, dst = []exact.Copy{c}, [][]int{out}, []int{0}, []int{0}
		return err
	}
	switch n.OpType {
	case "Transpose":
		var perm []int
		if n.Has("perm") {
			perm = ints(n, "perm")
		}
		if err := one(exact.TransposeCopy(sh, perm)); err != nil {
			return err
		}
	case "Slice":
		var v [4][]int64
		if n.Version < 10 {
			v[0], v[1], v[2] = n.Ints("starts", nil), n.Ints("ends", nil), n.Ints("axes", nil)
		} else {
			for i := range v {
				if n.Input(1+i) == "" {
					continue
				}
				var err error
				if v[i], err = s.intValues(n.Input(1 + i)); err != nil {
					return err
				}
			}
		}
		if err := one(exact.SliceCopy(sh, v[0], v[1], v[2], v[3])); err != nil {
			return err
		}
	case "Split":
		sizes, err := s.splitSizes(n, sh)
		if err != nil {
			return err
		}
		c, o, err := exact.SplitCopies(sh, int(n.Int("axis", 0)), sizes)
		if err != nil {
			return err
		}
		if len(o) != len(n.Outputs) {
			return fmt.Errorf("Split into %d parts for %d outputs", len(o), len(n.Outputs))
		}
		copies, outs = c, o
		for j := range c {
			src, dst = append(src, 0), append(dst, j)
		}
	case "Concat":
		c, o, err := exact.ConcatCopies(shapes, int(n.Int("axis", 0)))
		if err != nil {
			return err
		}
		copies, outs = c, [][]int{o}
		for j := range c {
			src, dst = append(src, j), append(dst, 0)
		}
	case "Gather":
		idx, err := s.host(n.Inputs[1])
		if err != nil {
			return err
		}
		iv, err := s.intValues(n.Inputs[1])
		if err != nil {
			return err
		}
		if _, constant := s.g.Initializers[n.Inputs[1]]; !constant {
			return s.gather(n, srcs[0], sh, iv, idx.Shape)
		}
		c, o, err := exact.GatherCopies(sh, int(n.Int("axis", 0)), iv, idx.Shape)
		if err != nil {
			return err
		}
		copies, outs = c, [][]int{o}
		for range c {
			src, dst = append(src, 0), append(dst, 0)
		}
	}
	ys := make([]uint64, len(outs))
	for j, o := range outs {
		var err error
		if ys[j], err = s.out(n.Outputs[j], o); err != nil {
			return err
		}
	}
	for k, c := range copies {
		if err := s.pr.e.Copy(s.l.st, c, srcs[src[k]], tensor.NumElems(shapes[src[k]]), ys[dst[k]], tensor.NumElems(outs[dst[k]])); err != nil {
			return err
		}
	}
	return nil
}

// gather runs ONNX Gather of x (shape sh) by indices read on the host (a
// graph input or a CPU layer's output: the program then runs no graph),
// checked and uploaded as int32s, with the gather kernel.
func (s *state) gather(n *ir.Node, x uint64, sh []int, iv []int64, ishape []int) error {
	ax := int(n.Int("axis", 0))
	if ax < 0 {
		ax += len(sh)
	}
	if ax < 0 || ax >= len(sh) {
		return fmt.Errorf("Gather axis %d of a rank-%d value", ax, len(sh))
	}
	idx, err := exact.GatherIndices(iv, sh[ax])
	if err != nil {
		return err
	}
	bits := int32Words(idx)
	ib, err := s.alloc(len(bits))
	if err != nil {
		return err
	}
	if err := s.l.toDevice(ib.Ptr, bits); err != nil {
		return err
	}
	out := append(append(slices.Clone(sh[:ax]), ishape...), sh[ax+1:]...)
	y, err := s.out(n.Outputs[0], out)
	if err != nil {
		return err
	}
	return s.pr.e.Gather(s.l.st, x, ib.Ptr, y, tensor.NumElems(sh[:ax]), len(idx), sh[ax], tensor.NumElems(sh[ax+1:]))
}

// splitSizes is a Split's part sizes: the split input (opset 13+) or
// attribute, else equal parts (num_outputs from opset 18, or one part per
// output; opset 18's last part may be smaller).
func (s *state) splitSizes(n *ir.Node, sh []int) ([]int, error) {
	var v []int64
	if n.Version >= 13 && n.Input(1) != "" {
		var err error
		if v, err = s.intValues(n.Inputs[1]); err != nil {
			return nil, err
		}
	} else if n.Version < 13 {
		v = n.Ints("split", nil)
	}
	if v != nil {
		out := make([]int, len(v))
		for i, x := range v {
			out[i] = int(x)
		}
		return out, nil
	}
	ax := int(n.Int("axis", 0))
	if ax < 0 {
		ax += len(sh)
	}
	if ax < 0 || ax >= len(sh) {
		return nil, fmt.Errorf("Split axis %d of a rank-%d value", ax, len(sh))
	}
	parts := len(n.Outputs)
	if n.Version >= 18 {
		parts = int(n.Int("num_outputs", int64(parts)))
	}
	if parts < 1 {
		return nil, fmt.Errorf("Split into %d parts", parts)
	}
	d := sh[ax]
	each := (d + parts - 1) / parts
	if n.Version < 18 {
		if d%parts != 0 {
			return nil, fmt.Errorf("Split of %d into %d equal parts", d, parts)
		}
		each = d / parts
	}
	out := make([]int, parts)
	for i := range out {
		out[i] = min(each, max(d-i*each, 0))
	}
	return out, nil
}

// intValues reads an integer tensor (a weight or a host value) as int64s.
func (s *state) intValues(name string) ([]int64, error) {
	t, err := s.host(name)
	if err != nil {
		return nil, err
	}
	switch d := t.Data.(type) {
	case []int64:
		return d, nil
	case []int32:
		out := make([]int64, len(d))
		for i, x := range d {
			out[i] = int64(x)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%s is %v, not an integer tensor", name, t.DType)
}

// reshape is a view: the value's buffer (or host data) under the shape
// ONNX Reshape computes (0 copies the input's dimension unless allowzero,
// -1 takes what is left).
func (s *state) reshape(n *ir.Node) error {
	v := s.vals[n.Inputs[0]]
	var shape []int
	var ptr uint64
	if v != nil && v.strides != nil {
		shape = v.shape
	} else if v == nil || v.ptr != 0 || v.host == nil {
		var err error
		if ptr, shape, err = s.dev(n.Inputs[0]); err != nil {
			return err
		}
	} else {
		shape = v.shape
	}
	spec, err := s.intValues(n.Input(1))
	if err != nil {
		return err
	}
	out, err := reshaped(shape, spec, n.Int("allowzero", 0) != 0)
	if err != nil {
		return err
	}
	if v != nil && v.strides != nil {
		return s.reshapeView(n, v, out)
	}
	nv := &val{ptr: ptr, shape: out}
	if v != nil && v.host != nil {
		d, ok := v.host.Data.([]float32)
		if !ok {
			return fmt.Errorf("Reshape of a %v value on the GPU", v.host.DType)
		}
		nv.host = tensor.From(d, out...)
	}
	s.vals[n.Outputs[0]] = nv
	return nil
}

// reshaped is ONNX Reshape's output shape for an input of shape in.
func reshaped(in []int, spec []int64, allowZero bool) ([]int, error) {
	out := make([]int, len(spec))
	infer := -1
	known := 1
	for i, d := range spec {
		switch {
		case d == -1:
			if infer >= 0 {
				return nil, fmt.Errorf("Reshape to %v: more than one -1", spec)
			}
			infer = i
			continue
		case d == 0 && !allowZero:
			if i >= len(in) {
				return nil, fmt.Errorf("Reshape to %v: a 0 past the input's rank %d", spec, len(in))
			}
			out[i] = in[i]
		case d < 0 || d > 1<<40:
			return nil, fmt.Errorf("Reshape to %v", spec)
		default:
			out[i] = int(d)
		}
		known *= out[i]
	}
	total := tensor.NumElems(in)
	if infer >= 0 {
		if known == 0 || total%known != 0 {
			return nil, fmt.Errorf("Reshape of %v to %v", in, spec)
		}
		out[infer] = total / known
	} else if known != total {
		return nil, fmt.Errorf("Reshape of %v (%d values) to %v", in, total, spec)
	}
	return out, nil
}

// matmulFused runs a fused MatMul of A (rank >= 2, batches folded into
// rows) by a 2-D B: kernel/nn's chain per output (SGEMM), then the Adds in
// order (the running value first: a bias over the last axis as x*1 + b,
// the product exact, or an operand of the output's shape), then the
// activation: kernel/fused's epilogue, operation by operation.
func (s *state) matmulFused(n *ir.Node, h fused.Layer) error {
	y, os, err := s.matmulEpi(n.Inputs[0], n.Inputs[1], n.Outputs[0], n, h)
	if err != nil {
		return err
	}
	e := s.pr.e
	count := int64(tensor.NumElems(os))
	first := 0 // the Adds the fast epilogue ran
	if s.cur != nil {
		first = len(s.cur.epi)
	}
	for i := first; i < h.Adds; i++ {
		r, rs, err := s.dev(n.Inputs[2+i])
		if err != nil {
			return err
		}
		switch {
		case slices.Equal(rs, os):
			err = e.Add(s.l.st, y, r, y, count)
		case i == 0 && len(rs) > 0 && len(rs) <= len(os) && rs[len(rs)-1] == os[len(os)-1] && tensor.NumElems(rs) == os[len(os)-1]:
			N := os[len(os)-1]
			var ones uint64
			if ones, err = s.ones(N); err == nil {
				err = e.ChannelAffine(s.l.st, y, ones, r, y, count, 1, N)
			}
		default:
			// Broadcast: in place when the result keeps the output's
			// shape, else into a larger output.
			c, berr := exact.Broadcast(os, rs)
			if berr != nil {
				return berr
			}
			dst := y
			if !slices.Equal(c.Dims, os) {
				if dst, err = s.out(n.Outputs[0], c.Dims); err != nil {
					return err
				}
			}
			err = e.AddBroadcast(s.l.st, c, y, int(count), r, tensor.NumElems(rs), dst)
			y, os, count = dst, c.Dims, int64(tensor.NumElems(c.Dims))
		}
		if err != nil {
			return err
		}
	}
	if s.cur != nil && s.cur.gelu { // ran in the fast epilogue (parseFast checked the layer)
		return nil
	}
	switch h.Activation {
	case "":
		return nil
	case "Relu":
		return e.Unary(s.l.st, exact.Relu, y, y, count)
	case "Gelu":
		op := exact.GeluErf
		switch a := n.String(fused.ActPrefix+"approximate", "none"); a {
		case "none":
		case "tanh":
			op = exact.GeluTanh
		default:
			return fmt.Errorf("fused Gelu approximate %q", a)
		}
		return e.Unary(s.l.st, op, y, y, count)
	case "Clip":
		lo, hi, hasLo, hasHi, err := s.clipBounds(n, h.ActVersion, h.BaseInputs+h.Adds, fused.ActPrefix)
		if err != nil {
			return err
		}
		return e.Clip(s.l.st, y, y, count, lo, hi, hasLo, hasHi)
	}
	return fmt.Errorf("fused activation %s has no GPU epilogue", h.Activation)
}

// clipBounds reads a Clip's bounds as kernel/elementwise does: before
// opset 11 the min and max attributes (prefix: a fused layer's act_),
// always both; from 11 the inputs from first on, each absent or a scalar
// weight.
func (s *state) clipBounds(n *ir.Node, version int64, first int, prefix string) (lo, hi float32, hasLo, hasHi bool, err error) {
	if version > 0 && version < 11 {
		return n.Float(prefix+"min", float32(math.Inf(-1))), n.Float(prefix+"max", float32(math.Inf(1))), true, true, nil
	}
	for i, p := range []*float32{&lo, &hi} {
		name := n.Input(first + i)
		if name == "" {
			continue
		}
		t, ok := s.g.Initializers[name]
		if !ok || t.DType != tensor.Float32 || t.Len() != 1 {
			return 0, 0, false, false, fmt.Errorf("Clip bound %q is not a float32 constant", name)
		}
		*p = t.Data.([]float32)[0]
		if i == 0 {
			hasLo = true
		} else {
			hasHi = true
		}
	}
	return lo, hi, hasLo, hasHi, nil
}

// ones returns n float32 ones on the device (Gemm's bias as an affine map).
func (s *state) ones(n int) (uint64, error) {
	key := wkey{nil, fmt.Sprintf("ones/%d", n)}
	if b := s.pr.weights[key]; b != nil {
		return b.Ptr, nil
	}
	v := make([]float32, n)
	for i := range v {
		v[i] = 1
	}
	b, err := s.pr.c.Alloc(uint64(n) * 4)
	if err != nil {
		return 0, err
	}
	if err := s.pr.c.Upload(b, v); err != nil {
		b.Free()
		return 0, err
	}
	s.pr.weights[key] = b
	return b.Ptr, nil
}

func digest(b []byte) string { return plan.Digest(b) }
