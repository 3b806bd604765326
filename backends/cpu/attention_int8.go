package cpu

import (
	"github.com/zoo-dev/zoo/backends/cpu/gemm"
	"github.com/zoo-dev/zoo/backends/cpu/vec"
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
	if ks.cs == 1 {
		ktp.PackInt8Activation(false, dk, cols, kt.F32[ks.off[b]+k0:], ks.ld)
	} else {
		ktp.PackInt8Activation(true, dk, cols, kt.F32[ks.off[b]+k0*ks.cs:], ks.cs)
	}
	vp.PackInt8Activation(false, cols, dv, v.F32[vs.off[b]+k0*vs.ld:], vs.ld)
}

// expRow is vec.ExpSum(row, row, m) for row i of a block: it returns the sum of exp(row −
// m). In an int8-attention run (attn8) it also quantizes the probabilities into p's row i,
// in the same pass where p's rows are u8 (row's floats are then left unchanged, as nothing
// reads them again).
func expRow(p *gemm.Int8Rows, attn8 bool, i int, row []float32, m float32) float32 {
	if !attn8 {
		return vec.ExpSum(row, row, m)
	}
	if q := p.UnitRow(i, len(row)); q != nil {
		return vec.ExpSumU8(q, row, m)
	}
	sum := vec.ExpSum(row, row, m)
	p.QuantizeUnit(i, row)
	return sum
}
