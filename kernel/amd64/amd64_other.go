//go:build !amd64

package amd64

// Enabled is false off amd64: callers use the portable kernels.
const Enabled = false

// Store is amd64_amd64.go's (see there).
type Store struct {
	Bias   *float32
	R      *float32
	LDR    int
	Lo, Hi float32
	Clamp  bool
}

func Sgemm6x16(k int, a, b, c *float32, ldc int, load int, st *Store) {
	panic("amd64: not available")
}

func FMALoop(n int) { panic("amd64: not available") }

func MaxRowS1(x *float32, kw int, y *float32, n int) { panic("amd64: not available") }

func MaxRowS2(x *float32, kw int, y *float32, n int) { panic("amd64: not available") }

func MaxInto(dst, src *float32, n int) { panic("amd64: not available") }

func NaNFirstS1(x, y *float32, n int) { panic("amd64: not available") }

func NaNFirstS2(x, y *float32, n int) { panic("amd64: not available") }

func GemvG16(k int, x *float32, xs int, b *float32, brs int, idx, mask *int32, y *float32) {
	panic("amd64: not available")
}

func GemvC16(k int, x *float32, xs int, b *float32, brs int, mask *int32, y *float32) {
	panic("amd64: not available")
}

func Sgemm6x16R(k int, rows *[6]*float32, b, c *float32, ldc int, load int, st *Store) {
	panic("amd64: not available")
}

func Copy16s(dst *float32, stride int, src *float32, n int) { panic("amd64: not available") }

func Sgemm6x16RB(k int, rows *[6]*float32, b *float32, ldb int, c *float32, ldc int, load int, st *Store) {
	panic("amd64: not available")
}

func Even(dst, src *float32, n int) { panic("amd64: not available") }

func Sgemm6x8R(k int, rows *[6]*float32, b, c *float32, ldc int, load int, bias *float32) {
	panic("amd64: not available")
}

func Epi(y *float32, ldy int, r *float32, ldr int, rows, cols int, lo, hi float32) {
	panic("amd64: not available")
}

func Conv6x16(k int, px *[6]*float32, offs *int32, w *float32, bias *float32, out *float32, ldo int, flags int) {
	panic("amd64: not available")
}

// Conv6x16's flags (see the amd64 declaration).
const (
	DirLoad  = 1
	DirFinal = 2
)

// EnabledZ is false off amd64.
const EnabledZ = false

// ConvZShapes is empty off amd64.
var ConvZShapes [][4]int

func ConvZ(R, T, C, S, k int, base *[2]*float32, offs *int32, w *float32, bias *float32, out *float32, clamp *[2]float32, pf *float32) bool {
	return false
}

func TransposeZ16(src *float32, lds, n int, dst *float32, ldd, rows int) {
	panic("amd64: not available")
}

func TransposeZ16E(src *float32, lds, n int, dst *float32, ldd, rows int, r *float32, clamp *[2]float32) {
	panic("amd64: not available")
}

// StoreZB is not available off amd64 (EnabledZ is false).
func StoreZB(src *float32, lds, n int, dst *float32, bs, blocks int, res *float32, clamp *[2]float32) {
	panic("amd64: not available")
}

// GemvPanel64 is not available off amd64 (Enabled is false).
func GemvPanel64(k int, x *float32, xs int, p *float32, y *float32) {
	panic("amd64: not available")
}

// Features is empty off amd64: only the portable kernels run.
func Features() []string { return nil }
