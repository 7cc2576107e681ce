//go:build !amd64

package amd64

// MaxTaps is pool8_amd64.go's (see there).
type MaxTaps struct {
	X, Y                           uintptr
	Planes, XStep, YStep, NV, Taps int
	Offs, Tab                      uintptr
	Rec                            int
	Lanes                          uintptr
}

func MaxTaps8(p *MaxTaps) { panic("amd64: not available") }
