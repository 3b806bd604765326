package vec

import "math"

// The pure-Go twins. They state what each kernel computes and are the oracle the SIMD
// versions are tested against; the SIMD levels evaluate the same polynomials with FMA and
// 16 lanes, so they differ from these only in rounding (a few ulp at most).

// Constants of the float32 exp: x = n·ln2 + r with |r| ≤ ln2/2, exp(r) by Cephes' degree-7
// polynomial (evaluated as Horner's scheme down to ((p·r + 1)·r + 1)), and 2^n applied in two halves so that results down to the smallest
// subnormal are right. Inputs are clamped to [expLo, expHi] first: below expLo exp rounds
// to 0 in float32, above expHi it overflows to +Inf (the clamp keeps n in range).
const (
	expLo = -104.0
	// expFlushLo is ExpSumFlush's bound: exp(−87) ≈ 1.6e-38 is normal, and every value at
	// or below it becomes 0, subnormal results among them.
	expFlushLo = -87.0
	expHi      = 89.0
	log2e      = 1.44269504088896341
	ln2Hi      = 0.693359375
	ln2Lo      = -2.12194440e-4
	expP0      = 1.9875691500e-4
	expP1      = 1.3981999507e-3
	expP2      = 8.3334519073e-3
	expP3      = 4.1665795894e-2
	expP4      = 1.6666665459e-1
	expP5      = 5.0000001201e-1
	invSqrt2   = 0.70710678118654752
)

// expU8's constants: ln2 rounded to float32, one reduction step, and a degree-4
// polynomial fitted to exp on [−ln2/2, ln2/2] for relative error (5.4e-6 at most; with the
// reduction and roundings below 7e-6, TestExpU8Accuracy): e^r ≈ 1 + r·(1 + r·(q2 + r·(q3 + r·q4))).
const (
	ln2F32 = 0.693147180559945309
	expQ2  = 0.5000491738319397
	expQ3  = 0.16753514111042023
	expQ4  = 0.04129645600914955
)

// erf by Abramowitz & Stegun 7.1.26: erf(x) = 1 − t·(a1 + t·(a2 + t·(a3 + t·(a4 + t·a5))))·e^(−x²)
// with t = 1/(1 + p·|x|), odd in x; its absolute error is below 1.5e-7.
const (
	erfP  = 0.3275911
	erfA1 = 0.254829592
	erfA2 = -0.284496736
	erfA3 = 1.421413741
	erfA4 = -1.453152027
	erfA5 = 1.061405429
)

// exp32 is the scalar statement of the SIMD exp.
func exp32(x float32) float32 {
	if x != x {
		return x
	}
	x, n := expRange(x)
	r := x - n*ln2Hi
	r = r - n*ln2Lo
	p := float32(expP0)
	p = p*r + expP1
	p = p*r + expP2
	p = p*r + expP3
	p = p*r + expP4
	p = p*r + expP5
	p = p*r + 1
	p = p*r + 1
	return scale2n(p, n)
}

// expFlush32 is the scalar statement of ExpSumFlush's exp: exp32, 0 at or below
// expFlushLo (a NaN stays NaN).
func expFlush32(x float32) float32 {
	if x <= expFlushLo {
		return 0
	}
	return exp32(x)
}

// expU8 is the scalar statement of the exp of ExpSumU8: exp32's clamping and scaling by
// 2ⁿ, with a cheaper reduction and polynomial. Its values become probabilities quantized
// at 1/255, where 7e-6 is far below a step, and the row sums that normalise them.
func expU8(x float32) float32 {
	if x != x {
		return x
	}
	x, n := expRange(x)
	// x − n·ln2 in one rounding, as the vector code's FMA gives it: n·ln2 rounded to
	// float32 first would be off by up to 5e-6 at |x| near 87.
	r := float32(float64(x) - float64(n)*float64(float32(ln2F32)))
	p := float32(expQ4)
	p = p*r + expQ3
	p = p*r + expQ2
	p = p*r + 1
	p = p*r + 1
	return scale2n(p, n)
}

// expRange clamps x to the exps' range and returns it with n = rne(x·log2e), the power of
// two the result is scaled by.
func expRange(x float32) (float32, float32) {
	x = min(max(x, expLo), expHi)
	return x, float32(math.RoundToEven(float64(x * log2e)))
}

// scale2n returns p·2ⁿ as the AVX2 code forms it (AVX-512 scales with VSCALEFPS): two factors 2^(n/2) and 2^(n − n/2),
// each a normal float32 over the whole clamped range.
func scale2n(p, n float32) float32 {
	ni := int32(n)
	n1 := ni >> 1
	n2 := ni - n1
	return p * math.Float32frombits(uint32(n1+127)<<23) * math.Float32frombits(uint32(n2+127)<<23)
}

// erf32 is the scalar statement of the SIMD erf.
func erf32(x float32) float32 {
	a := float32(math.Abs(float64(x)))
	t := 1 / (1 + erfP*a)
	p := float32(erfA5)
	p = p*t + erfA4
	p = p*t + erfA3
	p = p*t + erfA2
	p = p*t + erfA1
	y := 1 - p*t*exp32(-a*a)
	if x < 0 {
		return -y
	}
	return y
}

// gelu32 is 0.5·x·(1 + erf(x/√2)).
func gelu32(x float32) float32 { return 0.5 * x * (1 + erf32(x*invSqrt2)) }

func expSumGeneric(dst, src []float32, shift float32) float32 {
	return expSumOf(exp32, dst, src, shift)
}

// expSumFlushGeneric is expSumGeneric with expFlush32.
func expSumFlushGeneric(dst, src []float32, shift float32) float32 {
	return expSumOf(expFlush32, dst, src, shift)
}

// expSumOf sets dst[i] = exp(src[i] − shift) and returns their sum in 16 partial sums, lane
// j taking the elements i ≡ j (mod 16), folded in a fixed order, as the SIMD levels do.
func expSumOf(exp func(float32) float32, dst, src []float32, shift float32) float32 {
	var acc [16]float32
	for i, v := range src {
		e := exp(v - shift)
		dst[i] = e
		acc[i&15] += e
	}
	return fold16(&acc)
}

// expSumU8Generic is the Go statement of ExpSumU8: the leading multiple of 16 values summed
// as expSumGeneric sums them, the rest (expSumU8Tail) summed apart and added. The AVX-512
// code sums alternate groups of 16 into two accumulators, so its sum agrees to rounding.
func expSumU8Generic(dst []uint8, src []float32, shift float32) float32 {
	v := len(src) &^ 15
	var acc [16]float32
	for i, x := range src[:v] {
		e := expU8(x - shift)
		dst[i] = quantU8(e)
		acc[i&15] += e
	}
	return fold16(&acc) + expSumU8Tail(dst[v:], src[v:], shift)
}

// expSumU8Tail is expSumU8Generic on fewer than 16 values, in lanes of their own.
func expSumU8Tail(dst []uint8, src []float32, shift float32) float32 {
	var acc [16]float32
	for i, x := range src {
		e := expU8(x - shift)
		dst[i] = quantU8(e)
		acc[i&15] += e
	}
	return fold16(&acc)
}

// quantU8 is clamp(rne(e·255), 0, 255), 0 for a NaN: VCVTPS2DQ's rounding and the
// saturations of the vector code.
func quantU8(e float32) uint8 {
	v := float64(float32(e * 255))
	switch {
	case v != v || v <= 0:
		return 0
	case v >= 255:
		return 255
	}
	return uint8(math.RoundToEven(v))
}

// fold16 sums 16 lanes pairwise: (0..7)+(8..15), then 4, 2, 1, the order of the SIMD
// horizontal reductions.
func fold16(a *[16]float32) float32 {
	for w := 8; w >= 1; w /= 2 {
		for j := 0; j < w; j++ {
			a[j] += a[j+w]
		}
	}
	return a[0]
}

func maxGeneric(x []float32) float32 {
	m := float32(math.Inf(-1))
	for _, v := range x {
		if v != v {
			return v
		}
		if v > m {
			m = v
		}
	}
	return m
}

func scaleGeneric(x []float32, c float32) {
	for i := range x {
		x[i] *= c
	}
}

func divGeneric(x []float32, c float32) {
	for i := range x {
		x[i] /= c
	}
}

func addGeneric(dst, a, b []float32) {
	for i := range dst {
		dst[i] = a[i] + b[i]
	}
}

func accF64Generic(acc []float64, x []float32) {
	for i, v := range x {
		acc[i] += float64(v)
	}
}

func subGeneric(dst, a, b []float32) {
	for i := range dst {
		dst[i] = a[i] - b[i]
	}
}

func biasActGeneric(x, bias []float32, act Act) {
	switch act {
	case ActRelu:
		for i, v := range x {
			v += bias[i]
			if !(v > 0) && v == v {
				v = 0
			}
			x[i] = v
		}
	case ActGelu:
		for i, v := range x {
			x[i] = gelu32(v + bias[i])
		}
	default:
		for i, v := range x {
			x[i] = v + bias[i]
		}
	}
}

func reluGeneric(dst, src []float32) {
	for i, v := range src {
		if !(v > 0) && v == v {
			v = 0
		}
		dst[i] = v
	}
}

func geluGeneric(dst, src []float32) {
	for i, v := range src {
		dst[i] = gelu32(v)
	}
}

// rotateHalfGeneric is the Go statement of RotateHalf, from position i0 of each half on.
// The float32 conversions round each product where the vector code does (Go may otherwise
// fuse a product into the sum).
func rotateHalfGeneric(y, x, c, s []float32, i0 int) {
	h := len(x) / 2
	for i := i0; i < h; i++ {
		y[i] = float32(x[i]*c[i]) + float32(-x[i+h]*s[i])
	}
	for i := h + i0; i < len(x); i++ {
		y[i] = float32(x[i]*c[i]) + float32(x[i-h]*s[i])
	}
}

// eluAddGeneric is the Go statement of EluAdd. Each float32 conversion rounds where the
// vector code rounds (Go may otherwise fuse the multiply and the add).
func eluAddGeneric(dst, src []float32, alpha, c float32) {
	for i, v := range src {
		b := math.Float32bits(v)
		neg := uint32(int32(b) >> 31) // all ones when the sign bit is set
		e := exp32(math.Float32frombits(b & neg))
		dst[i] = math.Float32frombits(b&^neg) + (float32(alpha*(e-1)) + c)
	}
}

func erfGeneric(dst, src []float32) {
	for i, v := range src {
		dst[i] = erf32(v)
	}
}

// sumGeneric sums x in 16 lanes folded as fold16 does.
func sumGeneric(x []float32) float32 {
	var acc [16]float32
	for i, v := range x {
		acc[i&15] += v
	}
	return fold16(&acc)
}

// sqDevGeneric returns Σ (x[i] − mu)² in 16 lanes.
func sqDevGeneric(x []float32, mu float32) float32 {
	var acc [16]float32
	for i, v := range x {
		d := v - mu
		acc[i&15] += d * d
	}
	return fold16(&acc)
}

// shiftGeneric adds c to every x[i].
func shiftGeneric(x []float32, c float32) {
	for i := range x {
		x[i] += c
	}
}

// dotGeneric returns Σ a[i]·b[i] in 16 lanes.
func dotGeneric(a, b []float32) float32 {
	var acc [16]float32
	for i, v := range a {
		acc[i&15] += v * b[i]
	}
	return fold16(&acc)
}

// normAffineGeneric writes dst[i] = (x[i] − mu)·is·g[i] + b[i] (b may be nil).
func normAffineGeneric(dst, x, g, b []float32, mu, is float32) {
	if b == nil {
		for i, v := range x {
			dst[i] = (v - mu) * is * g[i]
		}
		return
	}
	for i, v := range x {
		dst[i] = (v-mu)*is*g[i] + b[i]
	}
}
