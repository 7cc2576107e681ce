package amd64

// MaxTaps describes Planes float32 MaxPool planes for MaxTaps8 (offsets
// fixed: the assembly reads them; it changes none). Each plane's outputs
// are a flat run, 8 to a vector. Tab points at NV records of Rec bytes
// (a multiple of 8), one per vector: the lanes' window offsets int32 x8
// (floats from the plane's start: output o's tap t is the input element
// at Idx[l] + Offs[t] where that tap lies inside the input); an int32,
// not 0 when the offsets are consecutive (Idx[l] = Idx[0] + l: one load
// per tap, else a gather); 4 bytes unused; then per tap t two lane masks,
// uint8: the lanes whose tap t lies inside the input and those for which
// it is the first such tap; then the store's lanes (the outputs inside
// the plane). A lane mask m selects the lanes of Lanes[m] (LaneMasks8).
type MaxTaps struct {
	X      uintptr // 0: plane 0's input
	Y      uintptr // 8: plane 0's output
	Planes int     // 16
	XStep  int     // 24: floats from one input plane to the next
	YStep  int     // 32: floats from one output plane to the next
	NV     int     // 40: vectors of 8 outputs per plane
	Taps   int     // 48: taps per window (at least one)
	Offs   uintptr // 56: Taps int32 offsets, in the window's row-major order
	Tab    uintptr // 64: the vectors' records
	Rec    int     // 72: bytes per record
	Lanes  uintptr // 80: LaneMasks8
}

// MaxTaps8 (AVX2, where Enabled) computes p.Planes MaxPool planes with
// MaxFlatZ's rule: each output starts at -inf, takes its first tap inside
// the input as it is (a NaN included), and then each later tap inside the
// input v with VMAXPS, best = v > best ? v : best, in the window's order
// (package nn's maxPoolInto's bits). Only the masked lanes are read
// (VMASKMOVPS, VGATHERDPS) and written; four planes share each record.
//
//go:noescape
func MaxTaps8(p *MaxTaps)
