package amd64

// GemvRows computes one row of a GEMM with B's columns contiguous,
// streaming B row by row: for j < n, y[j] is the chain over kk < k
// ascending from +0 of acc = FMA(x[kk*xs], b[kk*brs+j], acc). The chains
// are parked in y between blocks of four steps (storing a float32 is
// exact), so each block reads four rows of B from start to end. n&^7
// columns are full vectors; when mask is not nil the 8 lanes after them
// are read and written under it (mask[l] = -1 for the n&7 lanes past the
// last full vector, 0 otherwise), else n must be a multiple of 8. NaN
// results are left as the FMAs produce them: the caller canonicalises.
//
//go:noescape
func GemvRows(k int, x *float32, xs int, b *float32, brs int, y *float32, n int, mask *int32)

// MaxPoolK3S2 computes n >= 8 outputs of one row of a MaxPool with a
// kernel 3 columns wide at column stride 2, with maxPoolInto's rule:
// output i's window is columns 2i, 2i+1, 2i+2 of rows 0 .. rows-1 (rows
// >= 1, ldx floats apart, x pointing at row 0, column 0), its result the
// window's first tap (row 0, column 2i) when that is a NaN, else the
// first largest non-NaN tap in row-major order (each row reduced from
// -inf with v > best ? v : best, then the rows folded in order with the
// same rule). A last partial vector is computed overlapping the one
// before it. When edge is 1, y[-1] is computed too, for the window whose
// column -2 is padding (columns -1 and 0). Nothing outside the windows'
// taps is read.
//
//go:noescape
func MaxPoolK3S2(x *float32, ldx, rows int, y *float32, n int, edge int)

// DwRows9 computes rows x n outputs of a depthwise 3x3 convolution (or
// any nine-tap filter): output (r, j), r < rows, j < n (n >= 8), is the
// chain acc = FMA(x[off[t] + r*ldx + j], w[t], acc) over t = 0..8 in order
// from +0, then canon(acc) + *bias (0x7fc00000 for a NaN; pass -0 for no
// bias: v + -0 is v), then lo > v ? lo : v and hi < v ? hi : v (±inf for
// no clamp), stored at y[r*ldy + j]. Four vectors of 8 outputs are
// computed together; a last partial vector is computed overlapping the
// one before it (y must not alias x). Only the taps of the outputs are
// read.
//
//go:noescape
func DwRows9(x *float32, off *[9]int, ldx int, w, y *float32, ldy, rows, n int, bias *float32, lo, hi float32)

// DwMasks are the load and store masks of DwS1P1 and DwS2P1 (the field
// offsets are fixed: the assembly reads them). A lane's mask is -1 where
// its float lies inside the input row (0 <= column < width), else 0: a
// masked-off lane reads nothing and gives +0, the padding's value.
type DwMasks struct {
	// First and Last mask the vector of outputs 0..7 and n-8..n-1: at
	// stride 1, First[kx] masks tap column kx's loads (columns j-1+kx); at
	// stride 2, First[i] masks the loads of columns 2j-1.., 2j+7.., 2j..
	// and 2j+8.. (i = 0..3), j the vector's first output.
	First, Last [4][8]int32
	// Store masks lanes < n, for n < 8: the last row's store, when
	// MaskLast is not 0 (other rows store all 8 lanes, the lanes past n
	// falling on the next row, which is written after).
	Store    [8]int32
	MaskLast int
}

// DwS1P1 computes rows x n outputs of a depthwise 3x3 convolution at
// column stride 1 with one column of left padding, reading the input rows
// in place: output (r, j)'s tap (ky, kx) is rky[r*ldx + j-1+kx] (r0, r1,
// r2 the rows of taps ky = 0, 1, 2 of output row 0; a row of zeros for a
// padding row), +0 where the column is outside the row (the masks). Its
// value is the chain acc = FMA(tap, w[3ky+kx], acc) over the nine taps in
// row-major order from +0, then canon(acc) + *bias (-0 for none), then lo
// > v ? lo : v and hi < v ? hi : v, stored at y[r*ldy + j]. The vectors
// of outputs 0..7 and n-8..n-1 load under m.First and m.Last, the ones
// between, starting at 8, 16, ... up to mid (four at a time), plainly:
// their taps must lie inside the rows, and together with the last vector
// they must cover every output (mid >= n-16). n < 8: see DwMasks.Store.
//
//go:noescape
func DwS1P1(r0, r1, r2 *float32, ldx, rows int, w, y *float32, ldy, n, mid int, m *DwMasks, bias *float32, lo, hi float32)

// DwS2P1 is DwS1P1 at column stride 2: tap (ky, kx) of output (r, j) is
// rky[r*ldx + 2j-1+kx]. The taps are deinterleaved with VSHUFPS alone,
// the lanes put in order by one VPERMPD per vector; the arithmetic is
// DwS1P1's.
//
//go:noescape
func DwS2P1(r0, r1, r2 *float32, ldx, rows int, w, y *float32, ldy, n, mid int, m *DwMasks, bias *float32, lo, hi float32)

// DwSeg is a run of output rows of DwPlanes (offsets fixed: the assembly
// reads them): rows OY .. OY+Rows-1, whose taps ky = 0, 1, 2 of row OY are
// the plane's input rows starting at float offsets Off[ky] (-1: a padding
// row, read from Zero), each advanced by LDX floats per output row;
// MaskLast as in DwMasks.
type DwSeg struct {
	Off                [3]int
	OY, Rows, MaskLast int
}

// The X, Y, W and Bias fields of DwPlanes, DwFlat and DwFlatS2 are
// addresses (uintptr), not pointers: the assembly advances them past the
// last plane, which a Go pointer must never be (the garbage collector
// would take it for a pointer into whatever lies there). The caller keeps
// the arrays alive.
//
// DwPlanes describes Planes depthwise planes for DwS1P1Planes and
// DwS2P1Planes (offsets fixed: the assembly reads them, and advances X,
// Y, W and Bias and counts Planes down as it goes). Plane i reads its
// input at X + i*XStep, its nine weights at W + 9i and its bias at Bias +
// i*BStep, and writes its outputs at Y + i*YStep, in the rows of Segs[:NSeg]
// in order.
type DwPlanes struct {
	X        uintptr  // 0
	XStep    int      // 8
	Y        uintptr  // 16
	YStep    int      // 24
	W        uintptr  // 32
	Bias     uintptr  // 40
	BStep    int      // 48
	Planes   int      // 56
	Zero     *float32 // 64: a row of zeros, readable 16 floats either side of the input rows' reads
	LDX, LDY int      // 72, 80
	N, Mid   int      // 88, 96
	M        *DwMasks // 104
	Lo, Hi   float32  // 112, 116
	NSeg     int      // 120
	Segs     [6]DwSeg // 128
}

// DwS1P1Planes runs DwS1P1 over p's planes and segments in one call: the
// same chains, epilogue and stores.
//
//go:noescape
func DwS1P1Planes(p *DwPlanes)

// DwS2P1Planes runs DwS2P1 over p's planes and segments in one call.
//
//go:noescape
func DwS2P1Planes(p *DwPlanes)

// DwFlat describes Planes depthwise 3x3 planes for DwS1P1FlatZ (offsets
// fixed: the assembly reads them, and advances W and Bias and counts
// Planes down as it goes).
type DwFlat struct {
	X      uintptr // 0: plane 0's input
	Y      uintptr // 8: plane 0's output
	W      uintptr // 16: plane 0's nine weights, the next plane's 9 floats on
	Bias   uintptr // 24
	BStep  int     // 32: floats from one plane's bias to the next's
	Planes int     // 40
	Step   int     // 48: floats from one plane to the next (input and output)
	LD     int     // 56: the row length
	NV     int     // 64: vectors of 16 outputs per plane, at most len(Masks)
	Lo, Hi float32 // 72, 76
	// Masks[v][t] (t < 9) masks tap t's load of vector v (outputs 16v ..
	// 16v+15 of the plane): bit l is set where output 16v+l is in the plane
	// and its tap lies inside the input; Masks[v][9] masks the store (bit l
	// set where output 16v+l is in the plane).
	Masks [16][10]uint16 // 80
}

// DwS1P1FlatZ (AVX-512, where EnabledZ) computes p.Planes planes of a
// depthwise 3x3 convolution at stride 1 with one row and column of padding
// on every side (output plane = input plane, LD wide), each plane as a
// flat run of outputs 16 at a time: output o's tap (ky, kx) is x[o +
// (ky-1)*LD + kx-1] where it lies inside the input, else +0 (a zero-masked
// load). Its value is the chain acc = FMA(tap, w[3ky+kx], acc) over the
// nine taps in row-major order from +0, then canon(acc) + *bias, then lo
// > v ? lo : v and hi < v ? hi : v: DwS1P1's chain and epilogue. Only the
// masked lanes are read and written.
//
//go:noescape
func DwS1P1FlatZ(p *DwFlat)

// DwFlatS2 describes Planes depthwise 3x3 planes for DwS2P1FlatZ (offsets
// fixed: the assembly reads them, and advances X, Y, W and Bias and counts
// Planes down as it goes).
type DwFlatS2 struct {
	X      uintptr // 0: plane 0's input
	Y      uintptr // 8: plane 0's output
	W      uintptr // 16: plane 0's nine weights, the next plane's 9 floats on
	Bias   uintptr // 24
	BStep  int     // 32: floats from one plane's bias to the next's
	Planes int     // 40
	XStep  int     // 48: floats from one input plane to the next
	YStep  int     // 56: floats from one output plane to the next
	LD     int     // 64: the input row's length
	NV     int     // 72: vectors (pairs of output rows) per plane, at most len(Masks)
	OW2    int     // 80: floats of output per vector (two output rows)
	Lo, Hi float32 // 88, 92
	// Idx[kx][l] is the lane that tap column kx of output lane l is picked
	// from: 0..15 a lane of the vector's first output row's tap row, 16..31
	// of its second's (lane i holding input column i-1).
	Idx [3][16]int32 // 96
	// Masks[v][k] (k < 5) masks the load of input row 4v-1+k, columns -1
	// .. 14, for vector v (output rows 2v, 2v+1): bit i set where column
	// i-1 and the row lie inside the input; Masks[v][5] masks the store
	// (bit l set where output lane l is in the plane).
	Masks [8][6]uint16 // 288
}

// DwS2P1FlatZ (AVX-512, where EnabledZ) computes p.Planes planes of a
// depthwise 3x3 convolution at stride 2 with one row and column of
// leading padding, input rows of at most 15 floats (LD) and output rows
// of at most 7 (OW2/2), two output rows per vector of 16 lanes: output
// (oy, ox)'s tap (ky, kx) is the input at row 2oy-1+ky, column 2ox-1+kx
// where that lies inside the input, else +0 (a zero-masked load). Its
// value is the chain acc = FMA(tap, w[3ky+kx], acc) over the nine taps in
// row-major order from +0, then canon(acc) + *bias, then lo > v ? lo : v
// and hi < v ? hi : v: DwS2P1's chain and epilogue. Only the masked lanes
// are read and written.
//
//go:noescape
func DwS2P1FlatZ(p *DwFlatS2)

// DwMasksZ are DwS2P1Z's masks (offsets fixed: the assembly reads them):
// NV vectors of 16 outputs per row, and for vector v (outputs 16v ..
// 16v+15) Masks[v][i] masks its loads of columns 32v-1.., 32v+15..,
// 32v.., 32v+16.. (i = 0..3; bit l set where column start+l lies inside
// the input row) and Masks[v][4] its store (bit l set where output 16v+l
// is in the row).
type DwMasksZ struct {
	NV    int           // 0
	Masks [16][5]uint16 // 8
}

// DwS2P1Z (AVX-512, where EnabledZ) is DwS2P1 with 16 outputs per
// vector, every load and store under m's masks: rows x (16 m.NV, the
// stores masked) outputs, output (r, j)'s tap (ky, kx) rky[r*ldx +
// 2j-1+kx] where that lies inside the row, else +0. Its value is the chain
// acc = FMA(tap, w[3ky+kx], acc) over the nine taps in row-major order
// from +0, then canon(acc) + *bias (-0 for none), then lo > v ? lo : v and
// hi < v ? hi : v, stored at y[r*ldy + j]: DwS2P1's chain and epilogue.
// Only the masked lanes are read and written; the rows are computed a
// vector's column at a time (y must not alias the input).
//
//go:noescape
func DwS2P1Z(r0, r1, r2 *float32, ldx, rows int, w, y *float32, ldy int, m *DwMasksZ, bias *float32, lo, hi float32)

// DwS2P1PlanesZ (AVX-512, where EnabledZ) runs DwS2P1Z over p's planes and
// segments in one call (p.M, p.N and p.Mid unused; m the rows' masks):
// the same chains, epilogue and stores.
//
//go:noescape
func DwS2P1PlanesZ(p *DwPlanes, m *DwMasksZ)

// SumTapsZ (AVX-512F, where EnabledZ) sets y[i], i < n (n a multiple of
// 16), to the sum acc = acc + x[offs[t]+i] over t < taps (at least one)
// ascending from +0, each addition VADDPS with acc its first source: a NaN
// acc keeps its payload, quieted, as vmath.Add32(acc, x) does. Package nn's
// unit-stride AveragePool sums its windows so, over flat zero-padded
// planes, one offset per tap.
//
//go:noescape
func SumTapsZ(n, taps int, offs *int32, x *float32, y *float32)
