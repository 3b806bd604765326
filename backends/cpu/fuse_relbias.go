package cpu

import (
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

// relBias is the compact form of a relative-position bias: value(h, rel) = slope[h] · d with
// d = |rel| when abs is set and rel otherwise, rel = sign · (j − i). slopes broadcasts to
// the score matrices (one value per matrix; (h, 1, 1) for ALiBi).
type relBias struct {
	slopes *tensor.Tensor
	abs    bool
	sign   int
}

// value is the bias at distance rel = j − i for slope s, rounded as the graph rounds it: the
// integer distance converted to float32 (exact below 2²⁴), times the slope.
func (rb *relBias) value(s float32, rel int) float32 {
	d := rb.sign * rel
	if rb.abs && d < 0 {
		d = -d
	}
	return float32(d) * s
}

// table returns the bias of one matrix with slope s for every distance j − i of an nq × nk
// score matrix: entry j − i + nq − 1.
func (rb *relBias) table(s float32, nq, nk int, dst []float32) []float32 {
	dst = append(dst[:0], make([]float32, nq+nk-1)...)
	for t := range dst {
		dst[t] = rb.value(s, t-(nq-1))
	}
	return dst
}

// matchRelBias recognises slot x as slopes · Cast(Abs(pos_j − pos_i)) (Abs optional, either
// operand order of the Mul and the Sub) with pos = Range(0, n, 1) and slopes a float32
// constant whose last two axes are 1. It returns the compact form, the slot holding n (the
// fused step checks at run time that it is the score matrix's size) and the steps that
// compute x.
func (f *fuser) matchRelBias(x int) (rb *relBias, n int, steps []int, ok bool) {
	p := f.p
	prod := func(s int) (step, int, bool) {
		if s < 0 || p.plan.Kinds[s] != slotNode {
			return step{}, -1, false
		}
		pi := f.producer[s]
		if pi < 0 || f.dead[pi] || len(p.plan.Steps[pi].Out) != 1 {
			return step{}, -1, false
		}
		return p.plan.Steps[pi], pi, true
	}
	mul, mi, ok := prod(x)
	if !ok || mul.Node.Op != "Mul" || len(mul.In) != 2 {
		return nil, -1, nil, false
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
	cast, ci, ok := prod(dist)
	if !ok || cast.Node.Op != "Cast" || cast.Node.Int("to", 0) != int64(tensor.Float32) || len(cast.In) != 1 {
		return nil, -1, nil, false
	}
	steps = []int{mi, ci}
	rb = &relBias{slopes: slopes, sign: 1}
	d := cast.In[0]
	if ab, ai, ok := prod(d); ok && ab.Node.Op == "Abs" && len(ab.In) == 1 {
		rb.abs = true
		steps = append(steps, ai)
		d = ab.In[0]
	}
	sub, si, ok := prod(d)
	if !ok || sub.Node.Op != "Sub" || len(sub.In) != 2 {
		return nil, -1, nil, false
	}
	// Sub(Unsqueeze(pos, 0), Unsqueeze(pos, 1)) is element (i, j) = pos[j] − pos[i].
	pos, axis := [2]int{}, [2]int64{}
	steps = append(steps, si)
	for j := 0; j < 2; j++ {
		u, ui, ok := prod(sub.In[j])
		if !ok || u.Node.Op != "Unsqueeze" || len(u.In) != 2 {
			return nil, -1, nil, false
		}
		ax := f.p.plan.Consts[u.In[1]]
		if u.In[1] < 0 || p.plan.Kinds[u.In[1]] != slotConst || ax == nil || ax.DType != tensor.Int64 || len(ax.I64) != 1 {
			return nil, -1, nil, false
		}
		pos[j], axis[j] = u.In[0], ax.I64[0]
		steps = append(steps, ui)
	}
	switch {
	case pos[0] != pos[1]:
		return nil, -1, nil, false
	case axis == [2]int64{0, 1}:
	case axis == [2]int64{1, 0}:
		rb.sign = -1
	default:
		return nil, -1, nil, false
	}
	rg, ri, ok := prod(pos[0])
	if !ok || rg.Node.Op != "Range" || len(rg.In) != 3 || !f.intConst(rg.In[0], 0) || !f.intConst(rg.In[2], 1) || !f.runtime(rg.In[1]) {
		return nil, -1, nil, false
	}
	return rb, rg.In[1], append(steps, ri), true
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
