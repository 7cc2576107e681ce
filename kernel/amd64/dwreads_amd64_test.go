//go:build linux

package amd64

import (
	"math"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// guarded returns n floats (n <= 1024) that end where a page that may not
// be read begins, and a func to unmap them: a kernel that reads past them
// faults.
func guarded(t *testing.T, n int) ([]float32, func()) {
	ps := unix.Getpagesize()
	m, err := unix.Mmap(-1, 0, 2*ps, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Skip("mmap:", err)
	}
	if err := unix.Mprotect(m[ps:], unix.PROT_NONE); err != nil {
		t.Skip("mprotect:", err)
	}
	f := unsafe.Slice((*float32)(unsafe.Pointer(&m[0])), ps/4)
	return f[ps/4-n:], func() { unix.Munmap(m) }
}

// TestDwReadsA: Deint2A, CopyRowsA and DwStoreA read nothing past the
// last row's n (cols) floats: the row ends where an unreadable page
// begins, for every length of 1 to 40.
func TestDwReadsA(t *testing.T) {
	if !Enabled {
		t.Skip("no AVX2")
	}
	for n := 1; n <= 40; n++ {
		src, free := guarded(t, 2*48+n)
		for i := range src {
			src[i] = float32(i)
		}
		dst := make([]float32, 3*48+32)
		ev, od := make([]float32, 3*48), make([]float32, 3*48)
		// Three rows 48 floats apart, the last ending at the page.
		Deint2A(&src[0], n, 3, 48, &ev[0], (n+1)/2, &od[0], n/2, 48)
		CopyRowsA(&src[0], n, 3, 48, &dst[0], 48)
		DwStoreA(&src[0], 48, &dst[0], n, 3, n, 0, float32(math.Inf(-1)), float32(math.Inf(1)))
		for i := 0; i < (n+1)/2; i++ {
			if ev[2*48+i] != src[2*48+2*i] {
				t.Fatalf("n %d: ev[%d]", n, i)
			}
		}
		free()
	}
}
