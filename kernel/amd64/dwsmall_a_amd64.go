package amd64

// DwKA describes Planes planes of a float32 depthwise convolution for
// DwFlatKA (offsets fixed: the assembly reads them and advances W and B
// as it goes). Each plane's outputs are a flat run, 8 to a vector; Tab
// holds per vector, in any order, a header {the store's lanes [8]int8 (-1
// in, 0 out), the vector's first output in bytes int32, its store int32:
// 1 whole, 2 whole where another plane of the call follows (the lanes
// past the plane land in the next plane, whose own stores come later:
// tail vectors first), 0 masked}, then N records {the lanes whose tap
// lies inside the input [8]int8, the tap's offset int32 (floats, from the
// vector's first output), 4 bytes unused}.
type DwKA struct {
	X      uintptr // 0: plane 0's input
	Y      uintptr // 8: plane 0's output
	W      uintptr // 16: the weights: per group of four planes [tap][4], then per plane left [tap]
	B      uintptr // 24: one bias per plane (-0 for none)
	Planes int     // 32
	XStep  int     // 40: floats from one input plane to the next
	YStep  int     // 48: floats from one output plane to the next
	N      int     // 56: taps
	Tab    uintptr // 64: the vectors' records
	TabEnd uintptr // 72: past the last
	Lo, Hi float32 // 80, 84: the clamp
	Mid    uintptr // 88: past the steps of two vectors
}

// DwFlatKA (AVX2+FMA, where Enabled) is DwFlatKZ for CPUs without
// AVX-512: each output the chain acc = FMA(tap, w[t], acc) over the taps
// in row-major order from +0, a tap outside the input read as +0 (a
// VMASKMOVPS load), then canon(acc) + bias, then lo > v ? lo : v and hi <
// v ? hi : v: the same operations in the same order, so DwFlatKZ's bits.
// Four planes share each mask. Nothing outside the Planes planes of
// YStep floats is written.
//
//go:noescape
func DwFlatKA(p *DwKA)
