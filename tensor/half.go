package tensor

import "math"

// Half is an IEEE 754 binary16 value, stored as its bits.
type Half uint16

// BHalf is a bfloat16 value (the top 16 bits of a float32), stored as its bits.
type BHalf uint16

// Float32 converts h exactly to float32.
func (h Half) Float32() float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // Inf or NaN
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp == 0:
		if man == 0 {
			return math.Float32frombits(sign)
		}
		// Subnormal: value = man * 2^-24, exact in float32.
		f := float32(man) * (1.0 / (1 << 24))
		if sign != 0 {
			f = -f
		}
		return f
	}
	return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
}

// ToHalf converts f to the nearest float16, rounding ties to even; values
// beyond the range become ±Inf and NaN stays NaN (quiet).
func ToHalf(f float32) Half {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	man := b & 0x7fffff
	if exp == 0xff {
		if man != 0 {
			return Half(sign | 0x7e00 | uint16(man>>13))
		}
		return Half(sign | 0x7c00)
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return Half(sign | 0x7c00)
	}
	if e <= 0 {
		if e < -10 {
			return Half(sign) // rounds to zero
		}
		// Subnormal half: shift the implicit-one mantissa into place.
		m := man | 0x800000
		shift := uint32(14 - e)
		half := uint32(1) << (shift - 1)
		rest := m & (1<<shift - 1)
		v := m >> shift
		if rest > half || (rest == half && v&1 == 1) {
			v++
		}
		return Half(sign | uint16(v))
	}
	v := uint32(e)<<10 | man>>13
	rest := man & 0x1fff
	if rest > 0x1000 || (rest == 0x1000 && v&1 == 1) {
		v++ // may carry into the exponent, up to Inf: that is correct rounding
	}
	return Half(sign | uint16(v))
}

// Float32 converts b exactly to float32.
func (b BHalf) Float32() float32 { return math.Float32frombits(uint32(b) << 16) }

// ToBHalf converts f to the nearest bfloat16, rounding ties to even; NaN stays NaN.
func ToBHalf(f float32) BHalf {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return BHalf(u>>16 | 0x40)
	}
	u += 0x7fff + (u>>16)&1
	return BHalf(u >> 16)
}
