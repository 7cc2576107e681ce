//go:build !amd64

package amd64

// GemmZArgs is gemmz_amd64.go's (see there).
type GemmZArgs struct {
	K     int
	A     *float32
	LDA   int
	B     *float32
	LDB   int
	BOff  int
	C     *float32
	LDC   int
	Load  int
	Bias  *float32
	R     *float32
	LDR   int
	R2    *float32
	LDR2  int
	Lo    float32
	Hi    float32
	Mask  uint32
	Clamp bool
	PF    *float32
}

// GemmZMax16 and GemmZMax32 are gemmz_amd64.go's.
const (
	GemmZMax16 = 16
	GemmZMax32 = 14
)

// GemmZ16 is not available off amd64 (EnabledZ is false).
func GemmZ16(mr int, p *GemmZArgs) { panic("amd64: not available") }

// GemmZ32 is not available off amd64 (EnabledZ is false).
func GemmZ32(mr int, p *GemmZArgs) { panic("amd64: not available") }
