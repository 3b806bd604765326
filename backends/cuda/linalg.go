//go:build cgo && linux

package cuda

import (
	"fmt"
	"math"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// gemm computes, for each of batch problems, C = alpha·op(A)·op(B) + beta·C in row-major
// terms (A is m×k after op, B k×n, C m×n) by calling cuBLAS on the transposed problem.
// sa and sb are the batch strides (0 to reuse one matrix). At Precision "bf16", A and B are
// rounded to bf16 first (bf16Of) and cuBLAS multiplies bf16 with fp32 accumulation: the
// products' inputs are rounded as the precision promises (cuBLAS's FAST_16BF compute type
// on fp32 operands may run TF32 instead, and did on an H200 with cuBLAS 13.1).
func (r *run) gemm(a, b *dtensor, c uint64, transA, transB bool, m, n, k, batch int, sa, sb int64, alpha, beta float32) error {
	for _, v := range []int{m, n, k, batch} {
		if v > math.MaxInt32 {
			return fmt.Errorf("matrix dimension %d exceeds cuBLAS's 32-bit limit", v)
		}
	}
	lda, ldb := k, n
	if transA {
		lda = m
	}
	if transB {
		ldb = k
	}
	if err := r.p.ensureBLAS(); err != nil {
		return err
	}
	pa, pb, bf16, compute := a.buf.ptr, b.buf.ptr, false, 0
	if r.p.precision == "bf16" {
		var err error
		if pa, err = r.bf16Of(a); err != nil {
			return err
		}
		if pb, err = r.bf16Of(b); err != nil {
			return err
		}
		bf16, compute = true, cublasCompute32F
	}
	return cublasGemm(r.p.blas, gemmArgs{
		transA: transB, transB: transA, m: n, n: m, k: k, alpha: alpha, beta: beta,
		a: pb, lda: ldb, sa: sb, b: pa, ldb: lda, sb: sa, c: c, ldc: n, sc: int64(m) * int64(n),
		batch: batch, computeType: compute, bf16: bf16,
	})
}

// bf16Of returns a device copy of t's elements rounded to bf16: for a weight, made once
// and kept for the program's life; for an activation, made once per buffer and kept until
// the buffer goes back to the pool (releaseBuf), so the products that read one activation
// (a layer's Q, K and V projections) round it once. A buffer is never written after a step
// has read it, which is what makes the copy safe to share.
func (r *run) bf16Of(t *dtensor) (uint64, error) {
	n := t.n()
	if t.buf.const_ {
		if p, ok := r.p.bf16Weights[t.buf]; ok {
			return p, nil
		}
	} else if c, ok := r.bf16Acts[t.buf]; ok && c.n == n {
		return c.buf.ptr, nil
	}
	var dst uint64
	var buf *dbuf
	if t.buf.const_ {
		p, err := cuMalloc(max(2*n, 2))
		if err != nil {
			return 0, err
		}
		dst = p
	} else {
		b, err := r.p.pool.get(max(2*n, 2))
		if err != nil {
			return 0, err
		}
		buf, dst = b, b.ptr
	}
	vec, work := 0, n
	if n%4 == 0 {
		vec, work = 1, n/4
	}
	a := (&kargs{}).ptr(dst).ptr(t.buf.ptr).i64(int64(n)).i32(vec)
	if err := r.launch("zoo_to_bf16", gridFor(work), 256, a); err != nil {
		if buf != nil {
			r.releaseBuf(buf)
		} else {
			cuFree(dst)
		}
		return 0, err
	}
	if buf == nil {
		if r.p.bf16Weights == nil {
			r.p.bf16Weights = map[*dbuf]uint64{}
		}
		r.p.bf16Weights[t.buf] = dst
		return dst, nil
	}
	if old, ok := r.bf16Acts[t.buf]; ok {
		r.releaseBuf(old.buf) // a copy of another length (a view): keep the newest
	}
	if r.bf16Acts == nil {
		r.bf16Acts = map[*dbuf]bf16Copy{}
	}
	r.bf16Acts[t.buf] = bf16Copy{buf: buf, n: n}
	return dst, nil
}

// bf16Copy is an activation's bf16 copy: its buffer and the number of elements rounded.
type bf16Copy struct {
	buf *dbuf
	n   int
}

func (r *run) fill(y *dtensor, v float32) error {
	a := (&kargs{}).ptr(y.buf.ptr).i64(int64(y.n())).f32(v)
	return r.launch("zoo_fill", gridFor(y.n()), 256, a)
}

func opMatMul(r *run, n *graph.Node, in []value) ([]value, error) {
	a, err := r.dev(in[0], 0, false)
	if err != nil {
		return nil, err
	}
	b, err := r.dev(in[1], 1, false)
	if err != nil {
		return nil, err
	}
	as, bs := a.shape, b.shape
	if len(as) == 0 || len(bs) == 0 {
		return nil, fmt.Errorf("MatMul needs inputs of rank 1 or more, got %s and %s", tensor.ShapeString(as), tensor.ShapeString(bs))
	}
	dropM, dropN := len(as) == 1, len(bs) == 1
	if dropM {
		as = []int{1, as[0]}
	}
	if dropN {
		bs = []int{bs[0], 1}
	}
	m, k := as[len(as)-2], as[len(as)-1]
	k2, nn := bs[len(bs)-2], bs[len(bs)-1]
	if k != k2 {
		return nil, fmt.Errorf("inner dimensions differ: %s × %s", tensor.ShapeString(a.shape), tensor.ShapeString(b.shape))
	}
	ba, bb := as[:len(as)-2], bs[:len(bs)-2]
	batchShape, err := graph.BroadcastShapes(ba, bb)
	if err != nil {
		return nil, fmt.Errorf("batch dimensions: %w", err)
	}
	nb := graph.NumElements(batchShape)
	outShape := append(append([]int(nil), batchShape...), m, nn)
	final := append([]int(nil), batchShape...)
	if !dropM {
		final = append(final, m)
	}
	if !dropN {
		final = append(final, nn)
	}
	y, err := r.alloc(outShape)
	if err != nil {
		return nil, err
	}
	y.shape = final
	fail := func(err error) ([]value, error) { r.releaseBuf(y.buf); return nil, err }
	if y.n() == 0 {
		return one(y), nil
	}
	if k == 0 {
		if err := r.fill(y, 0); err != nil {
			return fail(err)
		}
		return one(y), nil
	}
	na, nbb := graph.NumElements(ba), graph.NumElements(bb)
	sameA := na == nb && sameTail(ba, batchShape)
	sameB := nbb == nb && sameTail(bb, batchShape)
	switch {
	case nbb == 1 && sameA:
		// A weight shared by every batch: one GEMM over all rows.
		err = r.gemm(a, b, y.buf.ptr, false, false, nb*m, nn, k, 1, 0, 0, 1, 0)
	case (na == 1 || sameA) && (nbb == 1 || sameB):
		sa, sb := int64(m*k), int64(k*nn)
		if na == 1 {
			sa = 0
		}
		if nbb == 1 {
			sb = 0
		}
		err = r.gemm(a, b, y.buf.ptr, false, false, m, nn, k, nb, sa, sb, 1, 0)
	default:
		// General broadcasting: materialise both operands at the full batch shape.
		fullA := append(append([]int(nil), batchShape...), m, k)
		fullB := append(append([]int(nil), batchShape...), k, nn)
		ea, err := r.gather(a, 0, fullA, broadcastStrides(as, fullA))
		if err != nil {
			return fail(err)
		}
		r.temp(ea.buf)
		eb, err := r.gather(b, 0, fullB, broadcastStrides(bs, fullB))
		if err != nil {
			return fail(err)
		}
		r.temp(eb.buf)
		err = r.gemm(ea, eb, y.buf.ptr, false, false, m, nn, k, nb, int64(m*k), int64(k*nn), 1, 0)
	}
	if err != nil {
		return fail(err)
	}
	return one(y), nil
}

// sameTail reports whether shape, left-padded with ones, equals full.
func sameTail(shape, full []int) bool {
	off := len(full) - len(shape)
	for i, d := range full {
		s := 1
		if i >= off {
			s = shape[i-off]
		}
		if s != d {
			return false
		}
	}
	return true
}

func opGemm(r *run, n *graph.Node, in []value) ([]value, error) {
	a, err := r.dev(in[0], 0, false)
	if err != nil {
		return nil, err
	}
	b, err := r.dev(in[1], 1, false)
	if err != nil {
		return nil, err
	}
	if len(a.shape) != 2 || len(b.shape) != 2 {
		return nil, fmt.Errorf("Gemm needs 2-D inputs, got %s and %s", tensor.ShapeString(a.shape), tensor.ShapeString(b.shape))
	}
	tA, tB := n.Int("transA", 0) != 0, n.Int("transB", 0) != 0
	m, k := a.shape[0], a.shape[1]
	if tA {
		m, k = k, m
	}
	k2, nn := b.shape[0], b.shape[1]
	if tB {
		k2, nn = nn, k2
	}
	if k != k2 {
		return nil, fmt.Errorf("inner dimensions differ: %s × %s (transA=%v, transB=%v)", tensor.ShapeString(a.shape), tensor.ShapeString(b.shape), tA, tB)
	}
	alpha, beta := n.Float("alpha", 1), n.Float("beta", 1)
	y, err := r.alloc([]int{m, nn})
	if err != nil {
		return nil, err
	}
	fail := func(err error) ([]value, error) { r.releaseBuf(y.buf); return nil, err }
	if y.n() == 0 {
		return one(y), nil
	}
	useC := len(in) > 2 && (in[2].host != nil || in[2].dev != nil) && beta != 0
	if useC {
		c, err := r.dev(in[2], 2, false)
		if err != nil {
			return fail(err)
		}
		if _, err := graph.BroadcastShapes(c.shape, y.shape); err != nil || len(c.shape) > 2 {
			return fail(fmt.Errorf("C of shape %s does not broadcast to %s", tensor.ShapeString(c.shape), tensor.ShapeString(y.shape)))
		}
		if err := r.copyInto(y, 0, c, 0, y.shape, broadcastStrides(c.shape, y.shape), contiguous(y.shape)); err != nil {
			return fail(err)
		}
	} else {
		beta = 0
		if k == 0 {
			if err := r.fill(y, 0); err != nil {
				return fail(err)
			}
			return one(y), nil
		}
	}
	if k == 0 {
		// alpha·0 + beta·C: scale C in place.
		sc, err := r.upload(&tensor.Tensor{DType: tensor.Float32, Shape: []int{}, F32: []float32{beta}})
		if err != nil {
			return fail(err)
		}
		r.temp(sc.buf)
		z, err := r.binary(binaryOps["Mul"], y, sc)
		r.releaseBuf(y.buf)
		if err != nil {
			return nil, err
		}
		return one(z), nil
	}
	if err := r.gemm(a, b, y.buf.ptr, tA, tB, m, nn, k, 1, 0, 0, alpha, beta); err != nil {
		return fail(err)
	}
	return one(y), nil
}
