package tensor

import (
	"fmt"
	"math"
)

// Float16Bits returns the IEEE 754 binary16 encoding of f, rounded to nearest with ties to
// even (as numpy's astype(float16) and torch's .half() do): values beyond the largest finite
// half (65504, or 65520 and more after rounding) become ±Inf, values below half the smallest
// subnormal (2^-25) become ±0, and NaN stays a quiet NaN.
func Float16Bits(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00 | uint16(mant>>13)
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	switch {
	case e >= 0x1f:
		return sign | 0x7c00
	case e <= 0:
		if e < -10 {
			return sign
		}
		m := mant | 0x800000
		shift := uint(14 - e)
		h := m >> shift
		rem, half := m&(1<<shift-1), uint32(1)<<(shift-1)
		if rem > half || (rem == half && h&1 == 1) {
			h++ // may carry into the smallest normal, whose encoding is the next one up
		}
		return sign | uint16(h)
	}
	h := uint32(e)<<10 | mant>>13
	if rem := mant & 0x1fff; rem > 0x1000 || (rem == 0x1000 && h&1 == 1) {
		h++ // a carry into the exponent is the right encoding, up to Inf
	}
	return sign | uint16(h)
}

// Float16FromBits returns the float32 value of the binary16 encoding h (exact: every half
// is a float32).
func Float16FromBits(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch exp {
	case 0:
		v := float32(mant) * (1.0 / (1 << 24))
		if sign != 0 {
			v = -v
		}
		return v
	case 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	}
	return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
}

// BFloat16Bits returns the bfloat16 encoding of f (the top 16 bits of its float32
// encoding), rounded to nearest with ties to even as torch's .bfloat16() does; NaN stays
// a quiet NaN and rounding past the largest finite value gives ±Inf.
func BFloat16Bits(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// BFloat16FromBits returns the float32 value of the bfloat16 encoding h.
func BFloat16FromBits(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// RoundFloat16 returns f rounded to the nearest float16 value (ties to even).
func RoundFloat16(f float32) float32 { return Float16FromBits(Float16Bits(f)) }

// RoundBFloat16 returns f rounded to the nearest bfloat16 value (ties to even).
func RoundBFloat16(f float32) float32 { return BFloat16FromBits(BFloat16Bits(f)) }

// RoundTo returns v rounded to the grid of the float type dt (Float32: unchanged, Float16 and
// BFloat16: nearest, ties to even); it is what a cast to dt does to a float32 value.
func RoundTo(dt DType, v float32) float32 {
	switch dt {
	case Float16:
		return RoundFloat16(v)
	case BFloat16:
		return RoundBFloat16(v)
	}
	return v
}

// RoundFrom64 returns the float64 v rounded to the grid of the float type dt, held as float32
// (Float32, Float16, BFloat16): to nearest, ties to even, in one rounding. A 16-bit type is
// reached through float32 with round-to-odd, which keeps the one rounding exact.
func RoundFrom64(dt DType, v float64) float32 {
	f := float32(v)
	if dt == Float32 || float64(f) == v || math.IsNaN(v) {
		return RoundTo(dt, f)
	}
	if math.Abs(float64(f)) > math.Abs(v) {
		f = math.Nextafter32(f, 0) // toward zero
	}
	return RoundTo(dt, math.Float32frombits(math.Float32bits(f)|1))
}

// ToFloat32 returns a float32 copy of t, a Float16 or BFloat16 tensor (whose values are
// float32 already) or a Float32 one. It returns an error for other dtypes.
func ToFloat32(t *Tensor) (*Tensor, error) {
	if !t.DType.IsFloat() {
		return nil, fmt.Errorf("tensor: cannot convert %v to float32", t.DType)
	}
	c := t.Clone()
	c.DType = Float32
	return c, nil
}
