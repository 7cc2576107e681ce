package server

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/vouchml/vouch/tensor"
)

// ErrQueueFull is returned when a model's queue holds as many requests as
// it may; the server answers 503 with Retry-After.
var ErrQueueFull = errors.New("server: queue full")

// ErrClosed is returned for requests that arrive after shutdown began.
var ErrClosed = errors.New("server: shutting down")

// PoolOptions size a model's engine pool.
type PoolOptions struct {
	Workers int // executors running at once; default 1
	Queue   int // requests waiting beyond the running ones; default 64
	// MaxBatch > 1 turns on dynamic batching for models with a batch
	// dimension: a worker stacks up to MaxBatch rows of waiting requests
	// into one run, waiting at most MaxDelay for the batch to fill.
	MaxBatch int
	MaxDelay time.Duration
}

func (o PoolOptions) withDefaults() PoolOptions {
	if o.Workers <= 0 {
		o.Workers = 1
	}
	if o.Queue <= 0 {
		o.Queue = 64
	}
	return o
}

// pool runs one model's requests on a fixed set of workers fed by a bounded
// queue. Closing it stops intake and lets the workers drain what is queued.
type pool struct {
	r        Runner
	opt      PoolOptions
	maxBatch int // rows; 1 disables batching

	mu     sync.RWMutex
	closed bool
	queue  chan *job
	wg     sync.WaitGroup

	observeBatch func(rows int)
}

type job struct {
	ctx    context.Context
	inputs map[string]*tensor.Tensor
	rows   int
	enq    time.Time
	done   chan jobResult // buffered 1
}

type jobResult struct {
	outs    map[string]*tensor.Tensor
	err     error
	queue   time.Duration
	compute time.Duration
	batch   int // rows in the run that served it
}

func newPool(r Runner, opt PoolOptions, observeBatch func(int)) *pool {
	opt = opt.withDefaults()
	p := &pool{r: r, opt: opt, maxBatch: 1, queue: make(chan *job, opt.Queue), observeBatch: observeBatch}
	if mb := r.Info().MaxBatch; opt.MaxBatch > 1 && mb > 1 {
		p.maxBatch = min(opt.MaxBatch, mb)
	}
	for range opt.Workers {
		p.wg.Add(1)
		go p.work()
	}
	return p
}

// depth is the number of queued requests.
func (p *pool) depth() int { return len(p.queue) }

// submit queues inputs and waits for their outputs. It never blocks on a
// full queue. When ctx ends first the run still happens; its result is
// dropped.
func (p *pool) submit(ctx context.Context, inputs map[string]*tensor.Tensor) jobResult {
	j := &job{ctx: ctx, inputs: inputs, rows: batchRows(inputs), enq: time.Now(), done: make(chan jobResult, 1)}
	p.mu.RLock()
	if p.closed {
		p.mu.RUnlock()
		return jobResult{err: ErrClosed}
	}
	select {
	case p.queue <- j:
	default:
		p.mu.RUnlock()
		return jobResult{err: ErrQueueFull}
	}
	p.mu.RUnlock()
	select {
	case res := <-j.done:
		return res
	case <-ctx.Done():
		return jobResult{err: ctx.Err()}
	}
}

// close stops intake and waits until every queued request has run.
func (p *pool) close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.queue)
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *pool) work() {
	defer p.wg.Done()
	var carry *job
	for {
		first := carry
		carry = nil
		if first == nil {
			var ok bool
			if first, ok = <-p.queue; !ok {
				return
			}
		}
		batch := []*job{first}
		rows := first.rows
		if p.maxBatch > 1 && rows > 0 && rows < p.maxBatch {
			timer := time.NewTimer(p.opt.MaxDelay)
		fill:
			for rows < p.maxBatch {
				select {
				case j, ok := <-p.queue:
					if !ok {
						break fill
					}
					if j.rows <= 0 || rows+j.rows > p.maxBatch || !stackable(first.inputs, j.inputs) {
						carry = j
						break fill
					}
					batch = append(batch, j)
					rows += j.rows
				case <-timer.C:
					break fill
				}
			}
			timer.Stop()
		}
		p.run(batch, rows)
	}
}

// run serves a batch: one stacked run when it holds several requests,
// falling back to one run each if the stacked run fails.
func (p *pool) run(batch []*job, rows int) {
	start := time.Now()
	if len(batch) > 1 {
		outs, err := p.runSafe(batch[0].ctx, stack(batch))
		var parts []map[string]*tensor.Tensor
		if err == nil {
			parts, err = unstack(outs, batch)
		}
		if err == nil {
			d := time.Since(start)
			if p.observeBatch != nil {
				p.observeBatch(rows)
			}
			for i, j := range batch {
				j.done <- jobResult{outs: parts[i], queue: start.Sub(j.enq), compute: d, batch: rows}
			}
			return
		}
	}
	for _, j := range batch {
		s := time.Now()
		if err := j.ctx.Err(); err != nil {
			// Its client is gone, or its deadline passed, while it waited:
			// the run would be thrown away.
			j.done <- jobResult{err: err, queue: s.Sub(j.enq)}
			continue
		}
		outs, err := p.runSafe(j.ctx, j.inputs)
		if p.observeBatch != nil {
			p.observeBatch(max(j.rows, 1))
		}
		j.done <- jobResult{outs: outs, err: err, queue: s.Sub(j.enq), compute: time.Since(s), batch: max(j.rows, 1)}
	}
}

// runSafe runs the model and turns a panic in the runner into an error, so
// that an engine fault fails its request (and leaves its record) instead of
// the server.
func (p *pool) runSafe(ctx context.Context, in map[string]*tensor.Tensor) (outs map[string]*tensor.Tensor, err error) {
	defer func() {
		if r := recover(); r != nil {
			outs, err = nil, fmt.Errorf("server: the engine panicked (kernel panicked): %v\n%s", r, debug.Stack())
		}
	}()
	return p.r.Run(ctx, in)
}

// batchRows is dimension 0 shared by every input, or 0 when there is none.
func batchRows(in map[string]*tensor.Tensor) int {
	n := -1
	for _, t := range in {
		if len(t.Shape) == 0 || t.DType == tensor.String || t.DType == tensor.Sequence {
			return 0
		}
		if n >= 0 && t.Shape[0] != n {
			return 0
		}
		n = t.Shape[0]
	}
	return max(n, 0)
}

// stackable reports whether b's inputs can be stacked under a's: the same
// names, dtypes and dimensions after the first.
func stackable(a, b map[string]*tensor.Tensor) bool {
	if len(a) != len(b) {
		return false
	}
	for name, ta := range a {
		tb, ok := b[name]
		if !ok || ta.DType != tb.DType || len(ta.Shape) != len(tb.Shape) || !slices.Equal(ta.Shape[1:], tb.Shape[1:]) {
			return false
		}
	}
	return true
}

// stack concatenates the jobs' inputs along dimension 0.
func stack(batch []*job) map[string]*tensor.Tensor {
	out := map[string]*tensor.Tensor{}
	for name, t0 := range batch[0].inputs {
		rows := 0
		for _, j := range batch {
			rows += j.inputs[name].Shape[0]
		}
		shape := append([]int{rows}, t0.Shape[1:]...)
		data := tensor.MakeSlice(t0.DType, tensor.NumElems(shape))
		off := 0
		for _, j := range batch {
			off += copyAt(data, j.inputs[name].Data, off)
		}
		out[name] = &tensor.Tensor{DType: t0.DType, Shape: shape, Data: data}
	}
	return out
}

// unstack splits stacked outputs back into one map per job.
func unstack(outs map[string]*tensor.Tensor, batch []*job) ([]map[string]*tensor.Tensor, error) {
	total := 0
	for _, j := range batch {
		total += j.rows
	}
	parts := make([]map[string]*tensor.Tensor, len(batch))
	for i := range parts {
		parts[i] = map[string]*tensor.Tensor{}
	}
	for name, t := range outs {
		if len(t.Shape) == 0 || t.Shape[0] != total || t.DType == tensor.Sequence {
			return nil, fmt.Errorf("server: output %q of a stacked run has shape %s, not %d rows", name, tensor.ShapeString(t.Shape), total)
		}
		per := tensor.NumElems(t.Shape[1:])
		row := 0
		for i, j := range batch {
			shape := append([]int{j.rows}, t.Shape[1:]...)
			data := tensor.MakeSlice(t.DType, j.rows*per)
			copyFrom(data, t.Data, row*per)
			parts[i][name] = &tensor.Tensor{DType: t.DType, Shape: shape, Data: data}
			row += j.rows
		}
	}
	return parts, nil
}

// copyAt copies src into dst from element off and returns the count.
func copyAt(dst, src any, off int) int {
	switch d := dst.(type) {
	case []float32:
		return copy(d[off:], src.([]float32))
	case []float64:
		return copy(d[off:], src.([]float64))
	case []tensor.Half:
		return copy(d[off:], src.([]tensor.Half))
	case []tensor.BHalf:
		return copy(d[off:], src.([]tensor.BHalf))
	case []int8:
		return copy(d[off:], src.([]int8))
	case []int16:
		return copy(d[off:], src.([]int16))
	case []int32:
		return copy(d[off:], src.([]int32))
	case []int64:
		return copy(d[off:], src.([]int64))
	case []uint8:
		return copy(d[off:], src.([]uint8))
	case []uint16:
		return copy(d[off:], src.([]uint16))
	case []uint32:
		return copy(d[off:], src.([]uint32))
	case []uint64:
		return copy(d[off:], src.([]uint64))
	case []bool:
		return copy(d[off:], src.([]bool))
	}
	panic(fmt.Sprintf("server: cannot stack %T", dst))
}

// copyFrom fills dst from src starting at element off.
func copyFrom(dst, src any, off int) {
	switch d := dst.(type) {
	case []float32:
		copy(d, src.([]float32)[off:])
	case []float64:
		copy(d, src.([]float64)[off:])
	case []tensor.Half:
		copy(d, src.([]tensor.Half)[off:])
	case []tensor.BHalf:
		copy(d, src.([]tensor.BHalf)[off:])
	case []int8:
		copy(d, src.([]int8)[off:])
	case []int16:
		copy(d, src.([]int16)[off:])
	case []int32:
		copy(d, src.([]int32)[off:])
	case []int64:
		copy(d, src.([]int64)[off:])
	case []uint8:
		copy(d, src.([]uint8)[off:])
	case []uint16:
		copy(d, src.([]uint16)[off:])
	case []uint32:
		copy(d, src.([]uint32)[off:])
	case []uint64:
		copy(d, src.([]uint64)[off:])
	case []bool:
		copy(d, src.([]bool)[off:])
	case []string:
		copy(d, src.([]string)[off:])
	default:
		panic(fmt.Sprintf("server: cannot unstack %T", dst))
	}
}
