package nn

import (
	"fmt"
	"sync"
	"time"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/amd64"
)

// BlockedStep is one convolution of a chain run on B16 tensors: value
// Out = canon(conv(value In, W) ) + B, + value Res (when Res >= 0), then
// clamped to Clamp (when not nil). Value 0 is the chain's input; each
// step's Out is a new value, numbered after its inputs.
type BlockedStep struct {
	Attrs   *ir.Node // the Conv's attributes
	W       []float32
	WShape  []int
	B       []float32 // nil: none
	In, Res int       // Res -1: none
	Out     int
	Clamp   *[2]float32
	setup   *convSetup
	z       zShape
}

// BlockedChain is a chain of convolutions prepared for one input shape:
// each value's B16 layout and the buffer it lives in (buffers are reused
// once a value is no longer read). Buffers come from a free list:
// concurrent runs are safe.
type BlockedChain struct {
	steps []BlockedStep
	vals  []B16
	buf   []int // value -> buffer
	sizes []int // buffer -> floats
	out   int   // the chain's output value
	// free holds buffer sets between runs (one per concurrent run; a
	// sync.Pool would drop them at every GC and fault megabytes in again).
	mu   sync.Mutex
	free [][][]float32
}

// Blocked reports whether blocked chains run under k: the CPU has AVX2
// (AVX-512 where it has it) and k allows it. A chain runs only under such
// a context.
func Blocked(k *kernel.Ctx) bool { return machineOf(k).fast }

// NewBlockedChain prepares steps (in order) for an input of shape x
// ([1, C, H, W]) under k; out is the value the chain returns. It reports
// an error where a step does not run on B16 tensors here
// (convBlockedOK), or the values do not line up.
func NewBlockedChain(k *kernel.Ctx, steps []BlockedStep, x []int, out int) (*BlockedChain, error) {
	pool := machineOf(k)
	if !pool.fast {
		return nil, fmt.Errorf("nn: blocked chain: no AVX2")
	}
	if len(x) != 4 || x[0] != 1 {
		return nil, fmt.Errorf("nn: blocked chain: input %v, want [1 C H W]", x)
	}
	c := &BlockedChain{steps: append([]BlockedStep{}, steps...), vals: []B16{{x[1], x[2], x[3]}}, out: out}
	for i := range c.steps {
		st := &c.steps[i]
		if st.In < 0 || st.In >= len(c.vals) || st.Res >= len(c.vals) || st.Out != len(c.vals) {
			return nil, fmt.Errorf("nn: blocked chain: step %d reads %d and %d, writes %d, of %d values", i, st.In, st.Res, st.Out, len(c.vals))
		}
		in := c.vals[st.In]
		s, err := setupConv(&ir.Node{OpType: "Conv", Attrs: withoutTactic(st.Attrs.Attrs)}, []int{1, in.C, in.H, in.W}, st.WShape)
		if err != nil {
			return nil, err
		}
		if len(st.W) != prod(st.WShape) || (st.B != nil && len(st.B) != s.M) {
			return nil, fmt.Errorf("nn: blocked chain: step %d: weights %d, bias %d for %v", i, len(st.W), len(st.B), st.WShape)
		}
		z, ok := convBlockedOK(pool, s)
		if !ok {
			return nil, fmt.Errorf("nn: blocked chain: step %d does not run on blocked tensors", i)
		}
		o := B16{s.M, s.g.out[0], s.g.out[1]}
		if st.Res >= 0 && c.vals[st.Res] != o {
			return nil, fmt.Errorf("nn: blocked chain: step %d: residual %v, output %v", i, c.vals[st.Res], o)
		}
		st.setup, st.z = s, z
		c.vals = append(c.vals, o)
	}
	if out <= 0 || out >= len(c.vals) {
		return nil, fmt.Errorf("nn: blocked chain: output value %d of %d", out, len(c.vals))
	}
	// Buffers: a value's buffer is free again after the last step that
	// reads it (never before the step that writes a new value ends).
	last := make([]int, len(c.vals))
	for i, st := range c.steps {
		last[st.In] = i
		if st.Res >= 0 {
			last[st.Res] = i
		}
	}
	last[out] = len(c.steps)
	c.buf = make([]int, len(c.vals))
	var free []int
	alloc := func(v int) {
		n := c.vals[v].Len() + B16Slack
		for k, b := range free {
			if c.sizes[b] >= n {
				c.buf[v] = b
				free = append(free[:k], free[k+1:]...)
				return
			}
		}
		c.buf[v] = len(c.sizes)
		c.sizes = append(c.sizes, n)
	}
	alloc(0)
	for i, st := range c.steps {
		alloc(st.Out)
		for v := 0; v < st.Out; v++ {
			if last[v] == i {
				free = append(free, c.buf[v])
			}
		}
	}
	return c, nil
}

// OutShape is the chain's output shape, [1, C, H, W].
func (c *BlockedChain) OutShape() [4]int {
	o := c.vals[c.out]
	return [4]int{1, o.C, o.H, o.W}
}

// Run computes the chain on x (planes, the shape it was prepared for)
// into y (planes), on k's workers; Blocked(k) must hold.
func (c *BlockedChain) Run(k *kernel.Ctx, x, y []float32) { c.RunTraced(k, x, y, nil) }

// RunTraced is Run, calling trace (when not nil) with each step's index
// and wall time.
func (c *BlockedChain) RunTraced(k *kernel.Ctx, x, y []float32, trace func(step int, d time.Duration)) {
	pool := machineOf(k)
	if !pool.fast {
		panic("nn: blocked chain run without AVX2")
	}
	in, out := c.vals[0], c.vals[c.out]
	if len(x) != in.C*in.H*in.W || len(y) != out.C*out.H*out.W {
		panic(fmt.Sprintf("nn: blocked chain: x %d, y %d floats for %v -> %v", len(x), len(y), in, out))
	}
	var set [][]float32
	c.mu.Lock()
	if n := len(c.free); n > 0 {
		set, c.free = c.free[n-1], c.free[:n-1]
	}
	c.mu.Unlock()
	if set == nil {
		set = make([][]float32, len(c.sizes))
		for i, n := range c.sizes {
			set[i] = make([]float32, n)
		}
	}
	if pool.z {
		toB16Fast(in, x, set[c.buf[0]])
	} else {
		toB16A(in, x, set[c.buf[0]])
	}
	for i := range c.steps {
		var t0 time.Time
		if trace != nil {
			t0 = time.Now()
		}
		st := &c.steps[i]
		var res []float32
		if st.Res >= 0 {
			res = set[c.buf[st.Res]]
		}
		convBlocked(pool, st.setup, st.z, set[c.buf[st.In]], st.W, st.B, set[c.buf[st.Out]], res, st.Clamp)
		if trace != nil {
			trace(i, time.Since(t0))
		}
	}
	if pool.z {
		fromB16Fast(out, set[c.buf[c.out]], y)
	} else {
		fromB16A(out, set[c.buf[c.out]], y)
	}
	c.mu.Lock()
	if len(c.free) < 16 {
		c.free = append(c.free, set)
	}
	c.mu.Unlock()
}

// toB16Fast is ToB16 through TransposeZ16 (16 channels by 16 pixels at a
// time); the ring is zeroed after.
func toB16Fast(b B16, x, dst []float32) {
	H, W := b.H, b.W
	HW := H * W
	for q := 0; q < b.C/16; q++ {
		for yy := 0; yy < H; yy++ {
			for x0 := 0; x0 < W; x0 += 16 {
				n := min(16, W-x0)
				src := q*16*HW + yy*W + x0
				if src+15*HW+16 > len(x) {
					// The last rows' reads would leave x: one by one.
					for c := 0; c < 16; c++ {
						for i := 0; i < n; i++ {
							dst[b.At(q*16+c, yy, x0+i)] = x[src+c*HW+i]
						}
					}
					continue
				}
				o := b.At(q*16, yy, x0)
				_ = dst[o+16*n-1]
				amd64.TransposeZ16(&x[src], HW, 16, &dst[o], 16, n)
			}
		}
	}
	zeroRing(b, dst)
}

// fromB16Fast is FromB16 through TransposeZ16 (src has B16Slack floats
// after the tensor: the last pixels' reads run past it).
func fromB16Fast(b B16, src, y []float32) {
	H, W := b.H, b.W
	HW := H * W
	for q := 0; q < b.C/16; q++ {
		for yy := 0; yy < H; yy++ {
			for x0 := 0; x0 < W; x0 += 16 {
				n := min(16, W-x0)
				s := b.At(q*16, yy, x0)
				_ = src[s+16*16-1]
				o := q*16*HW + yy*W + x0
				_ = y[o+15*HW+n-1]
				amd64.TransposeZ16(&src[s], 16, n, &y[o], HW, 16)
			}
		}
	}
}
