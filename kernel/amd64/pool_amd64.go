package amd64

// MaxFlat describes Planes float32 MaxPool planes for MaxFlatZ (offsets
// fixed: the assembly reads them; it changes none). Each plane's outputs
// are a flat run, 16 to a vector: output o = 16v+l of vector v reads, for
// tap t, the input element at o + Offs[t] of its plane where that tap lies
// inside the input (unit strides, output rows as long as the input's).
type MaxFlat struct {
	X      uintptr // 0: plane 0's input
	Y      uintptr // 8: plane 0's output
	Planes int     // 16
	XStep  int     // 24: floats from one input plane to the next
	YStep  int     // 32: floats from one output plane to the next
	NV     int     // 40: vectors of 16 outputs per plane
	Taps   int     // 48: taps per window (at least one)
	Offs   uintptr // 56: Taps int32 offsets, in the window's row-major order
	// Masks (64) points at NV runs of 2*Taps+1 uint16: for each tap t the
	// lanes whose tap t lies inside the input and those for which it is
	// the first such tap; then the store's lanes (the outputs inside the
	// plane).
	Masks uintptr
}

// MaxFlatZ (AVX-512F, where EnabledZ) computes p.Planes MaxPool planes:
// each output starts at -inf, takes its first tap inside the input as it
// is (a NaN included), and then each later tap inside the input v with
// VMAXPS, best = v > best ? v : best, in the window's order: package nn's
// maxPoolInto's rule (a NaN first tap is kept, later NaNs never replace,
// the first of equal maxima wins; -inf where no tap is inside). Only the
// masked lanes are read and written; four planes share each mask.
//
//go:noescape
func MaxFlatZ(p *MaxFlat)

// MaxRows describes Planes float32 MaxPool planes for MaxRowsZ (offsets
// fixed; the assembly changes none). Each vector holds the outputs of
// one output row, or of two short ones, its lanes' taps of kernel row ky
// taken from two sources of 16 floats (two input rows, or the two halves
// of one) by VPERMI2PS with one index vector per kernel column. Tab
// points at, per vector: KH records of {lo, hi int32: the sources' offsets
// in floats from the plane; their load masks uint16 x2 (the columns inside
// the input; zero for a row outside it); per kernel column the lanes whose
// tap lies inside the input and those for which it is the first such tap,
// uint16 x2}, then {the store's lanes uint16, 2 bytes unused, the vector's
// first output int32}.
type MaxRows struct {
	X      uintptr // 0: plane 0's input
	Y      uintptr // 8: plane 0's output
	Planes int     // 16
	XStep  int     // 24: floats from one input plane to the next
	YStep  int     // 32: floats from one output plane to the next
	KH     int     // 40: kernel rows (at least one)
	Tab    uintptr // 48: the vectors' records
	TabEnd uintptr // 56: past the last
	Idx    uintptr // 64: per kernel column 16 int32 VPERMI2PS indices (0-31)
	IdxEnd uintptr // 72: past the last kernel column's
}

// MaxRowsZ (AVX-512F, where EnabledZ) computes p.Planes MaxPool planes
// with MaxFlatZ's rule (each output from -inf, its first tap inside the
// input as it is, each later one by VMAXPS, best = v > best ? v : best, in
// the window's row-major order), each vector's taps gathered from two
// masked row loads by VPERMI2PS (any strides). Only the masked lanes are
// read and written; four planes share each table.
//
//go:noescape
func MaxRowsZ(p *MaxRows)

// DwK describes Planes planes of a float32 depthwise convolution for
// DwFlatKZ and DwRowsKZ (offsets fixed: the assembly reads them and
// advances W and B as it goes). Each plane's outputs are a flat run, 16 to
// a vector, as MaxFlat's (DwFlatKZ) and MaxRows's (DwRowsKZ) are, and the
// tables are theirs without the first-tap masks: DwFlatKZ's Tab holds per
// vector N records {the lanes whose tap lies inside the input uint16, 2
// bytes unused, the tap's offset int32 (floats, from output 16v)}, then
// {the store's lanes uint16, 6 bytes unused}; DwRowsKZ's per vector and
// kernel row {lo, hi int32; their load masks uint16 x2; per kernel column
// {the lanes whose tap lies inside the input uint16, 2 bytes unused}},
// then {the store's lanes uint16, 2 bytes unused, the vector's first
// output int32}.
type DwK struct {
	X      uintptr // 0: plane 0's input
	Y      uintptr // 8: plane 0's output
	W      uintptr // 16: the weights: per group of four planes [tap][4], then per plane left [tap]
	B      uintptr // 24: one bias per plane (-0 for none)
	Planes int     // 32
	XStep  int     // 40: floats from one input plane to the next
	YStep  int     // 48: floats from one output plane to the next
	N      int     // 56: DwFlatKZ: taps; DwRowsKZ: kernel rows
	Tab    uintptr // 64: the vectors' records
	TabEnd uintptr // 72: past the last
	Idx    uintptr // 80: DwRowsKZ: per kernel column 16 int32 VPERMI2PS indices (0-31)
	IdxEnd uintptr // 88
	Lo, Hi float32 // 96, 100: the clamp
	WPlane int     // 104: bytes of one plane's weights (4 x taps)
}

// DwFlatKZ (AVX-512F, where EnabledZ) computes p.Planes planes of a
// depthwise convolution of unit strides whose output rows are as long as
// the input's: each output the chain acc = FMA(tap, w[t], acc) over the
// taps in row-major order from +0, a tap outside the input read as +0 (a
// zero-masked load), then canon(acc) + bias, then lo > v ? lo : v and hi <
// v ? hi : v: package nn's depthwiseInto chain and convF32's bias and
// clamp, as DwS1P1FlatZ computes them for 3x3. Four planes share each
// mask.
//
//go:noescape
func DwFlatKZ(p *DwK)

// DwRowsKZ is DwFlatKZ for any strides, each vector's taps taken from two
// masked row loads by VPERMI2PS (zeroing the lanes outside the input), as
// MaxRowsZ's are.
//
//go:noescape
func DwRowsKZ(p *DwK)
