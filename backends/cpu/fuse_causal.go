package cpu

import (
	"math"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Causal masks applied inside the attention kernel. A causal model's mask is an n×n tensor
// when the graph writes it out (zoo's Where(Greater(pos_j, pos_i), −∞, 0), widened to
// (B, 1, n, n) by the padding bias it is added to: 256 MiB at n = 8192, and the bool
// comparison besides), although all it says is "key j after query i + diag". The fusion
// recognises the subgraph that builds it by what it computes, and the fused attention step
// takes the compact form instead, a score op that masks keys j > i + diag of each block row:
//
//   - a comparison of the positions Range(0, n, 1) unsqueezed along the key axis (j, axis 0
//     of the (n, n) result) and the query axis (i, axis 1): Greater or Less, either operand
//     order, so true marks the masked keys (j > i, j ≥ i) or the kept ones (j < i, j ≤ i);
//   - Trilu of a bool fill of true (ConstantOfShape or Expand of a scalar), upper (true at
//     j − i ≥ k: masked) or lower (true at j − i ≤ k: kept), k a constant (PyTorch's
//     torch.triu(torch.ones(n, n, dtype=torch.bool), 1));
//
// either as the condition of a Where on the scores (masked_fill: the masked scores are
// replaced by a constant), or as the condition of Where(cond, c, 0) / Where(cond, 0, c), or as
// Trilu(fill(c), k) upper (generate_square_subsequent_mask: c at j − i ≥ k), a bias added to
// the scores, alone or as one term of an Add (the padding bias plus the causal one, as zoo's
// nn.CausalMask writes it; the terms become separate score ops, s + (p + m) = (s + p) + m
// exactly for masks of zeros and −∞).
//
// When the mask value is −∞ and no later score op can make a masked score finite again, the
// kernel also skips the keys every row of a query block has masked: whole key blocks past
// the block's last query, and the tail of the diagonal block, about half the work of both
// products. A masked score contributes exp(−∞) = 0 to the softmax either way, so the result
// is the same up to the summation order of the products.

// causalMask is the compact form of a causal mask: keys j > i + diag are masked. shape says
// the fused step's operand for it is the fill's shape (Trilu forms, checked at run time to end
// in the score matrix's nq, nk) rather than n of the positions Range(0, n, 1) (checked to be
// nq and nk).
type causalMask struct {
	diag  int
	shape bool
}

// positionAxis recognises slot s as Unsqueeze(Range(0, n, 1), axis) with axis 0 or 1 of the
// (n, n) comparison, returning the axis (0: the positions run along the key axis, so they are
// j; 1: along the query axis, i), the slot holding n and the steps.
func (f *fuser) positionAxis(s int) (axis int, n int, steps []int, ok bool) {
	u, ui, ok := f.prod(s)
	if !ok || u.Node.Op != "Unsqueeze" || len(u.In) != 2 {
		return 0, -1, nil, false
	}
	ax := f.constAny(u.In[1])
	if ax == nil || ax.DType != tensor.Int64 || len(ax.I64) != 1 {
		return 0, -1, nil, false
	}
	switch ax.I64[0] {
	case 0, -2:
		axis = 0
	case 1, -1:
		axis = 1
	default:
		return 0, -1, nil, false
	}
	rg, ri, ok := f.prod(u.In[0])
	if !ok || rg.Node.Op != "Range" || len(rg.In) != 3 || !f.intConst(rg.In[0], 0) || !f.intConst(rg.In[2], 1) || !f.runtime(rg.In[1]) {
		return 0, -1, nil, false
	}
	return axis, rg.In[1], []int{ui, ri}, true
}

// matchCausalCond recognises bool slot cond as a causal condition: masked says whether true
// marks the masked keys (else the kept ones), which are j > i + diag; n is the slot the
// kernel checks at run time (see causalMask.shape).
func (f *fuser) matchCausalCond(cond int) (masked bool, cm causalMask, n int, steps []int, ok bool) {
	st, si, ok := f.prod(cond)
	if !ok {
		return false, cm, -1, nil, false
	}
	switch st.Node.Op {
	case "Greater", "Less":
		if len(st.In) != 2 {
			return false, cm, -1, nil, false
		}
		a0, n0, s0, ok0 := f.positionAxis(st.In[0])
		a1, n1, s1, ok1 := f.positionAxis(st.In[1])
		if !ok0 || !ok1 || a0 == a1 || n0 != n1 {
			return false, cm, -1, nil, false
		}
		// Greater(j, i) = Less(i, j): true at j > i, masked. Greater(i, j) = Less(j, i):
		// true at j < i, kept; the masked ones are j ≥ i, j > i − 1.
		jFirst := a0 == 0
		if (st.Node.Op == "Greater") == jFirst {
			masked, cm.diag = true, 0
		} else {
			masked, cm.diag = false, -1
		}
		return masked, cm, n0, append(append([]int{si}, s0...), s1...), true
	case "Trilu":
		k, fill, shape, fs, ok := f.matchTriluFill(si)
		if !ok || fill.DType != tensor.Bool || !fill.Bool[0] {
			return false, cm, -1, nil, false
		}
		cm.shape = true
		if st.Node.Int("upper", 1) != 0 {
			cm.diag = k - 1 // true at j − i ≥ k: masked
			return true, cm, shape, append([]int{si}, fs...), true
		}
		cm.diag = k // true at j − i ≤ k: kept
		return false, cm, shape, append([]int{si}, fs...), true
	}
	return false, cm, -1, nil, false
}

// matchTriluFill recognises Trilu step ti as Trilu(fill, k) with fill a one-element-valued
// ConstantOfShape(shape) or Expand(scalar constant, shape) and k absent or an int64 scalar
// constant, returning k, the fill value, the shape slot and the steps of the fill.
func (f *fuser) matchTriluFill(ti int) (k int, fill *tensor.Tensor, shape int, steps []int, ok bool) {
	tr := f.p.plan.Steps[ti]
	if len(tr.In) < 1 || len(tr.In) > 2 || len(tr.Node.Inputs) > 2 {
		return 0, nil, -1, nil, false
	}
	if len(tr.In) == 2 && tr.In[1] >= 0 {
		kt := f.constAny(tr.In[1])
		if kt == nil || kt.DType != tensor.Int64 || len(kt.I64) != 1 {
			return 0, nil, -1, nil, false
		}
		k = int(kt.I64[0])
	}
	src, si, ok := f.prod(tr.In[0])
	if !ok {
		return 0, nil, -1, nil, false
	}
	switch {
	case src.Node.Op == "ConstantOfShape" && len(src.In) == 1 && f.runtime(src.In[0]):
		fill = tensor.ScalarF(0)
		if a, has := src.Node.Attrs["value"]; has {
			fill = a.T
		}
		shape = src.In[0]
	case src.Node.Op == "Expand" && len(src.In) == 2 && f.runtime(src.In[1]):
		fill = f.constAny(src.In[0])
		shape = src.In[1]
	default:
		return 0, nil, -1, nil, false
	}
	if fill == nil || fill.Len() != 1 || (fill.DType != tensor.Bool && fill.DType != tensor.Float32) {
		return 0, nil, -1, nil, false
	}
	return k, fill, shape, []int{si}, true
}

// matchCausalBias recognises float slot x as an additive causal mask, c at the masked keys
// and 0 at the others: Where(cond, c, 0) or Where(cond, 0, c) of a causal condition, or
// Trilu(fill(c), k) upper. It returns the mask, c, the run-time slot and the steps.
func (f *fuser) matchCausalBias(x int) (cm causalMask, c float32, n int, steps []int, ok bool) {
	st, si, ok := f.prod(x)
	if !ok {
		return cm, 0, -1, nil, false
	}
	switch st.Node.Op {
	case "Where":
		if len(st.In) != 3 {
			return cm, 0, -1, nil, false
		}
		a, okA := f.scalarConst(st.In[1])
		b, okB := f.scalarConst(st.In[2])
		if !okA || !okB {
			return cm, 0, -1, nil, false
		}
		masked, cm, n, cs, ok := f.matchCausalCond(st.In[0])
		if !ok {
			return cm, 0, -1, nil, false
		}
		if !masked {
			a, b = b, a
		}
		if b != 0 {
			return cm, 0, -1, nil, false
		}
		return cm, a, n, append([]int{si}, cs...), true
	case "Trilu":
		k, fill, shape, fs, ok := f.matchTriluFill(si)
		if !ok || fill.DType != tensor.Float32 || st.Node.Int("upper", 1) == 0 {
			return cm, 0, -1, nil, false
		}
		return causalMask{diag: k - 1, shape: true}, fill.F32[0], shape, append([]int{si}, fs...), true
	}
	return cm, 0, -1, nil, false
}

// splitCausal rewrites the score ops whose operand is a causal mask as causal score ops
// ('c': add c at the masked keys, 'C': replace them by c) reading the run-time length (or
// shape) slot instead, and an additive operand that is the sum of a causal mask and another
// tensor as the two ops. It returns the ops, the operands (appended to, never reordered) and
// the steps of the masks that the fused step no longer reads.
func (f *fuser) splitCausal(ops []scoreOp, operands []int) ([]scoreOp, []int, []int) {
	var steps []int
	out := ops[:0:0]
	for _, op := range ops {
		switch op.kind {
		case '+':
			x := operands[op.input]
			if cm, c, n, bs, ok := f.matchCausalBias(x); ok {
				operands[op.input] = n
				out = append(out, scoreOp{kind: 'c', c: c, input: op.input, cm: &cm})
				steps = append(steps, bs...)
				continue
			}
			if add, ai, ok := f.prod(x); ok && add.Node.Op == "Add" && len(add.In) == 2 && add.In[0] >= 0 && add.In[1] >= 0 {
				matched := false
				for j := 0; j < 2 && !matched; j++ {
					if cm, c, n, bs, ok := f.matchCausalBias(add.In[j]); ok {
						operands[op.input] = add.In[1-j]
						out = append(out, scoreOp{kind: '+', input: op.input}, scoreOp{kind: 'c', c: c, input: len(operands), cm: &cm})
						operands = append(operands, n)
						steps = append(append(steps, ai), bs...)
						matched = true
					}
				}
				if matched {
					continue
				}
			}
		case 'w', 'W':
			// 'W' is Where(cond, c, s), replacing where cond holds: cond must mark the masked
			// keys; 'w' is Where(cond, s, c), replacing where it does not: the kept ones.
			if masked, cm, n, cs, ok := f.matchCausalCond(operands[op.input]); ok && masked == (op.kind == 'W') {
				operands[op.input] = n
				out = append(out, scoreOp{kind: 'C', c: op.c, input: op.input, cm: &cm})
				steps = append(steps, cs...)
				continue
			}
		}
		out = append(out, op)
	}
	return out, operands, steps
}

// causalFits reports whether the run-time operand t of causal mask cm describes an nq × nk
// score matrix: n = nq = nk for the positions form, a shape ending in nq, nk (ones before)
// for the Trilu form.
func causalFits(cm *causalMask, t *tensor.Tensor, nq, nk int) bool {
	if t == nil || t.DType != tensor.Int64 {
		return false
	}
	if !cm.shape {
		return len(t.I64) == 1 && t.I64[0] == int64(nq) && nq == nk
	}
	d := t.I64
	if len(d) < 2 || d[len(d)-2] != int64(nq) || d[len(d)-1] != int64(nk) {
		return false
	}
	for _, v := range d[:len(d)-2] {
		if v != 1 {
			return false
		}
	}
	return true
}

// applyCausal masks the keys after query i + cm.diag in row (keys k0…): adds c ('c') or
// replaces them by c ('C').
func applyCausal(row []float32, kind byte, c float32, cm *causalMask, i, k0 int) {
	start := max(0, i+cm.diag+1-k0)
	if start >= len(row) {
		return
	}
	tail := row[start:]
	if kind == 'C' {
		for j := range tail {
			tail[j] = c
		}
		return
	}
	for j := range tail {
		tail[j] += c
	}
}

// causalSkip returns the diagonal d such that, after all of ops, every score at a key
// j > i + d is −∞ whatever the inputs: a causal op with c = −∞ and d ≥ 0 (so no row loses
// all its keys and every block row of keys 0… is computed), with no later op that can make
// such a score finite again (a replacement by a finite value, a scaling by a tensor, which
// may be 0, or by a constant ≤ 0). ok is false when there is none. Adding +∞ to a masked
// score would give NaN in the unfused graph and 0 here; no mask holds +∞.
func causalSkip(ops []scoreOp) (diag int, ok bool) {
	for _, op := range ops {
		switch op.kind {
		case 'c', 'C':
			if math.IsInf(float64(op.c), -1) && op.cm.diag >= 0 {
				if !ok || op.cm.diag < diag {
					diag = op.cm.diag
				}
				ok = true
			} else if op.kind == 'C' {
				ok = false
			}
		case '+', '-', 'r':
		case '*', '/':
			if !(op.c > 0) {
				ok = false
			}
		default:
			ok = false
		}
	}
	return diag, ok
}
