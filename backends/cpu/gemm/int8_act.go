package gemm

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/zoo-dev/zoo/backends/cpu/vec"
)

// PackInt8Activation packs op(B) as int8 for products whose B changes on every call, such
// as attention's keys and values. It uses PackInt8's symmetric per-column form: scale_j =
// max|column j|/127, 0 for a zero column and NaN for a column that holds a NaN or an
// infinity, whose values are then 0. Each value is rounded as
//
//	q = clamp(rne(float32(v·inv_j)), −127, 127),  inv_j = float32(127/max|column j|)
//
// which is a product by the inverse where PackInt8 divides exactly. A value whose quotient
// lies within a float32 rounding of a half can therefore differ from PackInt8's by one; the
// scales and the layout are PackInt8's. pb's storage is reused from call to call, so a
// kernel keeps one PackedB per operand. pb must not be in use by another goroutine. It
// panics when b is too short for the shape or k exceeds MaxInt8K.
func (pb *PackedB) PackInt8Activation(transB bool, k, n int, b []float32, ldb int) {
	pb.packInt8Activation(transB, k, n, b, ldb, nil)
}

// PackInt8ActivationSum is PackInt8Activation(false, k, n, b, ldb) that also adds B's rows
// into sums (n values), in row order with vec.Add, in the pass that finds the scales: the
// row sums linear attention needs of its keys' features, without a pass of their own over
// B. It panics as PackInt8Activation does, and when sums is shorter than n.
func (pb *PackedB) PackInt8ActivationSum(k, n int, b []float32, ldb int, sums []float32) {
	if len(sums) < n {
		panic(fmt.Sprintf("gemm: PackInt8ActivationSum: %d sums for %d columns", len(sums), n))
	}
	pb.packInt8Activation(false, k, n, b, ldb, sums[:n])
}

func (pb *PackedB) packInt8Activation(transB bool, k, n int, b []float32, ldb int, sums []float32) {
	checkPackB("PackInt8Activation", transB, k, n, b, ldb)
	checkInt8K("PackInt8Activation", k)
	d := pb.i8
	if d == nil {
		d = new(int8Data)
	}
	kern := int8Active()
	nr, g := 1, 1
	if kern != nil {
		nr, g = kern.nr, kern.group
	}
	d.kern = kern
	d.bias, d.relu = nil, false
	d.kg, d.np = (k+g-1)/g, (n+nr-1)/nr
	d.q = growInt8(d.q, d.np*d.kg*nr*g)
	d.scale = grow(d.scale, d.np*nr)
	d.colSum = growInt32(d.colSum, d.np*nr)
	d.inv = grow(d.inv, n)
	clear(d.q)
	clear(d.scale)
	clear(d.colSum)
	if transB {
		packActCols(d, k, n, b, ldb)
	} else {
		packActRows(d, k, n, b, ldb, sums)
	}
	*pb = PackedB{k: k, n: n, i8: d, data: pb.data[:0]}
}

// Prefetch asks for the first width values of rows rows of x (row stride ld) to be brought
// into the cache ahead of their use, without waiting for them: for loops over rows too far
// apart for the hardware prefetchers (a head's rows in a (batch, n, heads·d) tensor). Rows
// past x's end are left out; on a CPU without the instruction it does nothing.
func Prefetch(x []float32, ld, rows, width int) { prefetchRows(x, ld, rows, width) }

// actAhead is how many rows ahead of the one it reads PackInt8Activation asks for: rows
// of one head in a (batch, n, heads·d) tensor are far apart, and each would otherwise wait
// on memory (measured on the base encoder's keys and values, 512 rows 2 KiB apart).
const actAhead = 16

// absMax returns the largest of the bits of |x[p]|: the bits of the largest magnitude, or
// bits ≥ 0x7f800000 when x holds a NaN or an infinity.
func absMax(x []float32) uint32 {
	bits, done := absMaxFast(x)
	return max(bits, absMaxGo(x[done:]))
}

// absMaxGo is the Go statement of absMax.
func absMaxGo(x []float32) uint32 {
	var m uint32
	for _, v := range x {
		m = max(m, math.Float32bits(v)&0x7fffffff)
	}
	return m
}

// absMaxCols sets acc[j] = max(acc[j], the bits of |x[j]|) (len(acc) ≥ len(x)).
func absMaxCols(acc []uint32, x []float32) {
	done := absMaxColsFast(acc, x)
	absMaxColsGo(acc[done:], x[done:])
}

// absMaxColsGo is the Go statement of absMaxCols.
func absMaxColsGo(acc []uint32, x []float32) {
	acc = acc[:len(x)]
	for j, v := range x {
		acc[j] = max(acc[j], math.Float32bits(v)&0x7fffffff)
	}
}

// quantS8Row sets dst[p] = quantS8(x[p], inv[p]), or quantS8(x[p], one) when inv is nil,
// and returns Σ dst[p] when inv is nil. Its callers keep |x·inv| below 127.5 (inv from
// actScale); beyond that, and for NaN, the vector code gives −128 where quantS8 gives −127.
func quantS8Row(dst []int8, x []float32, one float32, inv []float32) (sum int32) {
	dst = dst[:len(x)]
	p, sum := quantS8Fast(dst, x, one, inv)
	for ; p < len(x); p++ {
		if inv != nil {
			one = inv[p]
		}
		dst[p] = quantS8(x[p], one)
		sum += int32(dst[p])
	}
	if inv != nil {
		sum = 0
	}
	return sum
}

// actScale returns the scale and the inverse scale of a column whose largest magnitude has
// the bits amax (see absMax). inv 0 makes every value of the column 0: so it is for a zero
// column, for one holding a NaN or an infinity (scale NaN), and for one whose largest
// magnitude is below 127/MaxFloat32 (about 3.7e-37; scale 0), whose inverse would overflow.
func actScale(amax uint32) (s, inv float32) {
	if amax >= 0x7f800000 {
		return float32(math.NaN()), 0
	}
	a := math.Float32frombits(amax)
	inv = float32(127 / a)
	if a == 0 || math.IsInf(float64(inv), 0) {
		return 0, 0
	}
	return a / 127, inv
}

// quantS8 is q for value v of a column with inverse scale inv; |v·inv| < 127.5, so adding
// and subtracting 1.5·2²³ rounds it to nearest even exactly, as VCVTPS2DQ does.
func quantS8(v, inv float32) int8 {
	const magic = 1.5 * (1 << 23)
	r := int32(float32(float32(v*inv)+magic) - magic)
	return int8(max(-127, min(127, r)))
}

// packActCols packs op(B) = Bᵀ (b holds op(B)'s columns as its rows): each column is
// contiguous, so its scale comes from one pass over it and its values go, a k step (group
// values) at a time, to their place in the column's panel.
func packActCols(d *int8Data, k, n int, b []float32, ldb int) {
	nr, g := 1, 1
	if d.kern != nil {
		nr, g = d.kern.nr, d.kern.group
	}
	step := nr * g
	var tmp [256]int8
	prefetchRows(b, ldb, actAhead, k)
	for j := 0; j < n; j++ {
		if j%actAhead == 0 && j+actAhead < n {
			prefetchRows(b[(j+actAhead)*ldb:], ldb, min(actAhead, n-j-actAhead), k)
		}
		col := b[j*ldb : j*ldb+k]
		s, inv := actScale(absMax(col))
		d.scale[j] = s
		if inv == 0 {
			continue
		}
		var sum int32
		var panel []int8
		if d.kern != nil {
			panel = d.q[(j/nr)*d.kg*step+(j%nr)*g:]
		}
		for p0 := 0; p0 < k; p0 += len(tmp) {
			c := min(k-p0, len(tmp))
			q := tmp[:c]
			sum += quantS8Row(q, col[p0:p0+c], inv, nil)
			switch {
			case d.kern == nil:
				for p, v := range q {
					d.q[(p0+p)*n+j] = v
				}
			case g == 4 && c%4 == 0:
				// a k step is 4 consecutive values, so one 32-bit move (p0 is a multiple of 4)
				for p := 0; p < c; p += 4 {
					o := (p0 + p) / 4 * step
					*(*uint32)(unsafe.Pointer(&panel[o])) = *(*uint32)(unsafe.Pointer(&q[p]))
				}
			default:
				for p, v := range q {
					pp := p0 + p
					panel[pp/g*step+pp%g] = v
				}
			}
		}
		d.colSum[j] = sum
	}
}

// packActRows packs op(B) = B (k×n, rows contiguous): one pass finds every column's scale
// (and adds the rows into sums unless it is nil), a second quantizes the rows, a row at a
// time, into the k step it belongs to.
func packActRows(d *int8Data, k, n int, b []float32, ldb int, sums []float32) {
	nr, g := 1, 1
	if d.kern != nil {
		nr, g = d.kern.nr, d.kern.group
	}
	d.bits = growUint32(d.bits, n)
	amax, inv := d.bits[:n], d.inv[:n]
	clear(amax)
	prefetchRows(b, ldb, actAhead, n)
	for p := 0; p < k; p++ {
		if p%actAhead == 0 && p+actAhead < k {
			prefetchRows(b[(p+actAhead)*ldb:], ldb, min(actAhead, k-p-actAhead), n)
		}
		absMaxCols(amax, b[p*ldb:p*ldb+n])
		if sums != nil {
			vec.Add(sums, sums, b[p*ldb:p*ldb+n])
		}
	}
	bad := false
	for j, a := range amax {
		d.scale[j], inv[j] = actScale(a)
		bad = bad || d.scale[j] != d.scale[j]
	}
	d.tmp = growInt8(d.tmp, n)
	q := d.tmp[:n]
	panelBytes := d.kg * nr * g
	p := 0
	if g == 4 && !bad {
		// whole k steps straight from the rows into the panels
		for ; p+4 <= k; p += 4 {
			done := packRows4Fast(d.q[p*nr:], b[p*ldb:], ldb, inv, d.colSum, n, nr, panelBytes)
			if done == 0 {
				break
			}
			for t := range 4 {
				packActRow(d, q, b[(p+t)*ldb:(p+t)*ldb+n], inv, p+t, done, nr, g, panelBytes)
			}
		}
	}
	for ; p < k; p++ {
		row := b[p*ldb : p*ldb+n]
		quantS8Row(q, row, 0, inv)
		if bad {
			// a product by inv 0 is NaN for an infinite or NaN value: those columns are 0
			for j, v := range inv {
				if v == 0 {
					q[j] = 0
				}
			}
		}
		if d.kern == nil {
			copy(d.q[p*n:p*n+n], q)
			for j, v := range q {
				d.colSum[j] += int32(v)
			}
			continue
		}
		packActRow(d, q, row, inv, p, 0, nr, g, panelBytes)
	}
}

// packActRow puts row p of op(B), its columns from j0 on, into their panels: q holds the
// row's quantized values from packActRows unless j0 > 0, when this quantizes them itself.
func packActRow(d *int8Data, q []int8, row []float32, inv []float32, p, j0, nr, g, panelBytes int) {
	n := len(row)
	if j0 == n {
		return
	}
	if j0 > 0 {
		for j := j0; j < n; j++ {
			q[j] = quantS8(row[j], inv[j])
		}
	}
	off := (p/g)*nr*g + p%g
	for j := j0; j < n; {
		end := min(n, (j/nr+1)*nr)
		panel := d.q[(j/nr)*panelBytes+off+(j%nr)*g:]
		cs := d.colSum[j:end]
		for jj, v := range q[j:end] {
			panel[jj*g] = v
			cs[jj] += int32(v)
		}
		j = end
	}
}

func growInt8(b []int8, n int) []int8 {
	if cap(b) < n {
		return make([]int8, n)
	}
	return b[:n]
}

func growUint32(b []uint32, n int) []uint32 {
	if cap(b) < n {
		return make([]uint32, n)
	}
	return b[:n]
}
