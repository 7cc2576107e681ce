//go:build linux

package nn

import (
	"runtime"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// threadCPU returns this OS thread's CPU time in nanoseconds.
func threadCPU() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return ts.Nano()
}

// cpuLoop runs f as b's loop on one locked OS thread and reports the
// median of its calls' thread CPU times as cpu-ns/op: on a loaded machine
// (the shared VM) wall time also counts the time other processes run, CPU
// time does not. f must run on the caller (a one-worker pool does).
func cpuLoop(b *testing.B, f func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var ts []int64
	for b.Loop() {
		t0 := threadCPU()
		f()
		ts = append(ts, threadCPU()-t0)
	}
	slices.Sort(ts)
	if len(ts) > 0 {
		b.ReportMetric(float64(ts[len(ts)/2]), "cpu-ns/op")
	}
}
