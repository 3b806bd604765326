// Package vec holds the CPU backend's vectorised memory-bound kernels: exp, the softmax
// row, LayerNorm, GELU (exact erf form) and ReLU, and bias, residual and scalar arithmetic,
// all on float32 slices.
//
// Each kernel has an AVX-512 and an AVX2+FMA implementation in Go assembly (vec_amd64.s)
// and a pure-Go twin (generic.go) that states what it computes and is the test oracle.
// The level is package simd's (backends/cpu/internal/simd), shared with the matrix
// products, so one setting pins every SIMD path of the backend. simd only selects a level
// golang.org/x/sys/cpu reports the features for, and never with the purego build tag.
//
// Accuracy: Exp is within 2 ulp of math.Exp over float32's range (−Inf gives 0, +Inf
// gives +Inf, NaN stays NaN); Erf is within 1e-6 absolute of math.Erf; sums are
// accumulated in float32 in 16 lanes folded in a fixed order, so a result never depends on
// which goroutine computes it.
//
// Slices may be of any length and alignment. Functions taking dst and a source allow dst
// to be the source (in place) but not any other overlap. Lengths must match; a shorter
// dst is a programming error and panics.
package vec

import (
	"github.com/zoo-dev/zoo/backends/cpu/internal/simd"
)

// Act selects the activation BiasAct applies after the bias.
type Act uint8

const (
	// ActNone adds the bias only.
	ActNone Act = iota
	// ActRelu applies max(x, 0) (NaN stays NaN).
	ActRelu
	// ActGelu applies the exact GELU 0.5·x·(1 + erf(x/√2)).
	ActGelu
)

// simd levels, in the order level() returns them.
const (
	levelGeneric = iota
	levelAVX2
	levelAVX512
)

// level returns the SIMD level to use now (simd only lets it be one this CPU runs).
func level() int {
	switch simd.Current() {
	case simd.AVX512:
		return levelAVX512
	case simd.AVX2:
		return levelAVX2
	}
	return levelGeneric
}

// Level names the level the kernels of this package run at: "avx512", "avx2" or "generic".
func Level() string {
	switch level() {
	case levelAVX512:
		return "avx512"
	case levelAVX2:
		return "avx2"
	}
	return "generic"
}

func checkLen(dst, src []float32) {
	if len(dst) < len(src) {
		panic("vec: destination shorter than source")
	}
}

// Exp sets dst[i] = exp(src[i]).
func Exp(dst, src []float32) {
	checkLen(dst, src)
	expSum(dst[:len(src)], src, 0)
}

// ExpSum sets dst[i] = exp(src[i] − shift) and returns the sum of the dst values: the
// middle pass of a softmax (shift is the row maximum).
func ExpSum(dst, src []float32, shift float32) float32 {
	checkLen(dst, src)
	return expSum(dst[:len(src)], src, shift)
}

// ExpSumFlush is ExpSum with every value at or below exp(−87) ≈ 1.6e-38, the subnormal
// ones among them, set to 0: the probabilities of a softmax that go on into a matrix
// product, where a subnormal operand costs an Intel core a microcode assist in every FMA
// that reads it (ALiBi's distant keys made attention 2.8× slower on a Xeon). Against a
// row's sum of at least 1, the values dropped are below 2⁻¹²⁵ of it.
func ExpSumFlush(dst, src []float32, shift float32) float32 {
	checkLen(dst, src)
	return expSumFlush(dst[:len(src)], src, shift)
}

// ExpSumU8 is ExpSum with the exp values not stored but quantized to bytes at the scale
// 1/255: dst[i] = clamp(rne(exp(src[i] − shift)·255), 0, 255), 0 for a NaN. It returns the
// sum of the exp values (as floats): an int8 attention block's probabilities, which lie in
// [0, 1] when shift is at least the row's maximum, and their row sum in one pass. It panics
// when dst is shorter than src.
func ExpSumU8(dst []uint8, src []float32, shift float32) float32 {
	if len(dst) < len(src) {
		panic("vec: ExpSumU8: dst shorter than src")
	}
	return expSumU8(dst[:len(src)], src, shift)
}

// Max returns the largest element of x, NaN if x holds a NaN, and −Inf for an empty x.
func Max(x []float32) float32 { return max32(x) }

// Dot returns Σ a[i]·b[i], summed in 16 lanes with fused multiply-adds (the lanes folded
// pairwise at the end), so it differs from a sequential sum by float32 rounding only. It
// panics when a and b differ in length.
func Dot(a, b []float32) float32 {
	if len(a) != len(b) {
		panic("vec: Dot operands differ in length")
	}
	return dot(a, b)
}

// Softmax writes the softmax of src to dst: exp(src[i] − max) / Σ, with the exps of
// ExpSumFlush (probabilities below 1.6e-38 are 0, as fused attention has them). A row
// whose maximum is −Inf (every entry masked) or NaN gives NaN everywhere, as the unfused
// graph does.
func Softmax(dst, src []float32) {
	checkLen(dst, src)
	dst = dst[:len(src)]
	if len(src) == 0 {
		return
	}
	m := max32(src)
	s := expSumFlush(dst, src, m)
	Scale(dst, 1/s)
}

// Scale multiplies x by c in place.
func Scale(x []float32, c float32) { scale(x, c) }

// AddScalar adds c to x in place.
func AddScalar(x []float32, c float32) { shift(x, c) }

// DivScalar divides x by c in place (a true division, as the graph's Div does).
func DivScalar(x []float32, c float32) { div(x, c) }

// Add sets dst[i] = a[i] + b[i].
func Add(dst, a, b []float32) {
	if len(a) != len(b) {
		panic("vec: Add operands differ in length")
	}
	checkLen(dst, a)
	add(dst[:len(a)], a, b)
}

// AccF64 adds x into acc in float64: acc[i] += float64(x[i]), each sum rounded once, as Go's
// float64 addition rounds it (the accumulation of sums and means over leading axes). It
// panics when acc is shorter than x.
func AccF64(acc []float64, x []float32) {
	if len(acc) < len(x) {
		panic("vec: AccF64 accumulator shorter than its input")
	}
	if len(x) > 0 {
		accF64(acc[:len(x)], x)
	}
}

// Sub sets dst[i] = a[i] − b[i]. dst may be a or b.
func Sub(dst, a, b []float32) {
	if len(a) != len(b) {
		panic("vec: Sub operands differ in length")
	}
	checkLen(dst, a)
	sub(dst[:len(a)], a, b)
}

// BiasAct applies x[i] = act(x[i] + bias[i]) in place: the epilogue of a linear layer on
// one output row.
func BiasAct(x, bias []float32, act Act) {
	if len(bias) < len(x) {
		panic("vec: bias shorter than row")
	}
	biasAct(x, bias[:len(x)], act)
}

// Relu sets dst[i] = max(src[i], 0); NaN stays NaN.
func Relu(dst, src []float32) {
	checkLen(dst, src)
	relu(dst[:len(src)], src)
}

// Gelu sets dst[i] = 0.5·src[i]·(1 + erf(src[i]/√2)), the exact (erf) GELU.
func Gelu(dst, src []float32) {
	checkLen(dst, src)
	gelu(dst[:len(src)], src)
}

// EluAdd sets dst[i] = elu(src[i], alpha) + c, computed as max(x, 0) + (alpha·(e^min(x, 0) −
// 1) + c) with min and max taken by the sign bit: x + c at and above 0 (e⁰ − 1 is exactly
// 0), alpha·(eˣ − 1) + c below, with Exp's exp (within 2 ulp of eˣ; an expm1 is more
// accurate relatively near 0, where both round to within an ulp of c for c = 1), NaN for
// NaN. It is the feature map φ = elu + 1 of linear attention in one pass. It panics when
// dst is shorter than src.
func EluAdd(dst, src []float32, alpha, c float32) {
	checkLen(dst, src)
	eluAdd(dst[:len(src)], src, alpha, c)
}

// RotateHalf sets y to the rotary embedding of x in the rotate-half layout (GPT-NeoX,
// Hugging Face's rotate_half): y = x·c + Concat(−x[h:], x[:h])·s with h = len(x)/2, each
// product and the sum rounded to float32 as separate Mul and Add steps round them, so the
// result is the unfused graph's bit for bit. It panics when len(x) is odd or y, c or s is
// shorter than x.
func RotateHalf(y, x, c, s []float32) {
	if len(x)%2 != 0 || len(y) < len(x) || len(c) < len(x) || len(s) < len(x) {
		panic("vec: RotateHalf: an odd row, or y, c or s shorter than x")
	}
	n := len(x)
	rotateHalf(y[:n], x, c[:n], s[:n])
}

// Erf sets dst[i] = erf(src[i]) within 1e-6 absolute.
func Erf(dst, src []float32) {
	checkLen(dst, src)
	erfv(dst[:len(src)], src)
}

// LayerNorm normalises one row: dst[i] = (src[i] − mean)/√(var + eps)·gamma[i] + beta[i]
// with the mean and the (biased) variance of src, computed in two passes in float32.
// beta may be nil. It returns the mean and 1/√(var + eps).
func LayerNorm(dst, src, gamma, beta []float32, eps float32) (mean, invStd float32) {
	checkLen(dst, src)
	n := len(src)
	if len(gamma) < n || (beta != nil && len(beta) < n) {
		panic("vec: LayerNorm parameters shorter than the row")
	}
	if n == 0 {
		return 0, 0
	}
	mu := sum(src) / float32(n)
	v := sqDev(src, mu) / float32(n)
	is := 1 / sqrt32(v+eps)
	if beta != nil {
		beta = beta[:n]
	}
	normAffine(dst[:n], src, gamma[:n], beta, mu, is)
	return mu, is
}
