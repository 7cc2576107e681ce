//go:build !amd64

package vecasm

// Enabled is false off amd64: vmath uses its scalar functions.
const Enabled = false

func Exp(dst, src *float32, n int, tab *[NumConsts][8]float32)      { panic("vecasm: not available") }
func Sigmoid(dst, src *float32, n int, tab *[NumConsts][8]float32)  { panic("vecasm: not available") }
func Tanh(dst, src *float32, n int, tab *[NumConsts][8]float32)     { panic("vecasm: not available") }
func Erf(dst, src *float32, n int, tab *[NumConsts][8]float32)      { panic("vecasm: not available") }
func GeluErf(dst, src *float32, n int, tab *[NumConsts][8]float32)  { panic("vecasm: not available") }
func GeluTanh(dst, src *float32, n int, tab *[NumConsts][8]float32) { panic("vecasm: not available") }

func MaxNaN(x *float32, n int) (max float32, nan bool) { panic("vecasm: not available") }
func DivBy(dst, src *float32, n int, s float32)        { panic("vecasm: not available") }

func SumRows8(x *float32, D, n int, sum *[8]float32)       { panic("vecasm: not available") }
func SqDevRows8(x *float32, D, n int, mean, q *[8]float32) { panic("vecasm: not available") }
func NormAffine(y, x *float32, n int, m, iv float32, sc, bs *float32) {
	panic("vecasm: not available")
}

func AddVV(dst, x, y *float32, n int) { panic("vecasm: not available") }

// Enabled512 is false off amd64.
const Enabled512 = false

func GeluErf16(dst, src *float32, n int, tab *[NumConsts][8]float32) { panic("vecasm: not available") }

func SubBy(dst, src *float32, n int, s float32) { panic("vecasm: not available") }
