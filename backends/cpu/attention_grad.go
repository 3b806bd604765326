package cpu

import (
	"math"
	"sync"

	"github.com/zoo-dev/zoo/backends/cpu/gemm"
	"github.com/zoo-dev/zoo/backends/cpu/internal/workpool"
	"github.com/zoo-dev/zoo/backends/cpu/vec"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// The kernels behind fuse_attention_grad.go: attention in a training step without the n×n
// probabilities. The forward pass is attention.go's tiled online-softmax kernel, which also
// writes each query row's log-sum-exp (lse, n floats per head instead of n²). The backward
// pass is FlashAttention-2's (Dao 2023, algorithm 2): with D = rowsum(dO∘O), it walks the
// (query block, key block) tiles of each head and recomputes
//
//	S = scoreops(Q·Kᵀ), P = exp(S − lse), dP = dO·Vᵀ, dS = g·P∘(dP − D)
//	dV += Pᵀ·dO, dQ += dS·K, dK += dSᵀ·Q
//
// where g is the product of the scalings between the score product and the softmax (the
// chain rule through them). A task is one (batch, head) matrix, so dK and dV accumulate
// without sharing and the result is bitwise the same for any thread count.
const (
	attnGradQBlock = 64  // query rows per tile
	attnGradKBlock = 512 // keys per tile: S and dP of one tile are 128 KiB each
)

// attnGradState is one task's scratch: the P and dP (then dS) tiles, the row terms D, and
// the key block's Kᵀ, Vᵀ and K packed once for all its query blocks (SgemmPacked: a tile of
// 64 query rows would otherwise pack them again for each product, which costs about as
// much as the product).
type attnGradState struct {
	p, dp, d   []float32
	kt, vt, kk gemm.PackedB
}

var attnGradStates = sync.Pool{New: func() any {
	return &attnGradState{p: make([]float32, attnGradQBlock*attnGradKBlock), dp: make([]float32, attnGradQBlock*attnGradKBlock)}
}}

// matView is a batch of matrices (…, rows, cols) inside a tensor's data: matrix b starts at
// off[b], rows are ld apart and each row is contiguous.
type matView struct {
	data       []float32
	off        []int
	ld         int
	rows, cols int
}

// viewOf returns Transpose(t, perm) (t itself for a nil perm) as a batch of matrices over
// batch, or ok false when the permuted shape does not have batch as its leading axes, its
// last axis is not contiguous, or t is not float32.
func viewOf(t *tensor.Tensor, perm []int, batch []int) (matView, bool) {
	if t == nil || t.DType != tensor.Float32 {
		return matView{}, false
	}
	shape, stride, ok := permView(t.Shape, perm)
	r := len(shape)
	if !ok || r != len(batch)+2 || !tensor.SameShape(shape[:r-2], batch) || stride[r-1] != 1 && shape[r-1] > 1 {
		return matView{}, false
	}
	st := batchStrided(batch, stride)
	ld := st.ld
	if shape[r-2] <= 1 {
		ld = max(ld, shape[r-1]) // one row: its stride is never used, but gemm checks it
	}
	return matView{data: t.F32, off: st.off, ld: ld, rows: shape[r-2], cols: shape[r-1]}, true
}

// at returns the data of matrix b from row i on.
func (v matView) at(b, i int) []float32 { return v.data[v.off[b]+i*v.ld:] }

// row returns row i of matrix b.
func (v matView) row(b, i int) []float32 { return v.data[v.off[b]+i*v.ld : v.off[b]+i*v.ld+v.cols] }

// allocView allocates the result of logical shape batch × (rows, cols) stored as
// Transpose(logical, outPerm) (the logical layout itself for a nil outPerm), and its view;
// ok is false when outPerm is not a permutation that keeps the last axis last.
func allocView(e *exec, batch []int, rows, cols int, outPerm []int) (*tensor.Tensor, matView, bool, error) {
	logical := append(append([]int{}, batch...), rows, cols)
	r := len(logical)
	phys := logical
	if outPerm != nil {
		if len(outPerm) != r || outPerm[r-1] != r-1 {
			return nil, matView{}, false, nil
		}
		phys = make([]int, r)
		seen := make([]bool, r)
		for j, a := range outPerm {
			if a < 0 || a >= r || seen[a] {
				return nil, matView{}, false, nil
			}
			seen[a] = true
			phys[j] = logical[a]
		}
	}
	t, err := e.allocRaw(phys)
	if err != nil {
		return nil, matView{}, true, err
	}
	// The logical view of the stored tensor is Transpose(stored, inverse of outPerm).
	var inv []int
	if outPerm != nil {
		inv = make([]int, r)
		for j, a := range outPerm {
			inv[a] = j
		}
	}
	v, ok := viewOf(t, inv, batch)
	return t, v, ok, nil
}

// attnGradIn is what the backward kernel reads: the views of Q, K, V, O and dO (all over
// the same batch), the row log-sum-exps (batch…, nq, contiguous), the forward score ops with
// their planned operands, and g, the scale of the gradient through those ops.
type attnGradIn struct {
	q, k, v, o, do matView
	lse            []float32
	ops            []scoreOp
	operands       []bcastOperand
	g              float32
}

// attentionBackward computes dQ, dK and dV into the views dq, dk and dv (overwritten).
func attentionBackward(e *exec, a *attnGradIn, dq, dk, dv matView) {
	nb := len(a.q.off)
	nq, nk, dkd, dvd := a.q.rows, a.k.rows, a.q.cols, a.v.cols
	workpool.Tasks(e.threads, nb, func(b int) {
		st := attnGradStates.Get().(*attnGradState)
		defer attnGradStates.Put(st)
		if cap(st.d) < nq {
			st.d = make([]float32, nq)
		}
		if tile := attnGradQBlock * attnGradKBlock; len(st.p) < tile {
			st.p, st.dp = make([]float32, tile), make([]float32, tile)
		}
		d := st.d[:nq]
		for i := range d {
			var s float32
			o, g := a.o.row(b, i), a.do.row(b, i)
			for j, x := range g {
				s += x * o[j]
			}
			d[i] = s
		}
		for i := 0; i < nq; i++ {
			clear(dq.row(b, i))
		}
		for k0 := 0; k0 < nk; k0 += attnGradKBlock {
			cols := min(attnGradKBlock, nk-k0)
			kb, vb := a.k.at(b, k0), a.v.at(b, k0)
			dkb, dvb := dk.at(b, k0), dv.at(b, k0)
			e.packB(&st.kt, true, dkd, cols, kb, a.k.ld)
			e.packB(&st.vt, true, dvd, cols, vb, a.v.ld)
			e.packB(&st.kk, false, cols, dkd, kb, a.k.ld)
			for q0 := 0; q0 < nq; q0 += attnGradQBlock {
				rows := min(attnGradQBlock, nq-q0)
				p, dp := st.p[:rows*cols], st.dp[:rows*cols]
				qb, dob := a.q.at(b, q0), a.do.at(b, q0)
				gemm.SgemmPacked(rows, cols, dkd, 1, qb, a.q.ld, &st.kt, 0, p, cols)
				for i := 0; i < rows; i++ {
					row := p[i*cols : (i+1)*cols]
					applyScoreOps(row, a.ops, a.operands, b, q0+i, k0)
					vec.ExpSumFlush(row, row, a.lse[b*nq+q0+i]) // the forward pass's probabilities
				}
				gemm.SgemmPacked(rows, cols, dvd, 1, dob, a.do.ld, &st.vt, 0, dp, cols)
				beta := float32(1)
				if q0 == 0 {
					beta = 0
				}
				e.sgemm(true, false, cols, dvd, rows, 1, p, cols, dob, a.do.ld, beta, dvb, dv.ld)
				for i := 0; i < rows; i++ {
					pr, dr := p[i*cols:(i+1)*cols], dp[i*cols:(i+1)*cols]
					di := d[q0+i]
					for j, x := range pr {
						dr[j] = a.g * x * (dr[j] - di)
					}
				}
				gemm.SgemmPacked(rows, dkd, cols, 1, dp, cols, &st.kk, 1, dq.at(b, q0), dq.ld)
				e.sgemm(true, false, cols, dkd, rows, 1, dp, cols, qb, a.q.ld, beta, dkb, dk.ld)
			}
		}
	})
}

// attentionForwardRef is the pure-Go twin of the forward kernel (attentionRun with
// withLSE): for each matrix b and query i, S = scoreops(Q·Kᵀ) in float64 after each op,
// O = softmax(S)·V and lse = log Σ exp(S). It writes o and lse (batch…, nq).
func attentionForwardRef(q, k, v matView, ops []scoreOp, operands []bcastOperand, o matView, lse []float32) {
	nq, nk := q.rows, k.rows
	s := make([]float32, nk)
	for b := range q.off {
		for i := 0; i < nq; i++ {
			refScores(s, q, k, ops, operands, b, i)
			m := math.Inf(-1)
			for _, x := range s {
				m = math.Max(m, float64(x))
			}
			var l float64
			w := make([]float64, nk)
			for j, x := range s {
				w[j] = math.Exp(float64(x) - m)
				l += w[j]
			}
			orow := o.row(b, i)
			for c := range orow {
				var acc float64
				for j := 0; j < nk; j++ {
					acc += w[j] * float64(v.row(b, j)[c])
				}
				orow[c] = float32(acc / l)
			}
			lse[b*nq+i] = float32(m + math.Log(l))
		}
	}
}

// refScores writes row i of matrix b's scores, the products in float64, then the ops.
func refScores(s []float32, q, k matView, ops []scoreOp, operands []bcastOperand, b, i int) {
	for j := range s {
		var acc float64
		qr, kr := q.row(b, i), k.row(b, j)
		for c := range qr {
			acc += float64(qr[c]) * float64(kr[c])
		}
		s[j] = float32(acc)
	}
	applyScoreOps(s, ops, operands, b, i, 0)
}

// attentionBackwardRef is the pure-Go twin of attentionBackward, written as the unfused
// graph computes it (whole rows of P, float64 sums): P = exp(S − lse), dP = dO·Vᵀ,
// dS = g·P∘(dP − Σ_j P∘dP), dV = Pᵀ·dO, dQ = dS·K, dK = dSᵀ·Q. It reads neither O nor D, so
// it also checks the kernel's use of them.
func attentionBackwardRef(a *attnGradIn, dq, dk, dv matView) {
	nq, nk := a.q.rows, a.k.rows
	for b := range a.q.off {
		p := make([][]float64, nq)
		ds := make([][]float64, nq)
		s := make([]float32, nk)
		for i := 0; i < nq; i++ {
			refScores(s, a.q, a.k, a.ops, a.operands, b, i)
			p[i], ds[i] = make([]float64, nk), make([]float64, nk)
			dp := make([]float64, nk)
			var dot float64
			for j := range s {
				p[i][j] = math.Exp(float64(s[j]) - float64(a.lse[b*nq+i]))
				var acc float64
				g, vr := a.do.row(b, i), a.v.row(b, j)
				for c := range g {
					acc += float64(g[c]) * float64(vr[c])
				}
				dp[j] = acc
				dot += p[i][j] * acc
			}
			for j := range s {
				ds[i][j] = float64(a.g) * p[i][j] * (dp[j] - dot)
			}
		}
		for j := 0; j < nk; j++ {
			for c := range dv.row(b, j) {
				var acc float64
				for i := 0; i < nq; i++ {
					acc += p[i][j] * float64(a.do.row(b, i)[c])
				}
				dv.row(b, j)[c] = float32(acc)
			}
			for c := range dk.row(b, j) {
				var acc float64
				for i := 0; i < nq; i++ {
					acc += ds[i][j] * float64(a.q.row(b, i)[c])
				}
				dk.row(b, j)[c] = float32(acc)
			}
		}
		for i := 0; i < nq; i++ {
			for c := range dq.row(b, i) {
				var acc float64
				for j := 0; j < nk; j++ {
					acc += ds[i][j] * float64(a.k.row(b, j)[c])
				}
				dq.row(b, i)[c] = float32(acc)
			}
		}
	}
}

// planScoreOperands plans the tensor operands of ops (indexes into in) over the score
// matrices batch × (nq, nk); ok is false when one does not broadcast to them or is not
// float32 (the matcher only takes additive operands).
func planScoreOperands(ops []scoreOp, in []*tensor.Tensor, batch []int, nq, nk int) ([]bcastOperand, bool) {
	operands := make([]bcastOperand, len(in))
	for _, op := range ops {
		if !isOperandKind(op.kind) {
			continue
		}
		t := in[op.input]
		if t == nil || t.DType != tensor.Float32 || (op.kind != '+' && op.kind != '-') {
			return nil, false
		}
		bo, ok := planOperand(t, batch, nq, nk)
		if !ok {
			return nil, false
		}
		operands[op.input] = bo
	}
	return operands, true
}
