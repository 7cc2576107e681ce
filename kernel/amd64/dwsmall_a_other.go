//go:build !amd64

package amd64

// DwKA is dwsmall_a_amd64.go's (see there).
type DwKA struct {
	X, Y, W, B              uintptr
	Planes, XStep, YStep, N int
	Tab, TabEnd             uintptr
	Lo, Hi                  float32
	Mid                     uintptr
}

// DwFlatKA needs amd64 (Enabled is false elsewhere).
func DwFlatKA(p *DwKA) { panic("amd64: DwFlatKA called without AVX2") }
