package server

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/vouchml/vouch/tensor"
)

// Dynamic batching must not change a single bit: every request served in a
// stacked run gets exactly the output of running it alone.
func TestBatchingBitIdentical(t *testing.T) {
	for _, tc := range []struct {
		model string
		input string
		row   []int
	}{
		{"breast_cancer_mlp", "features", []int{30}},
		{"digits_cnn", "image", []int{1, 8, 8}},
	} {
		t.Run(tc.model, func(t *testing.T) {
			r := modelRunner(t, tc.model, PlanOptions{})
			rng := rand.New(rand.NewPCG(1, 2))
			const n = 48
			reqs := make([]map[string]*tensor.Tensor, n)
			want := make([][]uint32, n)
			for i := range reqs {
				rows := 1 + rng.IntN(3)
				shape := append([]int{rows}, tc.row...)
				x := make([]float32, tensor.NumElems(shape))
				for j := range x {
					x[j] = float32(rng.NormFloat64() * 3)
				}
				reqs[i] = map[string]*tensor.Tensor{tc.input: tensor.From(x, shape...)}
				outs, err := r.Run(context.Background(), reqs[i])
				if err != nil {
					t.Fatal(err)
				}
				want[i] = bits(outs)
			}
			var mu sync.Mutex
			maxRows := 0
			p := newPool(r, PoolOptions{Workers: 2, Queue: n, MaxBatch: 16, MaxDelay: 20 * time.Millisecond}, func(rows int) {
				mu.Lock()
				maxRows = max(maxRows, rows)
				mu.Unlock()
			})
			defer p.close()
			var wg sync.WaitGroup
			for i := range reqs {
				wg.Go(func() {
					res := p.submit(context.Background(), reqs[i])
					if res.err != nil {
						t.Error(res.err)
						return
					}
					got := bits(res.outs)
					if len(got) != len(want[i]) {
						t.Errorf("request %d: %d output values, want %d", i, len(got), len(want[i]))
						return
					}
					for j := range got {
						if got[j] != want[i][j] {
							t.Errorf("request %d (batch of %d rows): value %d is %08x, alone %08x", i, res.batch, j, got[j], want[i][j])
							return
						}
					}
				})
			}
			wg.Wait()
			if maxRows < 2 {
				t.Errorf("no request was batched (largest run %d rows)", maxRows)
			}
			t.Logf("largest stacked run: %d rows", maxRows)
		})
	}
}

func bits(outs map[string]*tensor.Tensor) []uint32 {
	var b []uint32
	for _, t := range outs {
		for _, v := range t.Data.([]float32) {
			b = append(b, math.Float32bits(v))
		}
	}
	return b
}

func TestPoolQueueFullAndDrain(t *testing.T) {
	r := &slowRunner{release: make(chan struct{}), started: make(chan struct{}, 1)}
	p := newPool(r, PoolOptions{Workers: 1, Queue: 2}, nil)
	in := map[string]*tensor.Tensor{"x": tensor.From([]float32{1, 2}, 1, 2)}
	results := make(chan jobResult, 3)
	go func() { results <- p.submit(context.Background(), in) }()
	<-r.started // one running
	go func() { results <- p.submit(context.Background(), in) }()
	go func() { results <- p.submit(context.Background(), in) }()
	deadline := time.Now().Add(5 * time.Second)
	for p.depth() < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if res := p.submit(context.Background(), in); res.err != ErrQueueFull {
		t.Fatalf("fourth request: %v, want ErrQueueFull", res.err)
	}
	closed := make(chan struct{})
	go func() { p.close(); close(closed) }()
	time.Sleep(10 * time.Millisecond)
	if res := p.submit(context.Background(), in); res.err != ErrClosed && res.err != ErrQueueFull {
		t.Fatalf("request after close: %v", res.err)
	}
	close(r.release)
	<-closed
	for range 3 {
		if res := <-results; res.err != nil || res.outs["y"].Data.([]float32)[1] != 4 {
			t.Fatalf("queued request not drained: %+v", res)
		}
	}
}
