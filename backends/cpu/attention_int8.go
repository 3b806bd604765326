package cpu

import (
	"github.com/zoo-dev/zoo/backends/cpu/gemm"
	"github.com/zoo-dev/zoo/backends/cpu/vec"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Int8 attention (Options.Precision "int8-attention"). The fused attention kernel
// (attention.go) runs its two products on the int8 kernels. Each block of keys is packed
// with gemm's run-time int8 packing: Kᵀ gets a scale per key, V a scale per channel, both
// symmetric. Then:
//
//   - S = Q·Kᵀ quantizes each query row (u8 with a zero point, as the linear layers
//     quantize theirs); the leading constant scalings of the scores (the 1/√d_k) fold into
//     the rows' scales;
//   - the softmax stays fp32, and exp(S − m) lies in [0, 1];
//   - P·V quantizes each row of those probabilities to u8, at the scale 1/255, in the same
//     pass as their exp where the rows are u8 (vec.ExpSumU8 into Int8Rows.UnitRow).
//
// The row sums l of the softmax are taken before P is quantized, so a row's weights sum
// to 1 within P's rounding. A training step's forward pass (it keeps the log-sum-exp for
// the backward pass) stays fp32.

// foldScoreScale splits ops into the product of their leading constant scalings ('/' and
// '*', which commute with the product Q·Kᵀ) and the ops after them.
func foldScoreScale(ops []scoreOp) (alpha float32, rest []scoreOp) {
	alpha = 1
	for i, op := range ops {
		switch op.kind {
		case '/':
			alpha /= op.c
		case '*':
			alpha *= op.c
		default:
			return alpha, ops[i:]
		}
	}
	return alpha, nil
}

// packKVInt8 packs key block k0 (cols keys) of matrix b as int8: Kᵀ's columns (a scale per
// key) into ktp and V's rows (a scale per channel) into vp.
func packKVInt8(ktp, vp *gemm.PackedB, kt, v *tensor.Tensor, ks, vs strided, b, k0, cols, dk, dv int) {
	packKtInt8(ktp, kt, ks.off[b]+k0*ks.cs, ks, cols, dk)
	vp.PackInt8Activation(false, cols, dv, v.F32[vs.off[b]+k0*vs.ld:], vs.ld)
}

// packKtInt8 packs the cols keys of Kᵀ (dk × cols, strides as ks's) from offset off as
// int8, a scale per key.
func packKtInt8(ktp *gemm.PackedB, kt *tensor.Tensor, off int, ks strided, cols, dk int) {
	if ks.cs == 1 {
		ktp.PackInt8Activation(false, dk, cols, kt.F32[off:], ks.ld)
	} else {
		ktp.PackInt8Activation(true, dk, cols, kt.F32[off:], ks.cs)
	}
}

// Sliding windows of keys (fuse_sparse.go) overlap: at the sparse variant's default, every
// block of keys is in three windows, and packing each window's Kᵀ and V packed each block
// three times, half of the windowed attention's int8 time. int8-attention packs instead
// every run of keys the windows are cut from (a parent: all the blocks along the window
// axis) once, and each window multiplies its columns of the parent's Kᵀ and its rows of
// the parent's V (gemm.SgemmInt8RowsKAt). Kᵀ's scales are per key, so a window's scores are
// what its own pack gives; V's scales per channel come from the whole parent.

// windowParents maps the matrices of a windowed Kᵀ or V view to their parents: matrix b's
// keys are keys start[b]… of parent[b]'s, which begin at offset off[parent[b]], keys
// apart as the view's. keys is every parent's number of keys.
type windowParents struct {
	parent, start, off []int
	keys               int
}

// parentsOf finds the parents of a view of source x read through win and then
// Transpose(perm) (srcView), with batch axes batch, its keys on logical axis keyAxis and
// its matrices at st's offsets; ok is false unless the window's index is a batch axis and
// its keys are the view's keys.
func parentsOf(x *tensor.Tensor, perm []int, win *window, batch []int, keyAxis int, st strided) (windowParents, bool) {
	rx := len(x.Shape)
	a := win.axis
	if a < 0 {
		a += rx
	}
	if a < 0 || a+1 >= rx {
		return windowParents{}, false
	}
	wi, ki := a, a+1 // the logical axes of the window's index and of its keys
	for i, pa := range perm {
		switch pa {
		case a:
			wi = i
		case a + 1:
			ki = i
		}
	}
	_, xs, _ := permView(x.Shape, nil)
	bs := x.Shape[a+1]
	if wi >= len(batch) || ki != keyAxis || xs[a] != bs*xs[a+1] {
		return windowParents{}, false
	}
	nb := graph.NumElements(batch)
	inner := graph.NumElements(batch[wi+1:])
	p := windowParents{parent: make([]int, nb), start: make([]int, nb), keys: x.Shape[a] * bs}
	ids := map[int]int{}
	for b := range nb {
		l := (b / inner) % batch[wi]
		o := st.off[b] - l*xs[a]
		id, ok := ids[o]
		if !ok {
			id = len(p.off)
			ids[o] = id
			p.off = append(p.off, o)
		}
		p.parent[b], p.start[b] = id, l*bs
	}
	return p, true
}

// expRow is vec.ExpSumFlush(row, row, m) for row i of a block: it returns the sum of
// exp(row − m), values below 1.6e-38 made 0 (they would cost the product with V a
// microcode assist apiece on Intel cores). In an int8-attention run (attn8) it also quantizes the probabilities into p's row i,
// in the same pass where p's rows are u8 (row's floats are then left unchanged, as nothing
// reads them again).
func expRow(p *gemm.Int8Rows, attn8 bool, i int, row []float32, m float32) float32 {
	if !attn8 {
		return vec.ExpSumFlush(row, row, m)
	}
	if q := p.UnitRow(i, len(row)); q != nil {
		return vec.ExpSumU8(q, row, m)
	}
	sum := vec.ExpSumFlush(row, row, m)
	p.QuantizeUnit(i, row)
	return sum
}
