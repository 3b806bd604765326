package cpu

import (
	"fmt"

	"github.com/zoo-dev/zoo/backends/cpu/internal/workpool"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Matrix products are cut into tasks of whole output rows, on tile boundaries, so results
// are bitwise identical for any number of threads and any cut: an element's value depends
// only on the k blocking, which the cut never touches.
const (
	gemmTaskMACs  = 1 << 20 // least multiply-adds worth a task of its own
	gemmMaxSplit  = 32      // most tasks one matrix product is cut into
	gemmRowAlign  = 48      // task row counts are multiples of this (and of SIMD tile heights)
	gemmTinyTotal = 1 << 15 // whole products below this many multiply-adds run inline
)

// gemmRowsPerTask returns how many output rows of an m×n×k product one task computes. Each
// task packs op(B) again, so tasks are kept tall enough for that to stay cheap.
func gemmRowsPerTask(m, n, k int) int {
	work := m * n * max(k, 1)
	if work <= gemmTaskMACs || m <= gemmRowAlign {
		return max(m, 1)
	}
	tasks := min((work+gemmTaskMACs-1)/gemmTaskMACs, gemmMaxSplit, (m+gemmRowAlign-1)/gemmRowAlign)
	rows := (m + tasks - 1) / tasks
	return (rows + gemmRowAlign - 1) / gemmRowAlign * gemmRowAlign
}

// gemmJob is one matrix product C = alpha·op(A)·op(B) + beta·C over slices at offsets.
type gemmJob struct {
	aOff, bOff, cOff int
}

// runGemms computes the products of jobs (all m×n×k with the same transposes and strides)
// as row tasks spread over threads.
func runGemms(e *exec, jobs []gemmJob, transA, transB bool, m, n, k int, alpha float32,
	a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 || len(jobs) == 0 {
		return
	}
	threads := e.threads
	if len(jobs)*m*n*max(k, 1) < gemmTinyTotal {
		threads = 1
	}
	// One product is split by SgemmParallel into one part per thread along its larger output
	// dimension, each packing its share of op(B) once. Row tasks would each pack all of op(B)
	// again: a training step's weight gradient (512×512, k = 1024 tokens) then ran as 11 tasks
	// each streaming a 2 MiB packed B, at 73 GFLOP/s against SgemmParallel's 112-137
	// (vanilla base, batch 8 × 128, 2 threads, zoo profile --train). The result is the same
	// bit for bit: both cut along whole tiles of the same blocking.
	if len(jobs) == 1 {
		j := jobs[0]
		e.sgemmParallel(threads, transA, transB, m, n, k, alpha, a[j.aOff:], lda, b[j.bOff:], ldb, beta, c[j.cOff:], ldc)
		return
	}
	rpt := gemmRowsPerTask(m, n, k)
	if len(jobs) >= 2*threads {
		// Whole products are tasks enough to keep every thread busy, and each then packs its
		// op(B) once instead of once per row task (in a bf16 run also rounds it once: the
		// Linformer projections of batch 8 ran no faster in bf16 than in fp32 while every
		// 48-row task rounded all of B again). The bits are the same: a row task computes
		// its rows exactly as the whole product does.
		rpt = max(m, 1)
	}
	per := (m + rpt - 1) / rpt
	workpool.Tasks(threads, len(jobs)*per, func(t int) {
		j := jobs[t/per]
		r0 := (t % per) * rpt
		rows := min(rpt, m-r0)
		aOff := j.aOff + r0*lda
		if transA {
			aOff = j.aOff + r0
		}
		e.sgemm(transA, transB, rows, n, k, alpha, a[aOff:], lda, b[j.bOff:], ldb, beta, c[j.cOff+r0*ldc:], ldc)
	})
}

// makeMatMul implements numpy-style MatMul: 1-D operands are promoted and the added axis is
// removed again, batch dimensions broadcast, and an N-D × 2-D product runs as one GEMM.
func makeMatMul(n *graph.Node) (kernel, error) {
	return func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if err := need(in, 2); err != nil {
			return nil, err
		}
		a, b := in[0], in[1]
		if a.DType != b.DType {
			return nil, fmt.Errorf("operands have dtypes %v and %v; they must match", a.DType, b.DType)
		}
		if len(a.Shape) == 0 || len(b.Shape) == 0 {
			return nil, fmt.Errorf("operands must have rank ≥ 1, got %s and %s", tensor.ShapeString(a.Shape), tensor.ShapeString(b.Shape))
		}
		as, bs := a.Shape, b.Shape
		if len(as) == 1 {
			as = []int{1, as[0]}
		}
		if len(bs) == 1 {
			bs = []int{bs[0], 1}
		}
		m, k := as[len(as)-2], as[len(as)-1]
		k2, nn := bs[len(bs)-2], bs[len(bs)-1]
		if k != k2 {
			return nil, fmt.Errorf("shapes %s and %s are not aligned for a matrix product (%d != %d)", tensor.ShapeString(a.Shape), tensor.ShapeString(b.Shape), k, k2)
		}
		aBatch, bBatch := as[:len(as)-2], bs[:len(bs)-2]
		batch, err := graph.BroadcastShapes(aBatch, bBatch)
		if err != nil {
			return nil, fmt.Errorf("batch dimensions: %w", err)
		}
		full := append(append([]int{}, batch...), m, nn)
		shape := append([]int{}, batch...)
		if len(a.Shape) > 1 {
			shape = append(shape, m)
		}
		if len(b.Shape) > 1 {
			shape = append(shape, nn)
		}
		out, err := e.allocOverwrite(a.DType, full) // beta 0: the products store every element
		if err != nil {
			return nil, err
		}
		out.Shape = shape
		nb := graph.NumElements(batch)
		var jobs []gemmJob
		mm := m
		if graph.NumElements(bBatch) == 1 {
			// B is one matrix: fold A's batch into its rows and run a single product.
			mm = nb * m
			jobs = []gemmJob{{}}
		} else {
			aOffs := batchOffsets(batch, aBatch, m*k)
			bOffs := batchOffsets(batch, bBatch, k*nn)
			jobs = make([]gemmJob, nb)
			for i := range jobs {
				jobs[i] = gemmJob{aOff: aOffs[i], bOff: bOffs[i], cOff: i * m * nn}
			}
		}
		switch a.DType {
		case tensor.Float32:
			runGemms(e, jobs, false, false, mm, nn, k, 1, a.F32, k, b.F32, nn, 0, out.F32, nn)
		case tensor.Int32, tensor.Int64:
			for _, j := range jobs {
				matmulInt(out.I64[j.cOff:], a.I64[j.aOff:], b.I64[j.bOff:], mm, nn, k)
			}
		default:
			return nil, fmt.Errorf("dtype %v is not supported", a.DType)
		}
		return []*tensor.Tensor{out}, nil
	}, nil
}

// batchOffsets returns, for each index of the broadcast batch shape, the element offset of
// the matching matrix (of size matSize) in an operand with batch shape sub.
func batchOffsets(batch, sub []int, matSize int) []int {
	nb := graph.NumElements(batch)
	offs := make([]int, nb)
	if nb == 0 {
		return offs
	}
	r := len(batch)
	st := make([]int, r)
	acc := matSize
	for i := len(sub) - 1; i >= 0; i-- {
		if sub[i] != 1 {
			st[r-len(sub)+i] = acc
		}
		acc *= sub[i]
	}
	idx := make([]int, r)
	off := 0
	for i := 0; i < nb; i++ {
		offs[i] = off
		for d := r - 1; d >= 0; d-- {
			idx[d]++
			off += st[d]
			if idx[d] < batch[d] {
				break
			}
			off -= st[d] * batch[d]
			idx[d] = 0
		}
	}
	return offs
}

func matmulInt(c, a, b []int64, m, n, k int) {
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s int64
			for p := 0; p < k; p++ {
				s += a[i*k+p] * b[p*n+j]
			}
			c[i*n+j] = s
		}
	}
}

// makeGemm implements Gemm: Y = alpha·op(A)·op(B) + beta·C with C unidirectionally
// broadcast to (M, N).
func makeGemm(n *graph.Node) (kernel, error) {
	transA := n.Int("transA", 0) != 0
	transB := n.Int("transB", 0) != 0
	alpha := n.Float("alpha", 1)
	beta := n.Float("beta", 1)
	return func(e *exec, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		if err := need(in, 2); err != nil {
			return nil, err
		}
		a, b := in[0], in[1]
		var c *tensor.Tensor
		if len(in) > 2 {
			c = in[2]
		}
		for i, t := range []*tensor.Tensor{a, b, c} {
			if t != nil && t.DType != tensor.Float32 {
				return nil, fmt.Errorf("input %d has dtype %v; only float32 is supported", i, t.DType)
			}
		}
		if len(a.Shape) != 2 || len(b.Shape) != 2 {
			return nil, fmt.Errorf("A and B must be matrices, got %s and %s", tensor.ShapeString(a.Shape), tensor.ShapeString(b.Shape))
		}
		m, k := a.Shape[0], a.Shape[1]
		if transA {
			m, k = k, m
		}
		k2, nn := b.Shape[0], b.Shape[1]
		if transB {
			k2, nn = nn, k2
		}
		if k != k2 {
			return nil, fmt.Errorf("op(A) is %d×%d and op(B) is %d×%d: inner dimensions differ", m, k, k2, nn)
		}
		out, err := e.alloc(tensor.Float32, []int{m, nn})
		if err != nil {
			return nil, err
		}
		bt := float32(0)
		if c != nil && beta != 0 {
			shape, err := graph.BroadcastShapes(c.Shape, out.Shape)
			if err != nil || !tensor.SameShape(shape, out.Shape) {
				return nil, fmt.Errorf("C of shape %s does not broadcast to (%d, %d)", tensor.ShapeString(c.Shape), m, nn)
			}
			if out.Len() > 0 {
				expandInto(e.threads, out.F32, out.Shape, c.F32, c.Shape)
			}
			bt = beta
		}
		runGemms(e, []gemmJob{{}}, transA, transB, m, nn, k, alpha, a.F32, a.Shape[1], b.F32, b.Shape[1], bt, out.F32, nn)
		return []*tensor.Tensor{out}, nil
	}, nil
}
