package gemm

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/zoo-dev/zoo/backends/cpu/internal/simd"
	"github.com/zoo-dev/zoo/backends/cpu/internal/workpool"
)

// MaxInt8K is the longest k an int8 product accepts: every sum of k products of a u8
// (0-255) and an s8 (−128-127) value, and every zero-point correction of one, fits in an
// int32 for k ≤ 65793 (255·128·65793 < 2³¹), so the int32 accumulation is exact.
const MaxInt8K = 65793

// int8Fn is the signature of the int8 micro-kernels (int8_amd64.s, generated; int8TileTwin
// is their Go statement). kg is the number of k steps (groups of int8Kernel.group values of
// k); a addresses the first of the tile's rows of prepared A (u8, or u16 when the kernel's
// wideA, row stride lda bytes, 4 bytes per k step); b the kernel's packed panel of op(B); c
// the top-left element of the tile (row stride ldc elements). flags: int8Raw stores the
// int32 sums into c as int32; int8Store stores dequant(sum) without reading C; int8Accum
// stores fma(beta, C, dequant(sum)). rs and rz are the tile's row scales and zero points,
// cs and csum the tile's column scales and column sums of op(B), bias the tile's biases
// (nr of each; unused with int8Raw, bias read only with int8Bias).
type int8Fn func(kg int, a *uint8, b *int8, c *float32, ldc, flags int, beta float32, lda int, rs *float32, rz *int32, cs *float32, csum *int32, bias *float32)

// The store modes of the int8 micro-kernels, and the two bits that add an epilogue to the
// dequantizing ones: the value becomes dequant(sum) + bias (rounded apart, as a graph's Add
// of the bias and vec.BiasAct round it), then max(0, value) + 0 (vec's Relu: NaN kept, −0
// made +0), before the store mode applies.
const (
	int8Store = 0 // C = dequant(acc)
	int8Accum = 1 // C = fma(beta, C, dequant(acc))
	int8Raw   = 2 // C (as int32) = acc
	int8Bias  = 4 // dequant adds the column's bias
	int8Relu  = 8 // then ReLU
)

// int8Kernel is one int8 micro-kernel set: direct kernels of every height from 1 to mr
// over nr columns, with the B layout it reads.
type int8Kernel struct {
	name   string // the Int8Path name: "amx-int8", "vnni512", "avx-vnni", "avx2"
	mr, nr int
	// group is the number of consecutive k values one 32-bit lane of a k step holds: 4
	// (VPDPBUSD: four u8·s8 products per lane) or 2 (VPMADDWD on values widened to int16).
	// A panel of op(B) holds, per k step s and column j, the group values k = s·group + t
	// at byte (s·nr + j)·group + t, zero past k and past the last column.
	group int
	// wideA: A's rows are prepared as u16 (the AVX2 kernel broadcasts a pair of them);
	// otherwise as u8. Either way a k step of A is 4 bytes.
	wideA bool
	// narrow: the kernels take 7-bit operands, weights in −63…63 and A in 0…128, so that
	// an AVX2 kernel may add two k steps' VPMADDUBSW pair sums in int16 (four products, at
	// most 4·128·63 = 32256 in magnitude) without saturating: asmgen's madd7.
	narrow bool
	// own, where set, is the kernel set PackInt8 packs the weights it quantizes itself for
	// (the avx2 path's narrow set, 1.6× the exact one's speed on Zen 5); operands given as
	// int8 (PackBInt8Quantized, PackInt8Activation) stay on this one, exact for any int8.
	own *int8Kernel
	fns []int8Fn // fns[h-1] computes h rows; nil for a path with a place but no kernels
	// tiles, where set, computes mt tiles of h rows one under the other over np whole
	// panels side by side (panel: a panel's bytes) in one call: the AMX kernel, whose tile
	// configuration costs as much as a tile's products.
	tiles func(h, kg int, a *uint8, b *int8, c *float32, ldc, flags int, beta float32, lda int, rs *float32, rz *int32, cs *float32, csum *int32, bias *float32, mt, np, panel int)
	// hasCPU says whether the CPU has the instructions (needs names them), level is the
	// kernel level (simd) they belong to: ZOO_CPU=avx2 turns the AVX-512 path off with the
	// rest of AVX-512.
	hasCPU func() bool
	needs  string
	level  simd.Level
	// refused, where set, says why the OS keeps the CPU's instructions off ("" when it
	// does not): the AMX tiles need Linux's leave. It is asked only where hasCPU holds.
	refused func() string
}

// actMax is the largest value of a quantized row of A the kernels take: 255, or 127 for
// narrow ones (nil: the pure-Go path, 255). The row quantization scales the row's range to
// it; its two roundings can reach actMax+1, which the narrow kernels' bound allows for.
func (k *int8Kernel) actMax() int32 {
	if k != nil && k.narrow {
		return 127
	}
	return 255
}

// weightMax is the largest magnitude of a weight PackInt8 quantizes for k: 127, or 63 for
// narrow kernels (nil: the pure-Go path, 127).
func (k *int8Kernel) weightMax() float64 {
	if k != nil && k.narrow {
		return 63
	}
	return 127
}

// int8KernelSets returns every kernel set: int8Kernels and the sets PackInt8 uses in their
// place (own), for the tests and benchmarks that cover them all.
func int8KernelSets() []*int8Kernel {
	var all []*int8Kernel
	for _, k := range int8Kernels {
		all = append(all, k)
		if k.own != nil {
			all = append(all, k.own)
		}
	}
	return all
}

// cpuOK reports whether this CPU and build can run the kernels, at whatever level.
func (k *int8Kernel) cpuOK() bool {
	return k.fns != nil && k.hasCPU() && (k.refused == nil || k.refused() == "")
}

// ok reports whether the kernels run here at the kernel level in use.
func (k *int8Kernel) ok() bool { return k.cpuOK() && simd.Current() >= k.level }

// why says in one line why ok is false.
func (k *int8Kernel) why() string {
	switch {
	case k.fns == nil:
		return "the " + k.name + " kernels are not implemented"
	case !k.hasCPU():
		return "this CPU lacks " + k.needs + " (the " + k.name + " path)"
	case k.refused != nil && k.refused() != "":
		return k.refused() + " (the " + k.name + " path)"
	}
	return "the " + k.name + " kernels need the " + k.level.String() + " kernel level, and " + simd.Current().String() + " is in use (ZOO_CPU)"
}

// int8Forced is the path SetInt8Path chose ("" for the best).
var int8Forced atomic.Pointer[string]

// int8Active returns the int8 kernel set products packed now use: the one SetInt8Path
// chose when it runs here, else the first of int8Kernels that runs, else nil (pure Go).
func int8Active() *int8Kernel {
	if f := int8Forced.Load(); f != nil && *f != "" {
		if *f == "generic" {
			return nil
		}
		for _, k := range int8Kernels {
			if k.name == *f && k.ok() {
				return k
			}
		}
	}
	for _, k := range int8Kernels {
		if k.ok() {
			return k
		}
	}
	return nil
}

// Int8Path names the int8 kernels products with a PackBInt8 operand packed now run on:
// "amx-int8" (AMX TDPBUSD on tiles), "vnni512" (AVX512-VNNI VPDPBUSD on zmm), "avx-vnni"
// (the VEX VPDPBUSD on ymm), "avx2" (VPMADDUBSW on 7-bit operands for the weights
// PackBInt8 quantizes, operands widened to int16 and VPMADDWD for int8 ones given) or
// "generic" (pure Go, every GOARCH). reason is "" on the best path this CPU has, else one
// line saying what keeps the better one off (the CPU, the OS, the purego tag, the kernel
// level chosen through simd.Set or ZOO_CPU, or SetInt8Path). Every path computes exact
// int32 sums; on operands of the same form (Int8WeightBits) their results are bitwise
// equal.
func Int8Path() (path, reason string) {
	act := int8Active()
	best := "generic"
	var bestWhy string
	for _, k := range int8Kernels {
		if k.ok() {
			best = k.name
			break
		}
		if bestWhy == "" && k.fns != nil {
			bestWhy = k.why()
		}
	}
	if best == "generic" && bestWhy == "" {
		bestWhy = "this build has no int8 kernels (they are amd64 assembly; another GOARCH or the purego tag)"
	}
	path = "generic"
	if act != nil {
		path = act.name
	}
	switch {
	case path != best:
		return path, "int8 path " + path + " chosen (ZOO_INT8, SetInt8Path); this CPU runs " + best
	case bestWhy != "":
		return path, bestWhy
	}
	return path, ""
}

// Int8WeightBits returns the bits PackBInt8 quantizes weights to on the named int8 path:
// 8 (±127), or 7 (±63, with rows of A quantized to 0…127) on "avx2", whose 8-bit products
// an AVX2 CPU without VNNI cannot run as fast without saturating. It returns 0 for a name
// that is not a path. Weights given as int8 (PackBInt8Quantized) keep their 8 bits on
// every path.
func Int8WeightBits(path string) int {
	if path == "generic" {
		return 8
	}
	for _, k := range int8Kernels {
		if k.name == path {
			if k.own != nil && k.own.narrow {
				return 7
			}
			return 8
		}
	}
	return 0
}

// Int8Paths returns the int8 paths this CPU and build can run at the kernel level in use,
// best first; "generic" is last.
func Int8Paths() []string {
	var out []string
	for _, k := range int8Kernels {
		if k.ok() {
			out = append(out, k.name)
		}
	}
	return append(out, "generic")
}

// SetInt8Path makes products packed from now on use the named int8 path ("amx-int8",
// "vnni512", "avx-vnni", "avx2", "generic"; "" or "auto" for the best), so tests and
// benchmarks can run every path the CPU has (the kernel level, simd.Set, picks the best
// path below it; this picks among those). It changes nothing and returns an error when the name is
// unknown or the path cannot run here. Operands already packed keep their path.
func SetInt8Path(name string) error {
	switch name {
	case "", "auto":
		int8Forced.Store(nil)
		return nil
	case "generic":
		int8Forced.Store(&name)
		return nil
	}
	for _, k := range int8Kernels {
		if k.name != name {
			continue
		}
		if !k.ok() {
			return fmt.Errorf("int8 path %s cannot run here: %s", name, k.why())
		}
		int8Forced.Store(&name)
		return nil
	}
	return fmt.Errorf("unknown int8 path %q; want one of auto, amx-int8, vnni512, avx-vnni, avx2, generic", name)
}

// int8Data is the int8 side of a PackedB made by PackInt8 or PackBInt8Quantized.
type int8Data struct {
	kern *int8Kernel // nil: pure Go, q holds op(B) row-major (k×n)
	q    []int8      // panels in kern's layout (see int8Kernel.group), or row-major
	kg   int         // k steps per panel: ceil(k/group)
	np   int         // panels: ceil(n/nr)
	// scale and colSum hold each column's scale and the sum of its int8 values, zero-padded
	// to np·nr so that a kernel may read whole panels of them.
	scale  []float32
	colSum []int32
	// bias, zero-padded like scale, and relu are the epilogue the kernels' store applies
	// (SetInt8Epilogue); nil and false for none.
	bias []float32
	relu bool
	// PackInt8Activation's scratch: per-column inverse scales and magnitudes, a row.
	inv  []float32
	bits []uint32
	tmp  []int8
}

// PackBInt8 quantizes op(B) (as PackB takes it: k×n, or n×k when transB) to int8 for the
// int8 products, see PackInt8. It panics, like PackB, when b is too short, and when k
// exceeds MaxInt8K.
func PackBInt8(transB bool, k, n int, b []float32, ldb int) *PackedB {
	pb := new(PackedB)
	pb.PackInt8(transB, k, n, b, ldb)
	return pb
}

// PackInt8 is PackBInt8 into pb, reusing its storage where it can. Each column j of op(B)
// is quantized once, symmetrically: scale_j = max|column|/W (0 for a zero column, NaN
// when the column holds a NaN or an infinity), q = round-to-even(w/scale_j) clamped to
// ±W. W is 127, except on the avx2 path, whose own kernels take 7-bit operands (W = 63,
// and rows of A quantized to 0…127 instead of 0…255): a precision traded for 1.6× the
// speed of the exact 8-bit kernels, which an AVX2 CPU without VNNI cannot give at 8 bits
// without saturating. Products with pb (SgemmPacked and its variants) then quantize the
// rows of A and run in int8 (see the int8 section of the package comment). pb must not be
// in use by another goroutine. It panics when b is too short for the shape or k exceeds
// MaxInt8K.
func (pb *PackedB) PackInt8(transB bool, k, n int, b []float32, ldb int) {
	checkPackB("PackBInt8", transB, k, n, b, ldb)
	checkInt8K("PackBInt8", k)
	// Both passes walk b in memory order: down a row of B, which is op(B)'s column when
	// transB and its row otherwise.
	scales := make([]float32, n)
	bad := make([]bool, n)
	rows, cols := k, n
	if transB {
		rows, cols = n, k
	}
	for r := 0; r < rows; r++ {
		for c, v := range b[r*ldb : r*ldb+cols] {
			j := c
			if transB {
				j = r
			}
			if v != v || math.IsInf(float64(v), 0) {
				bad[j] = true
			}
			scales[j] = max(scales[j], abs32(v))
		}
	}
	kern := int8Active()
	if kern != nil && kern.own != nil && kern.own.ok() {
		kern = kern.own
	}
	wmax := kern.weightMax()
	div := make([]float64, n)
	for j, amax := range scales {
		switch {
		case bad[j]:
			scales[j] = float32(math.NaN())
		case amax != 0:
			scales[j] = amax / float32(wmax)
			div[j] = float64(scales[j])
		}
	}
	q := make([]int8, k*n)
	for r := 0; r < rows; r++ {
		for c, v := range b[r*ldb : r*ldb+cols] {
			p, j := r, c
			if transB {
				p, j = c, r
			}
			if div[j] != 0 {
				q[p*n+j] = int8(max(-wmax, min(wmax, math.RoundToEven(float64(v)/div[j]))))
			}
		}
	}
	pb.setInt8(kern, k, n, q, scales)
}

func abs32(x float32) float32 { return math.Float32frombits(math.Float32bits(x) &^ (1 << 31)) }

// PackBInt8Quantized packs weights that are already int8: q is op(B), k×n row-major, and
// scales holds n per-column scales or one for the whole tensor (op(B) ≈ q·scale), the
// symmetric form (zero point 0) ONNX Runtime's quantize_dynamic writes. An asymmetric
// weight zero point is not taken: the products would need every row sum of A as well;
// a caller holding such weights dequantizes them and packs the floats with PackBInt8
// (which quantizes them again, symmetrically). GemmU8S8 computes with q exactly; the float
// products dequantize with the scales. It panics when q or scales has the wrong length or
// k exceeds MaxInt8K.
func PackBInt8Quantized(k, n int, q []int8, scales []float32) *PackedB {
	if k < 0 || n < 0 || len(q) != k*n || (len(scales) != n && len(scales) != 1) {
		panic(fmt.Sprintf("gemm: PackBInt8Quantized: %d×%d weights need %d values and 1 or %d scales, have %d and %d", k, n, k*n, n, len(q), len(scales)))
	}
	checkInt8K("PackBInt8Quantized", k)
	s := scales
	if len(scales) == 1 {
		s = make([]float32, n)
		for j := range s {
			s[j] = scales[0]
		}
	}
	pb := new(PackedB)
	pb.setInt8(int8Active(), k, n, q, s)
	return pb
}

// WithInt8Scales returns an operand that shares pb's int8 values (and their column sums)
// with other column scales: scales holds n values, or one for every column. Products with
// it dequantize by the new scales; pb is unchanged. Layers that share a weight matrix
// under different scales (ONNX files that quantize one weight once and scale it per use)
// keep one copy of the values. It panics when pb is not int8 or scales has the wrong length.
func (pb *PackedB) WithInt8Scales(scales []float32) *PackedB {
	if pb == nil || pb.i8 == nil || (len(scales) != pb.n && len(scales) != 1) {
		panic("gemm: WithInt8Scales: not an int8 operand, or not 1 or n scales")
	}
	d := *pb.i8
	d.scale = make([]float32, len(pb.i8.scale))
	for j := range pb.n {
		d.scale[j] = scales[min(j, len(scales)-1)]
	}
	return &PackedB{k: pb.k, n: pb.n, i8: &d}
}

func checkInt8K(fn string, k int) {
	if k > MaxInt8K {
		panic(fmt.Sprintf("gemm: %s: k = %d exceeds MaxInt8K (%d): the int32 sums could overflow", fn, k, MaxInt8K))
	}
}

// SetInt8Epilogue makes every product with pb's int8 weights add bias (one value per
// column, or nil) and then, with relu, apply ReLU as its micro-kernels store each tile,
// instead of a pass over the finished block. The values are those of the pass, bit for bit
// (the bias added after the dequantization, rounded apart). It returns an error, changing
// nothing, when pb is not int8 or bias is neither nil nor of pb's n values.
func (pb *PackedB) SetInt8Epilogue(bias []float32, relu bool) error {
	if pb.i8 == nil {
		return errors.New("gemm: SetInt8Epilogue: the operand is not int8")
	}
	if bias != nil && len(bias) != pb.n {
		return fmt.Errorf("gemm: SetInt8Epilogue: %d biases for %d columns", len(bias), pb.n)
	}
	d := pb.i8
	d.bias = nil
	if bias != nil {
		d.bias = make([]float32, len(d.scale))
		copy(d.bias, bias)
	}
	d.relu = relu
	return nil
}

// biasFrom returns d's biases from column col on, nil without them.
func (d *int8Data) biasFrom(col int) []float32 {
	if d.bias == nil {
		return nil
	}
	return d.bias[col:]
}

// biasAt returns the kernels' bias argument for the columns from col: the biases, or, with
// none, any valid address (the kernels read it only under int8Bias).
func (d *int8Data) biasAt(col int) *float32 {
	if d.bias == nil {
		return &d.scale[col]
	}
	return &d.bias[col]
}

// flags returns the kernels' epilogue bits for d's SetInt8Epilogue.
func (d *int8Data) flags() int {
	f := 0
	if d.bias != nil {
		f |= int8Bias
	}
	if d.relu {
		f |= int8Relu
	}
	return f
}

// Int8 reports whether pb holds int8 weights (PackBInt8, PackBInt8Quantized).
func (pb *PackedB) Int8() bool { return pb.i8 != nil }

// Int8Path names the int8 path pb was packed for ("" when pb is not int8).
func (pb *PackedB) Int8Path() string {
	switch {
	case pb.i8 == nil:
		return ""
	case pb.i8.kern == nil:
		return "generic"
	}
	return pb.i8.kern.name
}

// Int8SameForm reports whether pb and o are int8 operands packed for the same kernels, so
// that rows of A prepared for one (Int8Rows.Prepare) serve products with the other. Two
// operands of one Int8Path may differ in form: on "avx2", PackBInt8's 7-bit weights and
// PackBInt8Quantized's 8-bit ones take differently quantized rows.
func (pb *PackedB) Int8SameForm(o *PackedB) bool {
	return pb != nil && o != nil && pb.i8 != nil && o.i8 != nil && pb.i8.kern == o.i8.kern
}

// Bytes returns the memory pb's packed operand holds, in bytes: what a compiled program
// keeps of a weight matrix.
func (pb *PackedB) Bytes() int {
	if pb.i8 != nil {
		return len(pb.i8.q) + 4*len(pb.i8.scale) + 4*len(pb.i8.colSum) + 4*len(pb.i8.bias)
	}
	return 4 * len(pb.data)
}

// setInt8 makes pb the int8 operand of the row-major k×n int8 matrix q with column scales
// s, laid out for kern (nil: row-major, for the pure-Go path).
func (pb *PackedB) setInt8(kern *int8Kernel, k, n int, q []int8, s []float32) {
	d := &int8Data{kern: kern}
	nr, g := 1, 1
	if kern != nil {
		nr, g = kern.nr, kern.group
	}
	d.kg = (k + g - 1) / g
	d.np = (n + nr - 1) / nr
	d.scale = make([]float32, d.np*nr)
	d.colSum = make([]int32, d.np*nr)
	copy(d.scale, s)
	for p := 0; p < k; p++ {
		for j, v := range q[p*n : p*n+n] {
			d.colSum[j] += int32(v)
		}
	}
	if kern == nil {
		d.q = append([]int8(nil), q...)
	} else {
		d.q = make([]int8, d.np*d.kg*nr*g)
		for jp := 0; jp < d.np; jp++ {
			panel := d.q[jp*d.kg*nr*g:]
			for p := 0; p < k; p++ {
				s, t := p/g, p%g
				row := q[p*n:]
				for j := 0; j < nr && jp*nr+j < n; j++ {
					panel[(s*nr+j)*g+t] = row[jp*nr+j]
				}
			}
		}
	}
	*pb = PackedB{k: k, n: n, i8: d, data: pb.data[:0]}
}

// at returns op(B)'s int8 value at (p, j) (n: op(B)'s columns).
func (d *int8Data) at(p, j int, n int) int8 {
	if d.kern == nil {
		return d.q[p*n+j]
	}
	nr, g := d.kern.nr, d.kern.group
	return d.q[(j/nr)*d.kg*nr*g+((p/g)*nr+j%nr)*g+p%g]
}

// unpackInt8 is Unpack for an int8 operand: op(B) as q·scale, k×n row-major.
func (pb *PackedB) unpackInt8() []float32 {
	out := make([]float32, pb.k*pb.n)
	d := pb.i8
	for p := 0; p < pb.k; p++ {
		for j := 0; j < pb.n; j++ {
			out[p*pb.n+j] = float32(d.at(p, j, pb.n)) * d.scale[j]
		}
	}
	return out
}

// Int8Values returns op(B)'s int8 values (k×n row-major) and its n column scales, as
// PackBInt8 quantized them or PackBInt8Quantized was given them: what an exporter writes.
// It returns nils when pb is not int8.
func (pb *PackedB) Int8Values() (q []int8, scales []float32) {
	d := pb.i8
	if d == nil {
		return nil, nil
	}
	q = make([]int8, pb.k*pb.n)
	for p := 0; p < pb.k; p++ {
		for j := 0; j < pb.n; j++ {
			q[p*pb.n+j] = d.at(p, j, pb.n)
		}
	}
	return q, append([]float32(nil), d.scale[:pb.n]...)
}

// Quantization of A, a row at a time (the layers' activations): asymmetric u8 with the row's
// own scale and zero point, the range widened to hold 0 (so that 0 is exact, as in ONNX's
// DynamicQuantizeLinear):
//
//	lo = min(0, min_p x_p), hi = max(0, max_p x_p)
//	s = float32((hi − lo)/Q), inv = float32(1/s), z = clamp(rne(−lo·inv), 0, Q)
//	q_p = clamp(rne(float32(x_p·inv)) + z, 0, 255)
//
// with Q = 255, or 127 for the narrow kernels (actMax): there rne(x_p·inv) + z is at most
// (hi − lo)·inv + 1 < Q + 1.01, so q_p ≤ 128, the bound the narrow kernels are exact for.
// (rne rounds to the nearest integer, ties to even, as VCVTPS2DQ does.) A row of zeros, or
// so small that inv overflows, gets s = 1, z = 0 and q = 0 (its values are then taken as 0);
// a row holding a NaN or an infinity gets s = NaN and q = 0, so its products are NaN.

// rowQuant returns the scale, the inverse scale and the zero point of a row whose smallest
// and largest values are lo and hi, for a largest quantized value qmax (actMax); bad marks a
// NaN or infinity among them.
func rowQuant(lo, hi float32, bad bool, qmax int32) (s, inv float32, z int32) {
	if bad || lo != lo || hi != hi || math.IsInf(float64(lo), 0) || math.IsInf(float64(hi), 0) {
		return float32(math.NaN()), 0, 0
	}
	lo, hi = min(lo, 0), max(hi, 0)
	s = float32((float64(hi) - float64(lo)) / float64(qmax))
	inv = float32(1 / float64(s))
	if s == 0 || math.IsInf(float64(inv), 0) {
		return 1, 1, 0
	}
	// −lo·inv lies in [0, qmax·(1 + 2⁻²³)]: adding and subtracting 1.5·2⁵² rounds it to an
	// integer, to nearest even, as math.RoundToEven would, without its call.
	const magic = 1.5 * (1 << 52)
	zf := (float64(-lo*inv) + magic) - magic
	return s, inv, int32(max(0, min(float64(qmax), zf)))
}

// quantOne is q_p for value x of a row with inverse scale inv and zero point z. x·inv is
// clamped to ±512 first (the vector code's VMINPS; a row's own values lie within ±256, but
// QuantizeUnit takes any), so that adding and subtracting 1.5·2²³ rounds it to an integer,
// to nearest even, exactly: math.RoundToEven without its call. A NaN gives 0, as its
// conversion to INT_MIN does in the vector code.
func quantOne(x, inv float32, z int32) int32 {
	r, ok := rne512(float32(x * inv))
	if !ok {
		return 0
	}
	return max(0, min(255, r+z))
}

// rne512 is v clamped to ±512 and rounded to an integer, to nearest even, by adding and
// subtracting 1.5·2²³ (exact there); ok is false for a NaN v.
func rne512(v float32) (r int32, ok bool) {
	const magic = 1.5 * (1 << 23)
	switch {
	case v != v:
		return 0, false
	case v > 512:
		v = 512
	case v < -512:
		v = -512
	}
	return int32(float32(v+magic) - magic), true
}

// quantizeRowsGo is the pure-Go statement of the row quantization: rows rows of alpha·A (a,
// row stride lda, k values) into dst (row stride ldq bytes; u16 values when wide, else u8;
// zero past k up to the row's padded length kpad) with qmax steps, their scales, times
// alpha, into rs and their zero points into rz.
func quantizeRowsGo(dst []byte, ldq int, wide bool, qmax int32, a []float32, lda, rows, k, kpad int, alpha float32, rs []float32, rz []int32) {
	for i := 0; i < rows; i++ {
		row := a[i*lda : i*lda+k]
		lo, hi, bad := rowRange(row)
		s, inv, z := rowQuant(lo, hi, bad, qmax)
		rs[i], rz[i] = float32(alpha*s), z
		d := dst[i*ldq:]
		if s != s {
			inv, z = 0, 0
		}
		for p, x := range row {
			q := quantOne(x, inv, z)
			if s != s {
				q = 0
			}
			if wide {
				d[2*p], d[2*p+1] = byte(q), 0
			} else {
				d[p] = byte(q)
			}
		}
		if wide {
			clear(d[2*k : 2*kpad])
		} else {
			clear(d[k:kpad])
		}
	}
}

// Range0 returns min(0, min x) and max(0, max x), NaNs passed over: the range ONNX's
// DynamicQuantizeLinear quantizes x over, found in vector code where the CPU has AVX2. A
// −0 never replaces the 0 the range starts from.
func Range0(x []float32) (lo, hi float32) {
	if lo, hi, ok := rangeFast(x); ok {
		return lo, hi
	}
	for _, v := range x {
		if v < lo {
			lo = v
		}
		if v > hi {
			hi = v
		}
	}
	return lo, hi
}

// QuantizeTensorU8 sets dst[p] = clamp(rne(x[p]/scale) + zp, 0, 255), 0 where the quotient
// is NaN: ONNX's DynamicQuantizeLinear (and QuantizeLinear to uint8) of each value once its
// scale and zero point are known, with the true division ONNX specifies (a product by 1/scale
// would round some ties the other way), in vector code where the CPU has AVX2. The caller
// keeps scale away from 0 (the operator's own answer for a zero scale is all zeros). It
// panics when dst is shorter than x or zp is outside 0..255.
func QuantizeTensorU8(dst []uint8, x []float32, scale float32, zp int32) {
	if len(dst) < len(x) || zp < 0 || zp > 255 {
		panic(fmt.Sprintf("gemm: QuantizeTensorU8: %d values into %d, zero point %d", len(x), len(dst), zp))
	}
	done := quantizeDivFast(dst, x, scale, zp)
	for p := done; p < len(x); p++ {
		dst[p] = quantDivOne(x[p], scale, zp)
	}
}

// quantDivOne is QuantizeTensorU8 of one value: the quotient clamped to 512 first (it
// saturates to 255 from there), then rounded half to even by adding and subtracting 1.5·2²³
// (exact below 2²²), the zero point added and the sum clamped to 0..255. A NaN quotient
// gives 0, as its conversion to INT_MIN in the vector code does.
func quantDivOne(x, scale float32, zp int32) uint8 {
	r, ok := rne512(x / scale)
	if !ok {
		return 0
	}
	return uint8(max(0, min(255, r+zp)))
}

// rowRange returns the smallest and largest values of row and whether it holds a NaN or
// an infinity.
func rowRange(row []float32) (lo, hi float32, bad bool) {
	var nan float32
	for _, x := range row {
		lo, hi = min(lo, x), max(hi, x)
		nan += x - x
	}
	return lo, hi, nan != 0
}

// dequant is the float result of an int32 sum: float32(v − z·colsum) · (rs·cs), each
// operation rounded once to float32, as the kernels' store does.
func dequant(acc, z, colSum int32, rs, cs float32) float32 {
	v := acc - z*colSum
	sc := float32(rs * cs)
	return float32(float32(v) * sc)
}

// int8TileTwin is the Go statement of the int8 micro-kernels: the exact int32 sums of the
// h×nr tile (row i from a[i·lda:], kern's layouts, kg k steps) into acc (h×nr).
func int8TileTwin(kern *int8Kernel, h, kg int, a []byte, lda int, b []int8, acc []int32) {
	nr, g := kern.nr, kern.group
	clear(acc[:h*nr])
	for i := 0; i < h; i++ {
		row := acc[i*nr : i*nr+nr]
		for s := 0; s < kg; s++ {
			for t := 0; t < g; t++ {
				var av int32
				if kern.wideA {
					av = int32(uint16(a[i*lda+4*s+2*t]) | uint16(a[i*lda+4*s+2*t+1])<<8)
				} else {
					av = int32(a[i*lda+4*s+t])
				}
				bs := b[s*nr*g:]
				for j := range row {
					row[j] += av * int32(bs[j*g+t])
				}
			}
		}
	}
}

// int8StoreTwin is the Go statement of the kernels' store: acc (h×nr) into the tile of c
// at row stride ldc, under flags (int8Raw: c's bits become the int32 sums).
func int8StoreTwin(h, nr int, acc []int32, c []float32, ldc, flags int, beta float32, rs []float32, rz []int32, cs []float32, csum []int32, bias []float32) {
	for i := 0; i < h; i++ {
		for j := 0; j < nr; j++ {
			cv := &c[i*ldc+j]
			if flags == int8Raw {
				*cv = math.Float32frombits(uint32(acc[i*nr+j]))
				continue
			}
			d := dequant(acc[i*nr+j], rz[i], csum[j], rs[i], cs[j])
			if flags&int8Bias != 0 {
				d = float32(d + bias[j])
			}
			if flags&int8Relu != 0 && !(d > 0) && d == d {
				d = 0 // max(0, d) + 0: negatives and −0 become +0, a NaN stays
			}
			if flags&int8Accum == 0 {
				*cv = d
			} else {
				*cv = fma32(beta, *cv, d)
			}
		}
	}
}

// int8Work holds one goroutine's buffers for the int8 products.
type int8Work struct {
	aq      []byte // prepared rows of A
	rs      []float32
	rz      []int32
	acc     []int32 // the pure-Go path's row sums
	scratch [maxTile]float32
}

var int8Works = sync.Pool{New: func() any { return new(int8Work) }}

func growBytes(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}

// int8Blocking returns the row stride (bytes) of prepared A rows of k values for kern and
// the row block height: blocks of about 256 KiB stay in L2 while every panel of op(B)
// passes over them.
func int8Blocking(kern *int8Kernel, k int) (ldq, kpad, mc int) {
	if kern == nil {
		return k, k, 64
	}
	g := kern.group
	kpad = (k + g - 1) / g * g
	ldq = kpad
	if kern.wideA {
		ldq = 2 * kpad
	}
	ldq = (ldq + 63) &^ 63
	if ldq%1024 == 0 {
		// Rows 1, 2 or 4 KiB apart would put every row's line of a k step in one L1 set.
		ldq += 64
	}
	mc = max(kern.mr, min(16*kern.mr, (256<<10)/ldq/kern.mr*kern.mr))
	return ldq, kpad, mc
}

// int8NC is the column block after which the epilogue runs on the finished block.
const int8NC = 512

// sgemmInt8 is SgemmPackedEpilogueAt's body for an int8 pb (arguments already checked):
// row blocks of A are quantized (quantizeRows), then every panel of the columns [j0,
// j0+n) runs over them, the epilogue following each finished block.
func sgemmInt8(pb *PackedB, m, j0, n int, alpha float32, a []float32, lda int, beta float32, c []float32, ldc int, epi Epilogue) {
	d, k := pb.i8, pb.k
	ws := int8Works.Get().(*int8Work)
	defer int8Works.Put(ws)
	ldq, kpad, mc := int8Blocking(d.kern, k)
	mc = min(mc, m)
	ws.aq = growBytes(ws.aq, mc*ldq)
	ws.rs, ws.rz = grow(ws.rs, mc), growInt32(ws.rz, mc)
	for ic := 0; ic < m; ic += mc {
		mcb := min(mc, m-ic)
		quantizeRows(d.kern, ws.aq, ldq, a[ic*lda:], lda, mcb, k, kpad, alpha, ws.rs, ws.rz)
		int8RowBlock(pb, ws, quantRows{q: ws.aq, ld: ldq, rs: ws.rs, rz: ws.rz}, ic, mcb, j0, n, beta, c, ldc, epi)
	}
}

// quantRows addresses prepared rows of A: row i at q[i·ld:], its scale and zero point at
// rs[i] and rz[i]. Rows that multiply only op(B)'s rows [k0, k0+k) (SgemmInt8RowsKAt) set k;
// k 0 means all of them.
type quantRows struct {
	q     []byte
	ld    int
	rs    []float32
	rz    []int32
	k0, k int
}

// int8RowBlock computes rows [ic, ic+mcb) of the product (their prepared rows in r, from
// r's first) with the columns [j0, j0+n) of pb into c (row ic at c[ic·ldc:], column j0 at
// c[0]), then beta and the epilogue per block of int8NC columns.
func int8RowBlock(pb *PackedB, ws *int8Work, r quantRows, ic, mcb, j0, n int, beta float32, c []float32, ldc int, epi Epilogue) {
	flags := int8Store | pb.i8.flags()
	if beta != 0 {
		flags |= int8Accum
	}
	for jc := 0; jc < n; jc += int8NC {
		ncb := min(int8NC, n-jc)
		cb := c[ic*ldc+jc:]
		if pb.i8.kern == nil {
			int8GoBlock(pb, ws, r, mcb, j0+jc, ncb, cb, ldc, flags, beta)
		} else {
			int8Block(pb.i8, ws, r, mcb, j0+jc, ncb, unsafe.Pointer(&cb[0]), ldc, flags, beta)
		}
		if epi != nil {
			epi(ic, ic+mcb, j0+jc, j0+jc+ncb)
		}
	}
}

func growInt32(b []int32, n int) []int32 {
	if cap(b) < n {
		return make([]int32, n)
	}
	return b[:n]
}

// int8Block runs kern over the first mcb prepared rows of r and the ncb columns from col
// (a multiple of nr), storing into the tile at c (row stride ldc elements, float32 or int32
// by flags).
func int8Block(d *int8Data, ws *int8Work, r quantRows, mcb, col, ncb int, c unsafe.Pointer, ldc, flags int, beta float32) {
	kern := d.kern
	mr, nr, g := kern.mr, kern.nr, kern.group
	panelBytes := d.kg * nr * g
	kg, koff := d.kg, 0 // the k steps r's rows multiply, and where they start in a panel
	if r.k > 0 {
		kg, koff = (r.k+g-1)/g, r.k0/g*nr*g
	}
	jr0 := 0
	if kern.tiles != nil && ncb >= nr {
		np := ncb / nr
		bp := &d.q[col/nr*panelBytes+koff]
		bias := d.biasAt(col)
		// The whole tiles of mr rows in one call, then the rows left in another.
		for ir := 0; ir < mcb; {
			h, mt := mr, mcb/mr
			if mt == 0 || ir > 0 {
				h, mt = mcb-ir, 1
			}
			kern.tiles(h, kg, &r.q[ir*r.ld], bp, (*float32)(unsafe.Add(c, 4*ir*ldc)), ldc, flags, beta, r.ld, &r.rs[ir], &r.rz[ir], &d.scale[col], &d.colSum[col], bias, mt, np, panelBytes)
			ir += h * mt
		}
		jr0 = np * nr
	}
	for jr := jr0; jr < ncb; jr += nr {
		nrb := min(nr, ncb-jr)
		cj := col + jr
		bp := &d.q[cj/nr*panelBytes+koff]
		bias := d.biasAt(cj)
		for ir := 0; ir < mcb; ir += mr {
			h := min(mr, mcb-ir)
			fn := kern.fns[h-1]
			if nrb == nr {
				fn(kg, &r.q[ir*r.ld], bp, (*float32)(unsafe.Add(c, 4*(ir*ldc+jr))), ldc, flags, beta, r.ld, &r.rs[ir], &r.rz[ir], &d.scale[cj], &d.colSum[cj], bias)
				continue
			}
			// A partial panel: the whole tile into scratch (op(B)'s padding is zero), then
			// its columns merged with the update the kernel would have made.
			sf := flags &^ int8Accum
			fn(kg, &r.q[ir*r.ld], bp, &ws.scratch[0], nr, sf, 0, r.ld, &r.rs[ir], &r.rz[ir], &d.scale[cj], &d.colSum[cj], bias)
			for i := 0; i < h; i++ {
				src := ws.scratch[i*nr : i*nr+nrb]
				dst := unsafe.Slice((*float32)(unsafe.Add(c, 4*((ir+i)*ldc+jr))), nrb)
				if flags&int8Accum != 0 {
					for j, s := range src {
						dst[j] = fma32(beta, dst[j], s)
					}
				} else {
					copy(dst, src)
				}
			}
		}
	}
}

// int8GoBlock is int8Block on the pure-Go path (pb's int8 values row-major): the sums of
// mcb prepared u8 rows with the ncb columns from col, then the same store (int8Raw: the
// int32 sums into c's bits).
func int8GoBlock(pb *PackedB, ws *int8Work, r quantRows, mcb, col, ncb int, c []float32, ldc, flags int, beta float32) {
	d, k, k0, n := pb.i8, pb.k, 0, pb.n
	if r.k > 0 {
		k, k0 = r.k, r.k0
	}
	ws.acc = growInt32(ws.acc, ncb)
	acc := ws.acc
	for i := 0; i < mcb; i++ {
		clear(acc)
		arow := r.q[i*r.ld : i*r.ld+k]
		for p, av := range arow {
			if av == 0 {
				continue
			}
			axpyInt8(acc, int32(av), d.q[(k0+p)*n+col:(k0+p)*n+col+ncb])
		}
		int8StoreTwin(1, ncb, acc, c[i*ldc:], ldc, flags, beta, r.rs[i:], r.rz[i:], d.scale[col:], d.colSum[col:], d.biasFrom(col))
	}
}

// axpyInt8 adds a·b[j] to acc[j] (len(acc) = len(b)), four at a time: the pure-Go path's
// inner loop, written so the compiler drops the bounds checks.
func axpyInt8(acc []int32, a int32, b []int8) {
	acc = acc[:len(b)]
	j := 0
	for ; j+4 <= len(b); j += 4 {
		bb, aa := b[j:j+4:j+4], acc[j:j+4:j+4]
		aa[0] += a * int32(bb[0])
		aa[1] += a * int32(bb[1])
		aa[2] += a * int32(bb[2])
		aa[3] += a * int32(bb[3])
	}
	for ; j < len(b); j++ {
		acc[j] += a * int32(b[j])
	}
}

// quantizeRows quantizes rows rows of alpha·A into dst as kern reads them (see
// quantizeRowsGo): with the vector routines where kern has them, else in Go.
func quantizeRows(kern *int8Kernel, dst []byte, ldq int, a []float32, lda, rows, k, kpad int, alpha float32, rs []float32, rz []int32) {
	wide := kern != nil && kern.wideA
	if kern != nil && quantizeRowsFast(dst, ldq, wide, kern.actMax(), a, lda, rows, k, kpad, alpha, rs, rz) {
		return
	}
	quantizeRowsGo(dst, ldq, wide, kern.actMax(), a, lda, rows, k, kpad, alpha, rs, rz)
}

// GemmU8S8 computes the exact int32 product C = A·op(B) of an m×k u8 matrix A (row stride
// lda) and pb's int8 values (k×n; pb from PackBInt8Quantized, or PackBInt8), as ONNX
// MatMulInteger defines it with zero points 0: every sum exact (k ≤ MaxInt8K), no
// saturation. A caller with an A zero point za subtracts za·Σ_p op(B)[p, j] itself. On the
// avx2 path a PackBInt8 operand (7-bit) goes the pure-Go way: its kernels take values of A
// up to 128 only. It runs on the calling goroutine and panics when pb is not int8, k is not
// pb's or a slice is too short.
func GemmU8S8(m, n, k int, a []uint8, lda int, pb *PackedB, c []int32, ldc int) {
	GemmU8S8Parallel(1, m, n, k, a, lda, pb, c, ldc)
}

// GemmU8S8Parallel is GemmU8S8 split by rows over up to threads goroutines; the sums are
// exact, so the result does not depend on threads.
func GemmU8S8Parallel(threads, m, n, k int, a []uint8, lda int, pb *PackedB, c []int32, ldc int) {
	if pb == nil || pb.i8 == nil || m < 0 || n != pb.n || k != pb.k {
		panic(fmt.Sprintf("gemm: GemmU8S8: shape %d×%d does not match the int8 operand", k, n))
	}
	if m == 0 || n == 0 {
		return
	}
	checkMat("A", m, k, len(a), lda)
	checkMat("C", m, n, len(c), ldc)
	if k == 0 {
		for i := 0; i < m; i++ {
			clear(c[i*ldc : i*ldc+n])
		}
		return
	}
	parts := 1
	if threads > 1 && 2*float64(m)*float64(n)*float64(k) >= parallelMinFlops {
		parts = min(threads, (m+15)/16)
	}
	workpool.Tasks(threads, parts, func(t int) {
		lo, hi := t*m/parts, (t+1)*m/parts
		if lo < hi {
			gemmU8S8Rows(pb, hi-lo, a[lo*lda:], lda, c[lo*ldc:], ldc)
		}
	})
}

// gemmU8S8Rows is GemmU8S8 on the calling goroutine.
func gemmU8S8Rows(pb *PackedB, m int, a []uint8, lda int, c []int32, ldc int) {
	d, k, n := pb.i8, pb.k, pb.n
	if d.kern != nil && d.kern.narrow {
		// The narrow kernels take A up to 128 only: any u8 goes the pure-Go way, on the
		// same values laid out for it.
		q, s := pb.Int8Values()
		var g PackedB
		g.setInt8(nil, k, n, q, s)
		gemmU8S8Rows(&g, m, a, lda, c, ldc)
		return
	}
	ws := int8Works.Get().(*int8Work)
	defer int8Works.Put(ws)
	ldq, kpad, mc := int8Blocking(d.kern, k)
	mc = min(mc, m)
	ws.aq = growBytes(ws.aq, mc*ldq)
	// The kernels take row scales even when they store raw sums.
	ws.rs, ws.rz = grow(ws.rs, mc), growInt32(ws.rz, mc)
	cf := unsafe.Slice((*float32)(unsafe.Pointer(&c[0])), len(c))
	for ic := 0; ic < m; ic += mc {
		mcb := min(mc, m-ic)
		for i := 0; i < mcb; i++ {
			row, dst := a[(ic+i)*lda:(ic+i)*lda+k], ws.aq[i*ldq:]
			if d.kern != nil && d.kern.wideA {
				for p, v := range row {
					dst[2*p], dst[2*p+1] = v, 0
				}
				clear(dst[2*k : 2*kpad])
			} else {
				copy(dst, row)
				clear(dst[k:kpad])
			}
		}
		r := quantRows{q: ws.aq, ld: ldq, rs: ws.rs, rz: ws.rz}
		for jc := 0; jc < n; jc += int8NC {
			ncb := min(int8NC, n-jc)
			cb := cf[ic*ldc+jc:]
			if d.kern == nil {
				int8GoBlock(pb, ws, r, mcb, jc, ncb, cb, ldc, int8Raw, 0)
			} else {
				int8Block(d, ws, r, mcb, jc, ncb, unsafe.Pointer(&cb[0]), ldc, int8Raw, 0)
			}
		}
	}
}

// Int8Rows holds the rows of an A quantized once for several int8 products with operands
// packed for the same int8 path (QuantizeRows), so that products sharing their A (the
// column tiles of one product, the Q, K and V projections of one input) do not each
// quantize it again. The zero value is ready to use; it is not safe for concurrent
// Prepare, but QuantizeRange on disjoint ranges and the products may run concurrently.
type Int8Rows struct {
	kern    *int8Kernel
	m, k    int
	ld      int
	kpad    int
	alpha   float32
	q       []byte
	rs      []float32
	rz      []int32
	prepped bool
}

// Prepare sizes r for m rows of k values quantized for products with int8 operands packed
// like pb (the same Int8Path), scaled by alpha, reusing r's storage. It panics when pb is
// not int8.
func (r *Int8Rows) Prepare(pb *PackedB, m int, alpha float32) {
	if pb == nil || pb.i8 == nil || m < 0 {
		panic("gemm: Int8Rows.Prepare: not an int8 operand")
	}
	r.PrepareK(pb, m, pb.k, alpha)
}

// PrepareK is Prepare for rows of k values, which multiply a window of k of pb's rows
// (SgemmInt8RowsKAt). It panics when pb is not int8 or k is negative.
func (r *Int8Rows) PrepareK(pb *PackedB, m, k int, alpha float32) {
	if pb == nil || pb.i8 == nil || m < 0 || k < 0 {
		panic("gemm: Int8Rows.PrepareK: not an int8 operand, or a negative size")
	}
	ldq, kpad, _ := int8Blocking(pb.i8.kern, k)
	r.kern, r.m, r.k, r.ld, r.kpad, r.alpha = pb.i8.kern, m, k, ldq, kpad, alpha
	r.q = growBytes(r.q, m*ldq)
	r.rs, r.rz = grow(r.rs, m), growInt32(r.rz, m)
	r.prepped = true
}

// QuantizeRange quantizes rows [i0, i1) of A (a addresses row 0, stride lda, Prepare's k
// values per row) into r, as SgemmPackedEpilogueAt quantizes them (bitwise the same).
// Calls on disjoint ranges may run concurrently. It panics when r is not prepared, the
// range is outside it or a is too short.
func (r *Int8Rows) QuantizeRange(i0, i1 int, a []float32, lda int) {
	if !r.prepped || i0 < 0 || i1 > r.m || i0 > i1 {
		panic(fmt.Sprintf("gemm: Int8Rows.QuantizeRange: rows [%d, %d) of %d prepared", i0, i1, r.m))
	}
	if i0 == i1 || r.k == 0 {
		return
	}
	checkMat("A", i1, r.k, len(a), lda)
	quantizeRows(r.kern, r.q[i0*r.ld:], r.ld, a[i0*lda:], lda, i1-i0, r.k, r.kpad, r.alpha, r.rs[i0:], r.rz[i0:])
}

// QuantizeTensorRange quantizes rows [i0, i1) of A (a addresses row 0, stride lda,
// Prepare's k values per row) into r with one scale and zero point for all of them, as
// QuantizeTensorU8 does (all zeros when scale is 0): ONNX's per-tensor DynamicQuantizeLinear
// once the caller has its scale and zero point (Range0 gives the range). The products then
// compute float32(float32(Σ_p (q_ip − zp)·b_pj) · float32(scale·s_j)) with the operand's
// column scales s_j: the graph's Cast of MatMulInteger's sum times its Mul(x_scale,
// w_scale), rounded as the graph rounds them. Calls on disjoint ranges may run
// concurrently. It panics when r is not prepared, the range is outside it, a is too short
// or zp is not in 0..255, and when r was prepared for an operand of PackInt8's 7-bit form
// (the avx2 path), which ONNX's u8 values would overflow: pack such weights with
// PackBInt8Quantized.
func (r *Int8Rows) QuantizeTensorRange(i0, i1 int, a []float32, lda int, scale float32, zp int32) {
	if !r.prepped || i0 < 0 || i1 > r.m || i0 > i1 || zp < 0 || zp > 255 || r.kern.actMax() != 255 {
		panic(fmt.Sprintf("gemm: Int8Rows.QuantizeTensorRange: rows [%d, %d) of %d prepared, zero point %d, for 8-bit operands %v", i0, i1, r.m, zp, r.kern.actMax() == 255))
	}
	if i0 == i1 || r.k == 0 {
		return
	}
	checkMat("A", i1, r.k, len(a), lda)
	wide := r.kern != nil && r.kern.wideA
	var tmp []uint8
	if wide {
		tmp = make([]uint8, r.k)
	}
	for i := i0; i < i1; i++ {
		row, dst := a[i*lda:i*lda+r.k], r.q[i*r.ld:]
		q := dst[:r.k]
		if wide {
			q = tmp
		}
		if scale == 0 {
			clear(q)
		} else {
			QuantizeTensorU8(q, row, scale, zp)
		}
		if wide {
			for p, v := range q {
				dst[2*p], dst[2*p+1] = v, 0
			}
			clear(dst[2*r.k : 2*r.kpad])
		} else {
			clear(dst[r.k:r.kpad])
		}
		r.rs[i], r.rz[i] = scale, zp
	}
}

// QuantizeUnit quantizes row i of A (values in [0, 1]: probabilities) into r with the
// fixed scale 1/Q and zero point 0, q = clamp(rne(x·Q), 0, Q), so no pass finds the
// row's range first: Q is 255, or 127 for an operand of PackInt8's 7-bit form. row holds
// the row's first values, up to Prepare's k; the rest are 0 (a causal block's keys past its
// query). A value outside [0, 1] is clamped; a NaN becomes 0.
// Calls for different rows may run concurrently. It panics when r is not prepared, i is
// outside it or row is longer than k.
func (r *Int8Rows) QuantizeUnit(i int, row []float32) {
	if !r.prepped || i < 0 || i >= r.m || len(row) > r.k {
		panic(fmt.Sprintf("gemm: Int8Rows.QuantizeUnit: row %d of %d prepared, %d values of %d", i, r.m, len(row), r.k))
	}
	d := r.q[i*r.ld:]
	wide := r.kern != nil && r.kern.wideA
	qm := r.kern.actMax()
	r.rs[i], r.rz[i] = float32(r.alpha*(1/float32(qm))), 0
	if r.kern != nil && qm == 255 && len(row) > 0 && quantRowWith(d, wide, row, r.kpad, 255, 0) {
		return
	}
	for p, x := range row {
		q := min(quantOne(x, float32(qm), 0), qm)
		if wide {
			d[2*p], d[2*p+1] = byte(q), 0
		} else {
			d[p] = byte(q)
		}
	}
	if wide {
		clear(d[2*len(row) : 2*r.kpad])
	} else {
		clear(d[len(row):r.kpad])
	}
}

// ScaleRow multiplies the scale of prepared row i by c, so that every product of the row
// comes out multiplied by c (rounded once more, in the dequantization's scale): attention
// divides its rows by their softmax sums this way instead of in a pass over the results.
// It panics when row i is not prepared.
func (r *Int8Rows) ScaleRow(i int, c float32) {
	if !r.prepped || i < 0 || i >= r.m {
		panic(fmt.Sprintf("gemm: Int8Rows.ScaleRow: row %d of %d prepared", i, r.m))
	}
	r.rs[i] = float32(r.rs[i] * c)
}

// UnitRow gives row i of A to a caller that quantizes it itself at QuantizeUnit's fixed
// scale (vec.ExpSumU8 computes a block's probabilities straight into it): it sets the row's
// scale and zero point as QuantizeUnit does, zeroes the values from n on, and returns the n
// bytes the caller must fill with clamp(rne(x·255), 0, 255). It returns nil, changing
// nothing, when r's rows are not u8 in 0…255 (the avx2 path widens them to u16, or takes
// 7-bit ones: use QuantizeUnit). It panics when r is not prepared, i is outside it or n
// exceeds k.
func (r *Int8Rows) UnitRow(i, n int) []byte {
	if !r.prepped || i < 0 || i >= r.m || n < 0 || n > r.k {
		panic(fmt.Sprintf("gemm: Int8Rows.UnitRow: row %d of %d prepared, %d values of %d", i, r.m, n, r.k))
	}
	if r.kern != nil && (r.kern.wideA || r.kern.narrow) {
		return nil
	}
	d := r.q[i*r.ld : i*r.ld+r.kpad]
	r.rs[i], r.rz[i] = float32(r.alpha*float32(1.0/255)), 0
	clear(d[n:])
	return d[:n:n]
}

// SgemmInt8RowsAt is SgemmPackedEpilogueAt with A already quantized: rows [i0, i0+m) of
// r (all quantized) times the columns [j0, j1) of pb, into c (element (i, j) of the result
// at c[(i−i0)·ldc + j−j0]), then beta·C and epi, which receives rows counted from i0 and
// the product's column numbers. The result equals SgemmPackedEpilogueAt's on the same rows
// bit for bit. It panics when pb was packed for another path or k than r, or the ranges
// or c are bad.
func SgemmInt8RowsAt(r *Int8Rows, i0, m, j0, j1 int, pb *PackedB, beta float32, c []float32, ldc int, epi Epilogue) {
	if pb == nil || pb.i8 == nil || !r.prepped || pb.i8.kern != r.kern || pb.k != r.k || i0 < 0 || m < 0 || i0+m > r.m ||
		j0 < 0 || j1 > pb.n || j0 > j1 || j0%pb.ColAlign() != 0 {
		panic(fmt.Sprintf("gemm: SgemmInt8RowsAt: rows [%d, %d) of %d, columns [%d, %d): bad ranges or an operand of another path or k", i0, i0+m, r.m, j0, j1))
	}
	int8RowsProduct(r, i0, m, j0, j1, 0, false, pb, beta, c, ldc, epi)
}

// int8RowsProduct is the body of SgemmInt8RowsAt (window false) and SgemmInt8RowsKAt
// (window: r's rows times pb's rows from k0), arguments checked.
func int8RowsProduct(r *Int8Rows, i0, m, j0, j1, k0 int, window bool, pb *PackedB, beta float32, c []float32, ldc int, epi Epilogue) {
	n := j1 - j0
	if m == 0 || n == 0 {
		return
	}
	checkMat("C", m, n, len(c), ldc)
	if r.k == 0 {
		scaleC(m, n, beta, c, ldc)
		if epi != nil {
			epi(0, m, j0, j1)
		}
		return
	}
	ws := int8Works.Get().(*int8Work)
	defer int8Works.Put(ws)
	_, _, mc := int8Blocking(r.kern, r.k)
	for ic := 0; ic < m; ic += mc {
		mcb := min(mc, m-ic)
		rows := quantRows{q: r.q[(i0+ic)*r.ld:], ld: r.ld, rs: r.rs[i0+ic:], rz: r.rz[i0+ic:]}
		if window {
			rows.k0, rows.k = k0, r.k
		}
		int8RowBlock(pb, ws, rows, 0, mcb, j0, n, beta, c[ic*ldc:], ldc, shiftEpi(epi, ic))
	}
}

// SgemmInt8RowsKAt is SgemmInt8RowsAt over a window of pb's rows: rows [i0, i0+m) of r, of
// PrepareK's k values, times rows [k0, k0+k) and columns [j0, j1) of pb. Attention over
// sliding windows of keys packs V once for all windows and multiplies each window's
// probabilities this way. r's rows must have zero point 0 (QuantizeUnit, UnitRow), since
// pb's column sums are over all its rows; the result is then bitwise SgemmInt8RowsAt's
// with r's rows extended by zeros to pb's k. It panics when a row's zero point is not 0,
// k0 is not a multiple of pb's k step (ColAlign's counterpart along k, Int8KStep), the window
// passes pb's rows, or as SgemmInt8RowsAt does.
func SgemmInt8RowsKAt(r *Int8Rows, i0, m, j0, j1, k0 int, pb *PackedB, beta float32, c []float32, ldc int, epi Epilogue) {
	if pb == nil || pb.i8 == nil || !r.prepped || pb.i8.kern != r.kern || i0 < 0 || m < 0 || i0+m > r.m ||
		j0 < 0 || j1 > pb.n || j0 > j1 || j0%pb.ColAlign() != 0 || k0 < 0 || k0%pb.Int8KStep() != 0 || k0+r.kpad > pb.i8.kg*pb.Int8KStep() || k0+r.k > pb.k {
		panic(fmt.Sprintf("gemm: SgemmInt8RowsKAt: rows [%d, %d) of %d, columns [%d, %d), k from %d: bad ranges or an operand of another path", i0, i0+m, r.m, j0, j1, k0))
	}
	for _, z := range r.rz[i0 : i0+m] {
		if z != 0 {
			panic("gemm: SgemmInt8RowsKAt: a row with a zero point")
		}
	}
	int8RowsProduct(r, i0, m, j0, j1, k0, true, pb, beta, c, ldc, epi)
}

// Int8KStep returns the k values one step of pb's int8 kernels takes (1 on the pure-Go
// path); a window of pb's rows (SgemmInt8RowsKAt) must start at a multiple of it. It is 1
// for an operand that is not int8.
func (pb *PackedB) Int8KStep() int {
	if pb.i8 == nil || pb.i8.kern == nil {
		return 1
	}
	return pb.i8.kern.group
}

// Int8RowBlock returns how many rows of A a product with pb quantizes and multiplies at a
// time (about 256 KiB of quantized rows, which stay in L2 while every panel of pb passes
// over them): a caller that quantizes rows itself (Int8Rows) and wants them in cache for its
// products quantizes this many at a time. It returns 0 when pb is not int8.
func (pb *PackedB) Int8RowBlock() int {
	if pb == nil || pb.i8 == nil {
		return 0
	}
	_, _, mc := int8Blocking(pb.i8.kern, pb.k)
	return mc
}

// shiftEpi returns epi with its rows moved by di (nil stays nil).
func shiftEpi(epi Epilogue, di int) Epilogue {
	if epi == nil || di == 0 {
		return epi
	}
	return func(i0, i1, j0, j1 int) { epi(i0+di, i1+di, j0, j1) }
}
