//go:build !amd64

package amd64

// MaxFlat is pool_amd64.go's (see there).
type MaxFlat struct {
	X, Y                           uintptr
	Planes, XStep, YStep, NV, Taps int
	Offs, Masks                    uintptr
}

func MaxFlatZ(p *MaxFlat) { panic("amd64: not available") }

// MaxRows is pool_amd64.go's (see there).
type MaxRows struct {
	X, Y                     uintptr
	Planes, XStep, YStep, KH int
	Tab, TabEnd, Idx, IdxEnd uintptr
}

func MaxRowsZ(p *MaxRows) { panic("amd64: not available") }

// DwK is pool_amd64.go's (see there).
type DwK struct {
	X, Y, W, B               uintptr
	Planes, XStep, YStep, N  int
	Tab, TabEnd, Idx, IdxEnd uintptr
	Lo, Hi                   float32
	WPlane                   int
}

func DwFlatKZ(p *DwK) { panic("amd64: not available") }

func DwRowsKZ(p *DwK) { panic("amd64: not available") }
