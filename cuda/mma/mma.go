// Package mma emulates, on the CPU and bit for bit, the arithmetic of the
// tensor-core matrix multiply-accumulate instructions that vouch's GPU fast
// mode uses (PTX mma.sync m16n8k16 with FP16 or BF16 inputs and an FP32
// accumulator). NVIDIA does not document that arithmetic: it is not IEEE
// 754 (the products are not rounded one by one; a block of products and
// the accumulator are aligned to the largest of them, bits below a fixed
// width are dropped, the aligned values are summed exactly and the sum is
// rounded once). A Model names those choices; the model of a GPU
// architecture is fitted and then checked against the hardware on the
// device (the probe test in this package, build tag cuda) on random and
// adversarial inputs, and only a model with zero differing outputs there
// is used to replay a fast-mode decision on a CPU.
package mma

import (
	"fmt"
	"math"
	"math/bits"
)

// Format is the input element format of an MMA.
type Format int

// The input formats.
const (
	FP16 Format = iota // IEEE binary16
	BF16               // bfloat16
)

func (f Format) String() string {
	if f == BF16 {
		return "bf16"
	}
	return "fp16"
}

// Rounding is how the block sum is rounded to float32.
type Rounding int

// The roundings of the block sum.
const (
	TowardZero Rounding = iota // truncation of the magnitude
	NearestEven
)

func (r Rounding) String() string {
	if r == NearestEven {
		return "rne"
	}
	return "rz"
}

// Model is one hypothesis of an MMA unit's arithmetic for FP32
// accumulation. Within a step of Block products (the instruction's k16 is
// split into 16/Block steps, taken in k order), the products (exact) and
// the running accumulator are aligned to the largest exponent among them;
// each keeps the bits down to Frac below that exponent (the rest are
// dropped toward zero when TruncateMagnitude, toward minus infinity
// otherwise); the aligned integers are summed exactly and the sum is
// rounded to float32 with Round. A product's exponent is that of its
// leading bit, or with ExponentSum the sum of its operands' exponents:
// the hardware does not normalise a product of two significands in [1, 2),
// which lies in [1, 4).
type Model struct {
	Block             int      // products per fused step: 1, 2, 4, 8 or 16
	Frac              int      // alignment bits below the largest exponent (23..46)
	Round             Rounding // rounding of each step's sum to float32
	TruncateMagnitude bool     // aligned terms are truncated toward zero (else toward minus infinity)
	ExponentSum       bool     // a product's exponent is its operands' exponent sum
}

func (m Model) String() string {
	t := "floor"
	if m.TruncateMagnitude {
		t = "trunc"
	}
	e := "leading bit"
	if m.ExponentSum {
		e = "exponent sum"
	}
	return fmt.Sprintf("block %d, %d fraction bits below the largest %s, terms %s, sum %s", m.Block, m.Frac, e, t, m.Round)
}

// Check reports whether the model's parameters are in range.
func (m Model) Check() error {
	switch m.Block {
	case 1, 2, 4, 8, 16:
	default:
		return fmt.Errorf("mma: block of %d products (1, 2, 4, 8 or 16)", m.Block)
	}
	if m.Frac < 23 || m.Frac > 45 {
		return fmt.Errorf("mma: %d fraction bits (23 to 45)", m.Frac)
	}
	return nil
}

// term is an exact value sig × 2^exp (sig ≥ 0, neg its sign); ref is the
// exponent it is aligned by.
type term struct {
	neg bool
	sig uint64
	exp int
	ref int
}

// lead is the exponent of the term's leading bit.
func (t term) lead() int { return t.exp + bits.Len64(t.sig) - 1 }

// decode16 splits a binary16 or bfloat16 into an exact term; ok is false
// for infinities and NaNs.
func decode16(f Format, h uint16) (term, bool) {
	ebits, mbits, bias := 5, 10, 15
	if f == BF16 {
		ebits, mbits, bias = 8, 7, 127
	}
	neg := h>>15 != 0
	e := int(h>>mbits) & (1<<ebits - 1)
	m := uint64(h) & (1<<mbits - 1)
	switch {
	case e == 1<<ebits-1:
		return term{}, false
	case e == 0:
		return term{neg: neg, sig: m, exp: 1 - bias - mbits}, true
	}
	return term{neg: neg, sig: m | 1<<mbits, exp: e - bias - mbits}, true
}

// decode32 splits a float32 into an exact term; ok is false for
// infinities and NaNs.
func decode32(v float32) (term, bool) {
	b := math.Float32bits(v)
	neg := b>>31 != 0
	e := int(b>>23) & 0xff
	m := uint64(b) & (1<<23 - 1)
	switch {
	case e == 0xff:
		return term{}, false
	case e == 0:
		return term{neg: neg, sig: m, exp: -149}, true
	}
	return term{neg: neg, sig: m | 1<<23, exp: e - 150}, true
}

// Value returns the exact value of a binary16 or bfloat16 (Inf or NaN
// included).
func Value(f Format, h uint16) float64 {
	t, ok := decode16(f, h)
	if !ok {
		if f == BF16 {
			return float64(math.Float32frombits(uint32(h) << 16))
		}
		if h&0x3ff != 0 {
			return math.NaN()
		}
		return math.Inf(1 - 2*int(h>>15))
	}
	v := math.Ldexp(float64(t.sig), t.exp)
	if t.neg {
		v = -v
	}
	return v
}

// FromFloat32 converts v to the format with round to nearest, ties to even
// (the conversion the fast kernels use when they stage FP32 activations:
// cvt.rn.f16.f32 and cvt.rn.bf16.f32).
func FromFloat32(f Format, v float32) uint16 {
	if f == BF16 {
		b := math.Float32bits(v)
		if v != v {
			return uint16(b>>16) | 0x40
		}
		r := b + 0x7fff + (b>>16)&1
		return uint16(r >> 16)
	}
	b := math.Float32bits(v)
	sign := uint16(b>>16) & 0x8000
	e := int(b>>23) & 0xff
	m := b & (1<<23 - 1)
	if e == 0xff {
		if m != 0 {
			return sign | 0x7e00 | uint16(m>>13) // quiet, the payload's top bits kept
		}
		return sign | 0x7c00
	}
	// The value's significand with the hidden bit, as sig × 2^(e-150).
	sig := uint64(m)
	if e != 0 {
		sig |= 1 << 23
	} else {
		e = 1
	}
	// binary16 keeps the bits down to 2^max(lead-10, -24).
	lead := e - 150 + bits.Len64(sig) - 1
	if sig == 0 {
		return sign
	}
	low := lead - 10
	if low < -24 {
		low = -24
	}
	shift := low - (e - 150)
	q := sig
	if shift > 0 {
		if shift >= 64 {
			q = 0
		} else {
			rem := sig & (1<<shift - 1)
			q = sig >> shift
			half := uint64(1) << (shift - 1)
			if rem > half || rem == half && q&1 == 1 {
				q++
			}
		}
	} else {
		q = sig << -shift
	}
	// q × 2^low; normalise into the binary16 fields.
	if q == 0 {
		return sign
	}
	if bits.Len64(q) > 11 { // rounding carried into a new bit
		q >>= 1
		low++
	}
	if low == -24 && q < 1<<10 {
		return sign | uint16(q) // subnormal
	}
	ex := low + 10 + 15 // biased exponent of the leading bit
	if ex >= 31 {
		return sign | 0x7c00
	}
	return sign | uint16(ex)<<10 | uint16(q)&0x3ff
}

// step is one fused step: the accumulator c plus the products a[i]·b[i],
// in the model's arithmetic. ok is false when an input is Inf or NaN (the
// emulation does not model them; callers report it).
func (m Model) step(f Format, a, b []uint16, c float32) (float32, bool) {
	ct, ok := decode32(c)
	if !ok {
		return 0, false
	}
	var buf [17]term // Block ≤ 16 products and the accumulator
	ts := buf[:0]
	if ct.sig != 0 {
		ct.ref = ct.lead()
		ts = append(ts, ct)
	}
	mbits := 10
	if f == BF16 {
		mbits = 7
	}
	for i := range a {
		x, ok1 := decode16(f, a[i])
		y, ok2 := decode16(f, b[i])
		if !ok1 || !ok2 {
			return 0, false
		}
		if x.sig == 0 || y.sig == 0 {
			continue
		}
		p := term{neg: x.neg != y.neg, sig: x.sig * y.sig, exp: x.exp + y.exp}
		p.ref = p.lead()
		if m.ExponentSum {
			// Operand exponents: a subnormal's is the least normal one.
			p.ref = p.exp + 2*mbits
		}
		ts = append(ts, p)
	}
	if len(ts) == 0 {
		// Every term is zero: the sum is the accumulator (its sign kept
		// when no product is negative-signed is not modelled: +0 or c).
		return c, true
	}
	emax := ts[0].ref
	for _, t := range ts[1:] {
		emax = max(emax, t.ref)
	}
	lsb := emax - m.Frac // exponent of the aligned integers' unit
	var sum int64
	for _, t := range ts {
		s := t.exp - lsb
		var v uint64
		rem := false
		switch {
		case s >= 0:
			v = t.sig << s
		case -s >= 64:
			v, rem = 0, true
		default:
			v = t.sig >> -s
			rem = t.sig&(1<<-s-1) != 0
		}
		if t.neg {
			sum -= int64(v)
			if rem && !m.TruncateMagnitude {
				sum-- // floor of a negative value with dropped bits
			}
		} else {
			sum += int64(v)
		}
	}
	return round32(sum, lsb, m.Round), true
}

// round32 rounds sum × 2^exp to float32.
func round32(sum int64, exp int, r Rounding) float32 {
	if sum == 0 {
		return 0
	}
	neg := sum < 0
	u := uint64(sum)
	if neg {
		u = uint64(-sum)
	}
	if r == TowardZero {
		if n := bits.Len64(u); n > 24 {
			u = u >> (n - 24) << (n - 24)
		}
	}
	// u has at most 53 significant bits here (Frac ≤ 46, ≤ 17 terms, a
	// product at most 2 bits above its exponent sum), so
	// the float64 is exact and float32() rounds once, to nearest even.
	v := float32(math.Ldexp(float64(u), exp))
	if v == 0 {
		return 0 // a sum that underflows is +0, whatever its sign
	}
	if neg {
		v = -v
	}
	return v
}

// Dot is one output element of a chain of MMA instructions: c plus the
// dot product of a and b (len a multiple of 16), taken in steps of the
// model's block, in k order, as the fast kernels issue them.
func (m Model) Dot(f Format, a, b []uint16, c float32) (float32, error) {
	if err := m.Check(); err != nil {
		return 0, err
	}
	if len(a) != len(b) || len(a)%16 != 0 {
		return 0, fmt.Errorf("mma: dot of %d and %d elements (equal, a multiple of 16)", len(a), len(b))
	}
	acc := c
	for k := 0; k < len(a); k += m.Block {
		var ok bool
		if acc, ok = m.step(f, a[k:k+m.Block], b[k:k+m.Block], acc); !ok {
			return 0, fmt.Errorf("mma: an infinite or NaN operand at k %d..%d (not modelled)", k, k+m.Block-1)
		}
	}
	return acc, nil
}

// MMA16816 is one m16n8k16 instruction: d = a·b + c with a 16×16 (row
// major), b 16×8 (k major: b[k*8+n]) and c, d 16×8 (row major).
func (m Model) MMA16816(f Format, a, b []uint16, c []float32) ([]float32, error) {
	if len(a) != 256 || len(b) != 128 || len(c) != 128 {
		return nil, fmt.Errorf("mma: m16n8k16 operands of %d, %d and %d elements (256, 128, 128)", len(a), len(b), len(c))
	}
	d := make([]float32, 128)
	col := make([]uint16, 16)
	for n := 0; n < 8; n++ {
		for k := range col {
			col[k] = b[k*8+n]
		}
		for i := 0; i < 16; i++ {
			v, err := m.Dot(f, a[i*16:i*16+16], col, c[i*8+n])
			if err != nil {
				return nil, fmt.Errorf("row %d, column %d: %w", i, n, err)
			}
			d[i*8+n] = v
		}
	}
	return d, nil
}

// Candidates are the models the probe compares with the hardware.
func Candidates() []Model {
	var ms []Model
	for _, blk := range []int{16, 8, 4, 2, 1} {
		for frac := 23; frac <= 30; frac++ {
			for _, r := range []Rounding{TowardZero, NearestEven} {
				for _, tm := range []bool{true, false} {
					for _, es := range []bool{true, false} {
						ms = append(ms, Model{Block: blk, Frac: frac, Round: r, TruncateMagnitude: tm, ExponentSum: es})
					}
				}
			}
		}
	}
	return ms
}

// fitted holds the models checked against the hardware (TestProbe on the
// device): zero differing outputs on every probe problem. sm_90 (an NVIDIA
// H200, 2026-12-02): the 16 products and the accumulator of one m16n8k16
// instruction in one step, aligned to the largest exponent (a product's
// being its operands' exponent sum), 25 bits below it kept, each term
// truncated toward zero, the exact sum truncated to float32 (+0 when it
// underflows); 0 of 1,024,000 outputs differ for FP16 and for BF16, and 0
// of 256,000 edge outputs each (docs/gpu-emulation.md).
var fitted = map[string]map[Format]Model{
	"sm_90": {
		FP16: {Block: 16, Frac: 25, Round: TowardZero, TruncateMagnitude: true, ExponentSum: true},
		BF16: {Block: 16, Frac: 25, Round: TowardZero, TruncateMagnitude: true, ExponentSum: true},
	},
}

// ModelFor returns the model of an architecture's m16n8k16 instruction
// with FP32 accumulation; ok is false for an architecture without one (a
// fast-mode plan for it cannot be replayed on a CPU).
func ModelFor(arch string, f Format) (Model, bool) {
	m, ok := fitted[arch][f]
	return m, ok
}
