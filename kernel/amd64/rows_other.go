//go:build !amd64

package amd64

func GemvRows(k int, x *float32, xs int, b *float32, brs int, y *float32, n int, mask *int32) {
	panic("amd64: not available")
}

func MaxPoolK3S2(x *float32, ldx, rows int, y *float32, n int, edge int) {
	panic("amd64: not available")
}

func DwRows9(x *float32, off *[9]int, ldx int, w, y *float32, ldy, rows, n int, bias *float32, lo, hi float32) {
	panic("amd64: not available")
}

// DwMasks is rows_amd64.go's (see there).
type DwMasks struct {
	First, Last [4][8]int32
	Store       [8]int32
	MaskLast    int
}

func DwS1P1(r0, r1, r2 *float32, ldx, rows int, w, y *float32, ldy, n, mid int, m *DwMasks, bias *float32, lo, hi float32) {
	panic("amd64: not available")
}

func DwS2P1(r0, r1, r2 *float32, ldx, rows int, w, y *float32, ldy, n, mid int, m *DwMasks, bias *float32, lo, hi float32) {
	panic("amd64: not available")
}

// DwSeg is rows_amd64.go's (see there).
type DwSeg struct {
	Off                [3]int
	OY, Rows, MaskLast int
}

// DwPlanes is rows_amd64.go's (see there).
type DwPlanes struct {
	X        uintptr
	XStep    int
	Y        uintptr
	YStep    int
	W        uintptr
	Bias     uintptr
	BStep    int
	Planes   int
	Zero     *float32
	LDX, LDY int
	N, Mid   int
	M        *DwMasks
	Lo, Hi   float32
	NSeg     int
	Segs     [6]DwSeg
}

func DwS1P1Planes(p *DwPlanes) { panic("amd64: not available") }

func DwS2P1Planes(p *DwPlanes) { panic("amd64: not available") }

// DwFlat is rows_amd64.go's (see there).
type DwFlat struct {
	X      uintptr
	Y      uintptr
	W      uintptr
	Bias   uintptr
	BStep  int
	Planes int
	Step   int
	LD     int
	NV     int
	Lo, Hi float32
	Masks  [16][10]uint16
}

func DwS1P1FlatZ(p *DwFlat) { panic("amd64: not available") }

// DwFlatS2 is rows_amd64.go's (see there).
type DwFlatS2 struct {
	X      uintptr
	Y      uintptr
	W      uintptr
	Bias   uintptr
	BStep  int
	Planes int
	XStep  int
	YStep  int
	LD     int
	NV     int
	OW2    int
	Lo, Hi float32
	Idx    [3][16]int32
	Masks  [8][6]uint16
}

func DwS2P1FlatZ(p *DwFlatS2) { panic("amd64: not available") }

// DwMasksZ is rows_amd64.go's (see there).
type DwMasksZ struct {
	NV    int
	Masks [16][5]uint16
}

func DwS2P1Z(r0, r1, r2 *float32, ldx, rows int, w, y *float32, ldy int, m *DwMasksZ, bias *float32, lo, hi float32) {
	panic("amd64: not available")
}

func DwS2P1PlanesZ(p *DwPlanes, m *DwMasksZ) { panic("amd64: not available") }

func SumTapsZ(n, taps int, offs *int32, x *float32, y *float32) {
	panic("amd64: not available")
}
