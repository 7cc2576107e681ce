//go:build !linux

package parallel

import "runtime"

// osYield yields to the Go scheduler only where sched_yield is not at hand.
func osYield() { runtime.Gosched() }
