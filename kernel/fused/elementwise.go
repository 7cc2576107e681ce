package fused

import (
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// An Elementwise layer (domain "vouch") runs a chain (or tree) of float32
// elementwise nodes, held in its "body" graph attribute as a Chain layer's
// are, in one pass over memory: the output is cut into blocks of
// BlockSize elements and every body node runs on a block before the next
// block starts, so the intermediate values never leave the cache.
//
// Each layer input is either "full" (it has the output's shape: its block
// is copied into a block buffer) or one element (it is passed to the body
// nodes as a rank-0 tensor, which broadcasts). Every body node runs its own
// kernel's Into on the block tensors, and an elementwise kernel computes
// each output element from the input elements at the same offset only, so
// the bits are those of the unfused nodes whatever the block size. A body
// node's output may take the block buffer of an input that dies at it (the
// kernels are kernel.Op.InPlace).
//
// Blocks are shared out over the worker pool (threads partition outputs).
// Each worker takes its block buffers and tensor headers from a free list
// per layer (see freeList), made for the last block lengths seen: after
// warm-up a call allocates nothing.
//
// Where that does not apply (a body node without an InPlace Into, an input
// of another shape or dtype, a body node whose operands are all one-element
// inputs) the body runs unblocked, node by node through Run, which is
// exact too.

// BlockSize is the number of elements of one block (16 KiB of float32).
const BlockSize = 4096

type ewOp struct {
	reg *kernel.Registry
}

// ewEntry is a layer's body, analysed once.
type ewEntry struct {
	g     *ir.Graph
	err   error // the body cannot run blockwise: why
	nodes []*ir.Node
	ops   []*kernel.Op
	nin   int     // values 0..nin-1 are the layer inputs, nin+k node k's output
	args  [][]int // per node, the value index of each input (-1 absent)
	buf   []int   // per value, its block buffer
	nbuf  int
	final int // the value index of the body output
	memo  atomic.Pointer[memo]
	works freeList[ewWork]
	calls freeList[ewCall]
}

// freeList keeps values for reuse. Unlike a sync.Pool it never drops them
// (a garbage collection empties a sync.Pool, and the next calls would
// allocate again): it holds as many as were ever in use at once, which is
// at most the number of concurrent calls times the pool's workers.
type freeList[T any] struct {
	mu   sync.Mutex
	free []*T
}

func (f *freeList[T]) get() *T {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := len(f.free); n > 0 {
		v := f.free[n-1]
		f.free = f.free[:n-1]
		return v
	}
	return nil
}

func (f *freeList[T]) put(v *T) {
	f.mu.Lock()
	f.free = append(f.free, v)
	f.mu.Unlock()
}

// prepare is Elementwise's Op.Prepare: the body analysed at bind time (a
// body that cannot run blockwise still runs, so it is no error here).
func (e *ewOp) prepare(c *kernel.Ctx, n *ir.Node, _ []*tensor.Tensor) error {
	e.entry(c, n)
	return nil
}

// ewKey keys an elementwise chain's analysis in its node's kernel.State.
type ewKey struct{ n *ir.Node }

// entry returns n's analysis, kept in c's kernel.State (made on every
// call where c keeps none).
func (e *ewOp) entry(c *kernel.Ctx, n *ir.Node) *ewEntry {
	en, _ := kernel.Prepared(c, ewKey{n}, nil, func() (*ewEntry, error) { return e.analyse(n), nil })
	return en
}

// analyse maps the body's values to indices and block buffers. A body that
// cannot run blockwise gets err set (it still runs, unblocked).
func (e *ewOp) analyse(n *ir.Node) *ewEntry {
	en := &ewEntry{}
	g, err := body(n)
	if err != nil {
		en.err = err
		return en
	}
	en.g = g
	en.nin = len(g.Inputs)
	idx := map[string]int{}
	for i, v := range g.Inputs {
		idx[v.Name] = i
	}
	fail := func(format string, a ...any) *ewEntry {
		en.err = fmt.Errorf("elementwise layer: "+format, a...)
		return en
	}
	if len(g.Initializers) > 0 {
		return fail("body has initializers")
	}
	for k, nd := range g.Nodes {
		op, err := e.reg.Lookup(nd)
		if err != nil {
			return fail("%v", err)
		}
		if op.Into == nil || !op.InPlace {
			return fail("%s has no in-place Into", nd.OpType)
		}
		if len(nd.Outputs) != 1 || nd.Outputs[0] == "" {
			return fail("%s must have one output", nd.OpType)
		}
		args := make([]int, len(nd.Inputs))
		for j, in := range nd.Inputs {
			if in == "" {
				args[j] = -1
				continue
			}
			v, ok := idx[in]
			if !ok {
				return fail("%s reads %q, which the body does not define before it", nd.OpType, in)
			}
			args[j] = v
		}
		if _, dup := idx[nd.Outputs[0]]; dup {
			return fail("value %q defined twice", nd.Outputs[0])
		}
		idx[nd.Outputs[0]] = en.nin + k
		en.nodes = append(en.nodes, nd)
		en.ops = append(en.ops, op)
		en.args = append(en.args, args)
	}
	if len(en.nodes) == 0 {
		return fail("empty body")
	}
	final, ok := idx[g.Outputs[0].Name]
	if !ok || final < en.nin {
		return fail("body output %q is not computed by the body", g.Outputs[0].Name)
	}
	en.final = final
	// Block buffers: every input has one from the start; a node's output
	// takes a buffer freed by a value whose last reader it is (possibly
	// its own input: in place), or a new one.
	nv := en.nin + len(en.nodes)
	last := make([]int, nv)
	for v := range last {
		last[v] = -1
	}
	for k, args := range en.args {
		for _, v := range args {
			if v >= 0 {
				last[v] = k
			}
		}
	}
	en.buf = make([]int, nv)
	for v := 0; v < en.nin; v++ {
		en.buf[v] = v
	}
	en.nbuf = en.nin
	var free []int
	for k, args := range en.args {
		for j, v := range args {
			if v < 0 || last[v] != k || v == final || seenBefore(args[:j], v) {
				continue
			}
			free = append(free, en.buf[v])
		}
		o := en.nin + k
		if len(free) > 0 {
			en.buf[o] = free[len(free)-1]
			free = free[:len(free)-1]
		} else {
			en.buf[o] = en.nbuf
			en.nbuf++
		}
	}
	return en
}

func seenBefore(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func (e *ewOp) infer(n *ir.Node, in []ir.InferInput) ([]ir.Type, error) {
	return (&chainOp{reg: e.reg}).infer(n, in)
}

// outShape is the layer's output shape for inputs in (inferred once per
// set of input shapes).
func (e *ewOp) outShape(n *ir.Node, en *ewEntry, in []*tensor.Tensor) ([]int, error) {
	if m := en.memo.Load(); m != nil && len(m.in) == len(in) {
		same := true
		for i, t := range in {
			if t == nil || !equalInts(t.Shape, m.in[i]) {
				same = false
				break
			}
		}
		if same {
			return m.base, nil
		}
	}
	args := make([]ir.InferInput, len(in))
	m := &memo{in: make([][]int, len(in))}
	for i, t := range in {
		if t == nil {
			return nil, fmt.Errorf("elementwise layer: input %d is missing", i)
		}
		args[i] = ir.InferInput{Present: true, Type: ir.TensorType(t)}
		m.in[i] = append([]int{}, t.Shape...)
	}
	ts, err := e.infer(n, args)
	if err != nil {
		return nil, err
	}
	s, ok := ts[0].Static()
	if !ok {
		return nil, fmt.Errorf("elementwise layer: output shape not static")
	}
	m.base = s
	en.memo.Store(m)
	return s, nil
}

func (e *ewOp) run(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	en := e.entry(c, n)
	if en.err == nil {
		if shape, err := e.outShape(n, en, in); err == nil {
			out := tensor.New(tensor.Float32, shape...)
			if ok, err := e.blocked(c, en, in, out); ok || err != nil {
				return []*tensor.Tensor{out}, err
			}
		}
	}
	return e.unblocked(c, n, in)
}

func (e *ewOp) into(c *kernel.Ctx, n *ir.Node, in, out []*tensor.Tensor) error {
	if len(out) == 0 || out[0] == nil {
		return fmt.Errorf("elementwise layer: no output slot")
	}
	en := e.entry(c, n)
	if en.err == nil {
		if ok, err := e.blocked(c, en, in, out[0]); ok || err != nil {
			return err
		}
	}
	res, err := e.unblocked(c, n, in)
	if err != nil {
		return err
	}
	r := res[0]
	if r.DType != out[0].DType || r.Len() != out[0].Len() {
		return fmt.Errorf("elementwise layer: result is %v%v, output slot is %v%v", r.DType, r.Shape, out[0].DType, out[0].Shape)
	}
	reflect.Copy(reflect.ValueOf(out[0].Data), reflect.ValueOf(r.Data))
	return nil
}

// unblocked runs the body node by node through Run.
func (e *ewOp) unblocked(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	g, err := body(n)
	if err != nil {
		return nil, err
	}
	vals := make(map[string]*tensor.Tensor, len(g.Inputs)+len(g.Nodes)+len(g.Initializers))
	for k, t := range g.Initializers {
		vals[k] = t
	}
	for i, v := range g.Inputs {
		if i < len(in) {
			vals[v.Name] = in[i]
		}
	}
	for _, nd := range g.Nodes {
		op, err := e.reg.Lookup(nd)
		if err != nil {
			return nil, err
		}
		args := make([]*tensor.Tensor, len(nd.Inputs))
		for j, name := range nd.Inputs {
			if name == "" {
				continue
			}
			t, ok := vals[name]
			if !ok || t == nil {
				return nil, fmt.Errorf("elementwise layer: %s reads %q, which has no value", nd.OpType, name)
			}
			args[j] = t
		}
		outs, err := op.Run(c, nd, args)
		if err != nil {
			return nil, fmt.Errorf("%s part: %w", nd.OpType, err)
		}
		for j, name := range nd.Outputs {
			if name != "" && j < len(outs) {
				vals[name] = outs[j]
			}
		}
	}
	r, ok := vals[g.Outputs[0].Name]
	if !ok || r == nil {
		return nil, fmt.Errorf("elementwise layer: body output %q not computed", g.Outputs[0].Name)
	}
	return []*tensor.Tensor{r}, nil
}

// ewCall is one blocked call, shared by the workers that run its blocks.
type ewCall struct {
	e      *ewOp
	en     *ewEntry
	c      *kernel.Ctx
	in     []*tensor.Tensor
	scalar []bool // per input: passed as a rank-0 tensor
	src    [][]float32
	dst    []float32
	n, bl  int
	mu     sync.Mutex
	err    error
}

// ewWork is one worker's block buffers and tensor headers, made for block
// lengths bl (every block but the last) and tail (the last).
type ewWork struct {
	bufs     [][]float32
	bl, tail int
	hdr      [2][]tensor.Tensor // [full block / tail block][value]
	sc       []tensor.Tensor    // per input, its rank-0 form
	args     [2][][]*tensor.Tensor
	outs     [2][][]*tensor.Tensor
}

// blocked runs the layer blockwise into out when it can; ok false means
// it cannot (the caller runs the body unblocked).
func (e *ewOp) blocked(c *kernel.Ctx, en *ewEntry, in []*tensor.Tensor, out *tensor.Tensor) (ok bool, err error) {
	dst, isF := out.Data.([]float32)
	if !isF || len(in) != en.nin || len(dst) != tensor.NumElems(out.Shape) {
		return false, nil
	}
	call := en.calls.get()
	if call == nil {
		call = &ewCall{e: e, en: en, scalar: make([]bool, en.nin), src: make([][]float32, en.nin)}
	}
	defer func() {
		call.c, call.in, call.dst, call.err = nil, nil, nil, nil
		clear(call.src)
		en.calls.put(call)
	}()
	n := len(dst)
	for i, t := range in {
		if t == nil {
			return false, nil
		}
		d, isF := t.Data.([]float32)
		if !isF {
			return false, nil
		}
		switch {
		case equalInts(t.Shape, out.Shape) && len(d) == n:
			call.scalar[i] = false
		case len(d) == 1:
			call.scalar[i] = true
		default:
			return false, nil
		}
		call.src[i] = d
	}
	// Every node must have an operand of block size: one that is a node
	// output or a full input.
	for _, args := range en.args {
		full := false
		for _, v := range args {
			if v >= en.nin || (v >= 0 && !call.scalar[v]) {
				full = true
				break
			}
		}
		if !full {
			return false, nil
		}
	}
	if n == 0 {
		return true, nil
	}
	call.c, call.in, call.dst, call.n = c, in, dst, n
	call.bl = min(BlockSize, n)
	blocks := (n + call.bl - 1) / call.bl
	c.Workers().Run(blocks, 2*n*len(en.nodes), call)
	return true, call.err
}

// Run computes blocks [lo, hi) (parallel.Task).
func (call *ewCall) Run(lo, hi int) {
	en := call.en
	w := en.works.get()
	if w == nil {
		w = &ewWork{bufs: make([][]float32, en.nbuf)}
		for i := range w.bufs {
			w.bufs[i] = make([]float32, BlockSize)
		}
	}
	defer en.works.put(w)
	tail := call.n - (call.n-1)/call.bl*call.bl
	if w.bl != call.bl || w.tail != tail || w.hdr[0] == nil {
		w.prepare(en, call.bl, tail)
	}
	// Point the node arguments at each input's block or rank-0 form.
	for i, t := range call.in {
		if call.scalar[i] {
			w.sc[i].Data = t.Data
		}
	}
	for s := 0; s < 2; s++ {
		for k, args := range en.args {
			for j, v := range args {
				switch {
				case v < 0:
					w.args[s][k][j] = nil
				case v < en.nin && call.scalar[v]:
					w.args[s][k][j] = &w.sc[v]
				default:
					w.args[s][k][j] = &w.hdr[s][v]
				}
			}
		}
	}
	for b := lo; b < hi; b++ {
		start := b * call.bl
		end := min(start+call.bl, call.n)
		s := 0
		if end-start != call.bl {
			s = 1
		}
		m := end - start
		for i, d := range call.src {
			if !call.scalar[i] {
				copy(w.bufs[en.buf[i]][:m], d[start:end])
			}
		}
		for k, nd := range en.nodes {
			if err := en.ops[k].Into(call.c, nd, w.args[s][k], w.outs[s][k]); err != nil {
				call.mu.Lock()
				if call.err == nil {
					call.err = fmt.Errorf("%s part: %w", nd.OpType, err)
				}
				call.mu.Unlock()
				return
			}
		}
		copy(call.dst[start:end], w.bufs[en.buf[en.final]][:m])
	}
	for i := range w.sc {
		w.sc[i].Data = nil // do not keep the caller's tensors alive
	}
}

// prepare makes the worker's headers for block lengths bl and tail.
func (w *ewWork) prepare(en *ewEntry, bl, tail int) {
	w.bl, w.tail = bl, tail
	nv := en.nin + len(en.nodes)
	w.sc = make([]tensor.Tensor, en.nin)
	for i := range w.sc {
		w.sc[i] = tensor.Tensor{DType: tensor.Float32, Shape: []int{}}
	}
	for s, m := range [2]int{bl, tail} {
		shape := []int{m}
		w.hdr[s] = make([]tensor.Tensor, nv)
		for v := range w.hdr[s] {
			w.hdr[s][v] = tensor.Tensor{DType: tensor.Float32, Shape: shape, Data: w.bufs[en.buf[v]][:m]}
		}
		w.args[s] = make([][]*tensor.Tensor, len(en.nodes))
		w.outs[s] = make([][]*tensor.Tensor, len(en.nodes))
		for k, args := range en.args {
			w.args[s][k] = make([]*tensor.Tensor, len(args))
			w.outs[s][k] = []*tensor.Tensor{&w.hdr[s][en.nin+k]}
		}
	}
}
