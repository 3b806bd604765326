package onnx

import (
	"fmt"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Export at opset 23 writes zoo's scaled dot-product attention blocks as ONNX's Attention
// where the block's math is exactly Attention's: for 4-D q, k, v (B, heads, n, d_k)
//
//	MatMul(Softmax(scale(MatMul(q, Transpose(k, [0, 1, 3, 2]))) [+ bias], -1), v)
//
// with scale a division or multiplication by a scalar constant (or none), and bias a float
// mask broadcastable to the scores, is Attention(q, k, v, bias) with that scale. The
// intermediate values must have no other use. vanilla's and alibi's blocks match directly;
// gqa's folds each group's query heads into one (r·n, d_k) block per key/value head, which is
// Attention with q_seq = r·n. Below 23 the same blocks are listed as decomposed.

// attentionMatch is one matched block: the nodes it replaces and the Attention node.
type attentionMatch struct {
	nodes map[*graph.Node]bool
	last  *graph.Node
	q, k  string
	v     string
	bias  string
	scale float32
	has   bool // scale given (not the default 1/√d_k)
}

// matchAttention finds the attention blocks of nodes.
func (l *lowering) matchAttention(nodes []*graph.Node) []*attentionMatch {
	producer := map[string]*graph.Node{}
	uses := map[string]int{}
	for _, n := range nodes {
		for _, o := range n.Outputs {
			producer[o] = n
		}
		for _, in := range n.Inputs {
			uses[in]++
		}
	}
	for _, o := range l.g.Outputs {
		uses[o.Name] += 2 // never fold a graph output away
	}
	single := func(name, op string) *graph.Node {
		p := producer[name]
		if p == nil || p.Op != op || uses[name] != 1 || !isONNXDomain(p.Domain) {
			return nil
		}
		return p
	}
	var out []*attentionMatch
	for _, mm := range nodes {
		if mm.Op != "MatMul" || len(mm.Inputs) != 2 || !isONNXDomain(mm.Domain) {
			continue
		}
		sm := single(mm.Inputs[0], "Softmax")
		if sm == nil {
			continue
		}
		m := &attentionMatch{nodes: map[*graph.Node]bool{mm: true, sm: true}, last: mm, v: mm.Inputs[1]}
		s := sm.Inputs[0]
		if r := l.rank(s); r != 4 {
			continue
		}
		if a := sm.Int("axis", -1); a != -1 && a != 3 {
			continue
		}
		if add := single(s, "Add"); add != nil {
			bias, scores := add.Inputs[1], add.Inputs[0]
			if single(scores, "MatMul") == nil && single(scores, "Div") == nil && single(scores, "Mul") == nil {
				bias, scores = scores, bias
			}
			if !l.floatMask(bias) {
				continue
			}
			m.nodes[add], m.bias, s = true, bias, scores
		}
		if sc := single(s, "Div"); sc != nil {
			c, ok := l.scalar(sc.Inputs[1])
			if !ok || c == 0 {
				continue
			}
			m.nodes[sc], m.scale, m.has, s = true, 1/c, true, sc.Inputs[0]
		} else if sc := single(s, "Mul"); sc != nil {
			c, ok := l.scalar(sc.Inputs[1])
			x := sc.Inputs[0]
			if !ok {
				if c, ok = l.scalar(sc.Inputs[0]); !ok {
					continue
				}
				x = sc.Inputs[1]
			}
			m.nodes[sc], m.scale, m.has, s = true, c, true, x
		} else {
			m.scale, m.has = 1, true
		}
		qk := single(s, "MatMul")
		if qk == nil {
			continue
		}
		kt := single(qk.Inputs[1], "Transpose")
		if kt == nil {
			continue
		}
		if p, _ := kt.IntList("perm"); len(p) != 4 || p[0] != 0 || p[1] != 1 || p[2] != 3 || p[3] != 2 {
			continue
		}
		m.nodes[qk], m.nodes[kt] = true, true
		m.q, m.k = qk.Inputs[0], kt.Inputs[0]
		if l.rank(m.q) != 4 || l.rank(m.k) != 4 || l.rank(m.v) != 4 {
			continue
		}
		out = append(out, m)
	}
	return out
}

// floatMask reports whether name is a float32 value of rank at most 4.
func (l *lowering) floatMask(name string) bool {
	if t := l.g.Initializer(name); t != nil {
		return t.DType == tensor.Float32 && len(t.Shape) <= 4
	}
	l.shape(name)
	v, ok := l.inferred[name]
	if !ok {
		for _, in := range l.g.Inputs {
			if in.Name == name {
				v, ok = in, true
			}
		}
	}
	return ok && v.DType == tensor.Float32 && v.Shape != nil && len(v.Shape) <= 4
}

// scalar returns the value of a one-element float32 constant.
func (l *lowering) scalar(name string) (float32, bool) {
	t := l.g.Initializer(name)
	if t == nil || t.DType != tensor.Float32 || len(t.F32) != 1 {
		return 0, false
	}
	return t.F32[0], true
}

// fuseAttention returns nodes with each matched block replaced by one Attention node at
// opset 23 and later; below, it leaves them and records each block as decomposed.
func (l *lowering) fuseAttention(nodes []*graph.Node) []*graph.Node {
	ms := l.matchAttention(nodes)
	if len(ms) == 0 {
		return nodes
	}
	in := map[*graph.Node]*attentionMatch{}
	for _, m := range ms {
		for n := range m.nodes {
			in[n] = m
		}
	}
	named := map[*attentionMatch]string{}
	taken := map[string]bool{}
	for _, n := range nodes {
		taken[n.Name] = true
	}
	for _, m := range ms {
		name := attentionName(m)
		for i := 2; taken[name]; i++ {
			name = fmt.Sprintf("%s_%d", attentionName(m), i)
		}
		taken[name] = true
		named[m] = name
	}
	var out []*graph.Node
	for _, n := range nodes {
		m := in[n]
		if m == nil {
			out = append(out, n)
			continue
		}
		if l.opset < 23 {
			if n == m.last {
				l.dec[named[m]] = "Attention"
			}
			out = append(out, n)
			continue
		}
		if n != m.last {
			continue
		}
		name := named[m]
		ins := []string{m.q, m.k, m.v}
		if m.bias != "" {
			bias, extra := l.maskRows(name, m)
			out = append(out, extra...)
			ins = append(ins, bias)
		}
		attrs := graph.Attrs{}
		if m.has {
			attrs["scale"] = graph.Float(m.scale)
		}
		out = append(out, &graph.Node{Name: name, Op: "Attention", Inputs: ins, Outputs: []string{n.Outputs[0]}, Attrs: attrs})
	}
	return out
}

// maskRows returns the block's mask with one row per query: ONNX Runtime (1.30) requires the
// mask's second-to-last dimension to be q_seq rather than broadcast from 1, so a (B, 1, 1, n)
// padding bias is expanded to (B, 1, q_seq, n) by Shape(q)[2:3] → Concat → Expand, which
// changes no value.
func (l *lowering) maskRows(name string, m *attentionMatch) (string, []*graph.Node) {
	bs, qs := l.shape(m.bias), l.shape(m.q)
	if len(bs) >= 2 && len(qs) == 4 && bs[len(bs)-2].Known() && qs[2].Known() && bs[len(bs)-2].Size == qs[2].Size {
		return m.bias, nil
	}
	seq, shp, bias := l.fresh(name+"/q_seq"), l.fresh(name+"/mask_shape"), l.fresh(name+"/mask")
	return bias, []*graph.Node{
		{Name: seq, Op: "Shape", Inputs: []string{m.q}, Outputs: []string{seq}, Attrs: graph.Attrs{"start": graph.Int(2), "end": graph.Int(3)}},
		{Name: shp, Op: "Concat", Inputs: []string{l.constInts(name+"/ones", 1, 1), seq, l.constInts(name+"/one", 1)}, Outputs: []string{shp}, Attrs: graph.Attrs{"axis": graph.Int(0)}},
		{Name: bias, Op: "Expand", Inputs: []string{m.bias, shp}, Outputs: []string{bias}},
	}
}

// attentionName names a block after its last MatMul's scope ("layers.0.self_attn/MatMul_3"
// → "layers.0.self_attn/Attention").
func attentionName(m *attentionMatch) string {
	name := m.last.Name
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] == '/' {
			return name[:i+1] + "Attention"
		}
	}
	return name + "/Attention"
}
