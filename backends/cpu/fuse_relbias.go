package cpu

import (
	"slices"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Relative-position biases computed inside the attention kernel. A bias that depends only
// on the head and the distance j − i between key j and query i (ALiBi's slope·|j − i|) is
// an n×n tensor per head when the graph writes it out: at n = 8192 and 8 heads, 2 GiB, plus
// the int64 distance matrix it was computed from. The fusion recognises the subgraph that
// builds it from the positions Range(0, n, 1) by what it computes, and the fused attention
// step takes the compact parameters instead: per head, one value per distance, tabulated
// once per run (nq + nk − 1 values) and added to each block row as a contiguous slice. When
// every reader of the bias is such a step, the bias steps are left unread and dropped (see
// dropUnread); each fused step's fallback still holds them, to rebuild the bias on a run its
// fast path does not take.

// relBias is the compact form of a relative-position bias of rel = sign · (j − i), in one
// of two forms. ALiBi (emb nil): value(h, rel) = slope[h] · d with d = |rel| when abs is
// set and rel otherwise. T5's buckets (emb set): value(h, rel) = emb[lut[clamp(rel, ±D) + D],
// h], emb (buckets, heads), D = maxDist. slopes broadcasts to the score matrices (one value
// per matrix): ALiBi's slopes, or for buckets the head index of each matrix.
type relBias struct {
	slopes  *tensor.Tensor
	abs     bool
	sign    int
	emb     *tensor.Tensor
	lut     []int64
	maxDist int
}

// value is the bias at distance rel = j − i for the matrix whose slopes entry is s, rounded
// as the graph rounds it: the integer distance converted to float32 (exact below 2²⁴),
// times the slope; or the table entry itself.
func (rb *relBias) value(s float32, rel int) float32 {
	d := rb.sign * rel
	if rb.emb != nil {
		d = min(max(d, -rb.maxDist), rb.maxDist)
		return rb.emb.F32[int(rb.lut[d+rb.maxDist])*rb.emb.Shape[1]+int(s)]
	}
	if rb.abs && d < 0 {
		d = -d
	}
	return float32(d) * s
}

// table returns the bias of one matrix with slopes entry s for every distance j − i of an
// nq × nk score matrix: entry j − i + nq − 1.
func (rb *relBias) table(s float32, nq, nk int, dst []float32) []float32 {
	dst = append(dst[:0], make([]float32, nq+nk-1)...)
	for t := range dst {
		dst[t] = rb.value(s, t-(nq-1))
	}
	return dst
}

// prod returns the live step producing run-time slot s, with its index.
func (f *fuser) prod(s int) (step, int, bool) {
	p := f.p
	if s < 0 || p.plan.Kinds[s] != slotNode {
		return step{}, -1, false
	}
	pi := f.producer[s]
	if pi < 0 || f.dead[pi] || len(p.plan.Steps[pi].Out) != 1 {
		return step{}, -1, false
	}
	return p.plan.Steps[pi], pi, true
}

// matchRelDistance recognises slot d as pos_j − pos_i (sign 1) or pos_i − pos_j (sign −1),
// Sub(Unsqueeze(pos, 0), Unsqueeze(pos, 1)) with pos = Range(0, n, 1), returning the sign,
// the slot holding n and the steps.
func (f *fuser) matchRelDistance(d int) (sign, n int, steps []int, ok bool) {
	p := f.p
	sub, si, ok := f.prod(d)
	if !ok || sub.Node.Op != "Sub" || len(sub.In) != 2 {
		return 0, -1, nil, false
	}
	pos, axis := [2]int{}, [2]int64{}
	steps = []int{si}
	for j := 0; j < 2; j++ {
		u, ui, ok := f.prod(sub.In[j])
		if !ok || u.Node.Op != "Unsqueeze" || len(u.In) != 2 || u.In[1] < 0 || p.plan.Kinds[u.In[1]] != slotConst {
			return 0, -1, nil, false
		}
		ax := p.plan.Consts[u.In[1]]
		if ax == nil || ax.DType != tensor.Int64 || len(ax.I64) != 1 {
			return 0, -1, nil, false
		}
		pos[j], axis[j] = u.In[0], ax.I64[0]
		steps = append(steps, ui)
	}
	switch {
	case pos[0] != pos[1]:
		return 0, -1, nil, false
	case axis == [2]int64{0, 1}:
		sign = 1
	case axis == [2]int64{1, 0}:
		sign = -1
	default:
		return 0, -1, nil, false
	}
	rg, ri, ok := f.prod(pos[0])
	if !ok || rg.Node.Op != "Range" || len(rg.In) != 3 || !f.intConst(rg.In[0], 0) || !f.intConst(rg.In[2], 1) || !f.runtime(rg.In[1]) {
		return 0, -1, nil, false
	}
	return sign, rg.In[1], append(steps, ri), true
}

// matchBucketBias recognises slot x as T5's bucketed bias, (1,) h × n × n:
// [Unsqueeze(·, 0) of] Transpose(Gather(emb, Gather(lut, Add(clamp(rel, −D, D), D)), 0),
// (2, 0, 1)), clamp being Max(Min(·, D), −D) or Min(Max(·, −D), D), emb a float32 constant
// (buckets, heads) and lut an int64 constant vector of 2D + 1 bucket indices within emb.
func (f *fuser) matchBucketBias(x int) (rb *relBias, n int, steps []int, ok bool) {
	p := f.p
	cur := x
	unsq := false
	if u, ui, ok := f.prod(cur); ok && u.Node.Op == "Unsqueeze" && len(u.In) == 2 {
		ax := f.constAny(u.In[1])
		if ax == nil || ax.DType != tensor.Int64 || len(ax.I64) != 1 || ax.I64[0] != 0 {
			return nil, -1, nil, false
		}
		steps, cur, unsq = append(steps, ui), u.In[0], true
	}
	tr, ti, ok := f.prod(cur)
	if !ok || tr.Node.Op != "Transpose" || len(tr.In) != 1 || !slices.Equal(transposePerm(tr.Node), []int{2, 0, 1}) {
		return nil, -1, nil, false
	}
	steps = append(steps, ti)
	g1, gi1, ok := f.prod(tr.In[0])
	if !ok || g1.Node.Op != "Gather" || len(g1.In) != 2 || g1.Node.Int("axis", 0) != 0 {
		return nil, -1, nil, false
	}
	emb := f.constF32(g1.In[0])
	if emb == nil || len(emb.Shape) != 2 {
		return nil, -1, nil, false
	}
	steps = append(steps, gi1)
	g2, gi2, ok := f.prod(g1.In[1])
	if !ok || g2.Node.Op != "Gather" || len(g2.In) != 2 || g2.Node.Int("axis", 0) != 0 {
		return nil, -1, nil, false
	}
	lut := f.constAny(g2.In[0])
	if lut == nil || lut.DType != tensor.Int64 || len(lut.Shape) != 1 || len(lut.I64)%2 != 1 {
		return nil, -1, nil, false
	}
	for _, v := range lut.I64 {
		if v < 0 || v >= int64(emb.Shape[0]) {
			return nil, -1, nil, false
		}
	}
	D := int64(len(lut.I64) / 2)
	steps = append(steps, gi2)
	add, ai, ok := f.prod(g2.In[1])
	if !ok || add.Node.Op != "Add" || len(add.In) != 2 {
		return nil, -1, nil, false
	}
	cl := -1
	for j := 0; j < 2; j++ {
		if f.intConst(add.In[j], D) {
			cl = add.In[1-j]
		}
	}
	steps = append(steps, ai)
	// clamp: two steps, Min by D and Max by −D, in either order
	for k := 0; k < 2; k++ {
		st, si, ok := f.prod(cl)
		if !ok || len(st.In) != 2 || !((st.Node.Op == "Min" && f.intConst(st.In[1], D)) || (st.Node.Op == "Max" && f.intConst(st.In[1], -D))) {
			return nil, -1, nil, false
		}
		if k == 1 && st.Node.Op == p.plan.Steps[steps[len(steps)-1]].Node.Op {
			return nil, -1, nil, false
		}
		steps = append(steps, si)
		cl = st.In[0]
	}
	sign, n, ds, ok := f.matchRelDistance(cl)
	if !ok {
		return nil, -1, nil, false
	}
	h := emb.Shape[1]
	idx := make([]float32, h)
	for i := range idx {
		idx[i] = float32(i)
	}
	shape := []int{h, 1, 1}
	if unsq {
		shape = []int{1, h, 1, 1}
	}
	heads, _ := tensor.FromFloat32(idx, shape...)
	return &relBias{slopes: heads, sign: sign, emb: emb, lut: lut.I64, maxDist: int(D)}, n, append(steps, ds...), true
}

// constAny returns the constant tensor in slot s (any dtype), or nil.
func (f *fuser) constAny(s int) *tensor.Tensor {
	if s < 0 || f.p.plan.Kinds[s] != slotConst {
		return nil
	}
	return f.p.plan.Consts[s]
}

// matchRelBias recognises slot x as slopes · Cast(Abs(pos_j − pos_i)) (Abs optional, either
// operand order of the Mul and the Sub) with pos = Range(0, n, 1) and slopes a float32
// constant whose last two axes are 1. It returns the compact form, the slot holding n (the
// fused step checks at run time that it is the score matrix's size) and the steps that
// compute x. Anything else is tried as T5's bucketed bias (matchBucketBias).
func (f *fuser) matchRelBias(x int) (rb *relBias, n int, steps []int, ok bool) {
	mul, mi, ok := f.prod(x)
	if !ok || mul.Node.Op != "Mul" || len(mul.In) != 2 {
		return f.matchBucketBias(x)
	}
	var slopes *tensor.Tensor
	dist := -1
	for j := 0; j < 2; j++ {
		if t := f.constF32(mul.In[j]); t != nil && len(t.Shape) >= 2 && t.Shape[len(t.Shape)-1] == 1 && t.Shape[len(t.Shape)-2] == 1 {
			slopes, dist = t, mul.In[1-j]
		}
	}
	if slopes == nil {
		return nil, -1, nil, false
	}
	cast, ci, ok := f.prod(dist)
	if !ok || cast.Node.Op != "Cast" || cast.Node.Int("to", 0) != int64(tensor.Float32) || len(cast.In) != 1 {
		return nil, -1, nil, false
	}
	steps = []int{mi, ci}
	rb = &relBias{slopes: slopes}
	d := cast.In[0]
	if ab, ai, ok := f.prod(d); ok && ab.Node.Op == "Abs" && len(ab.In) == 1 {
		rb.abs = true
		steps = append(steps, ai)
		d = ab.In[0]
	}
	sign, n, ds, ok := f.matchRelDistance(d)
	if !ok {
		return nil, -1, nil, false
	}
	rb.sign = sign
	return rb, n, append(steps, ds...), true
}

// intConst reports whether slot s is the int64 scalar constant v.
func (f *fuser) intConst(s int, v int64) bool {
	if s < 0 || f.p.plan.Kinds[s] != slotConst {
		return false
	}
	t := f.p.plan.Consts[s]
	return t != nil && t.DType == tensor.Int64 && len(t.I64) == 1 && t.I64[0] == v
}

// dropUnread removes, until none is left, the steps none of whose outputs is read by a
// later step or is a graph output (a relative bias whose every reader now computes it
// itself, and the steps that fed it).
func (p *Program) dropUnread() {
	for {
		readers, _, output := p.stepGraph()
		keep := p.plan.Steps[:0:0]
		for _, st := range p.plan.Steps {
			used := false
			for _, s := range st.Out {
				if s >= 0 && (len(readers[s]) > 0 || output[s]) {
					used = true
				}
			}
			if used || len(st.Out) == 0 {
				keep = append(keep, st)
			}
		}
		if len(keep) == len(p.plan.Steps) {
			return
		}
		p.plan.Steps = keep
	}
}
