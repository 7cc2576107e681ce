package parallel

import (
	"sync/atomic"
	"testing"
)

func TestRunCoversEveryItemOnce(t *testing.T) {
	for _, w := range []int{1, 2, 3, 8} {
		p := New(w)
		for _, n := range []int{0, 1, 2, 7, 100, 1001} {
			hits := make([]int32, n)
			p.Run(n, 1<<20, Func(func(lo, hi int) {
				for i := lo; i < hi; i++ {
					atomic.AddInt32(&hits[i], 1)
				}
			}))
			for i, h := range hits {
				if h != 1 {
					t.Fatalf("workers %d, n %d: item %d run %d times", w, n, i, h)
				}
			}
		}
		p.Close()
	}
	var nilPool *Pool
	sum := 0
	nilPool.Run(10, 1<<20, Func(func(lo, hi int) { sum += hi - lo }))
	if sum != 10 {
		t.Fatalf("nil pool ran %d items, want 10", sum)
	}
}

// TestRunNested: a task that calls Run on the same pool (a fused layer's
// rows running an operator that splits its own output) completes, every
// inner item run once, at any number of workers: a waiting caller runs
// queued ranges instead of waiting on ranges only it could run. (Before,
// every worker could wait in an inner Run for ranges no one took: the
// kernel/fused tests hung at 2 workers.)
func TestRunNested(t *testing.T) {
	for _, w := range []int{2, 3, 4} {
		p := New(w)
		const outer, inner = 16, 64
		hits := make([]int32, outer*inner)
		for rep := 0; rep < 50; rep++ {
			clear(hits)
			p.Run(outer, 1<<20, Func(func(lo, hi int) {
				for o := lo; o < hi; o++ {
					p.Run(inner, 1<<20, Func(func(a, b int) {
						for i := a; i < b; i++ {
							atomic.AddInt32(&hits[o*inner+i], 1)
						}
					}))
				}
			}))
			for i, h := range hits {
				if h != 1 {
					t.Fatalf("workers %d: item %d run %d times", w, i, h)
				}
			}
		}
		p.Close()
	}
}
