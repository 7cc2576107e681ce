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
