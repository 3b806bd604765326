package onnx

import (
	"fmt"
	"slices"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Export at opset 23 writes the rope variant's rotate-half rotation as ONNX's RotaryEmbedding
// where it is exactly that op: for x (B, heads, n, d_k) and cos/sin tables T (max_len, d_k)
// whose two halves are equal (cat(cos φ, cos φ)),
//
//	x·Slice(T_cos, 0, n) + Concat(−x[..., h:], x[..., :h])·Slice(T_sin, 0, n),  h = d_k/2
//
// is RotaryEmbedding(x, T_cos[:, :h], T_sin[:, :h], position_ids) with position_ids
// (B, n) = 0 … n−1 on every row (computed once for the graph). Partial and interleaved
// rotations are left as they are. Below 23 the matched rotations are listed as decomposed.

type rotaryMatch struct {
	nodes     map[*graph.Node]bool
	last      *graph.Node
	x         string
	cos, sin  string // the full tables (initializers)
	n         string // the 1-element int64 sequence length the tables are sliced to
	cosSlices []*graph.Node
	// interleaved pairs features 2i and 2i+1 (the tables repeat each angle twice in a row).
	interleaved bool
}

func (l *lowering) matchRotary(nodes []*graph.Node) []*rotaryMatch {
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
		uses[o.Name] += 2
	}
	single := func(name, op string) *graph.Node {
		p := producer[name]
		if p == nil || p.Op != op || uses[name] != 1 || !isONNXDomain(p.Domain) {
			return nil
		}
		return p
	}
	ints := func(name string) []int64 {
		if t := l.g.Initializer(name); t != nil && t.DType == tensor.Int64 {
			return t.I64
		}
		return nil
	}
	// lastAxisSlice reports a Slice of x on axis 3 (or -1) from start to end.
	lastAxisSlice := func(s *graph.Node) (x string, start, end int64, ok bool) {
		if s == nil || len(s.Inputs) != 4 {
			return "", 0, 0, false
		}
		st, en, ax := ints(s.Inputs[1]), ints(s.Inputs[2]), ints(s.Inputs[3])
		if len(st) != 1 || len(en) != 1 || len(ax) != 1 || (ax[0] != 3 && ax[0] != -1) {
			return "", 0, 0, false
		}
		return s.Inputs[0], st[0], en[0], true
	}
	// table reports a Slice(T, [0], n, [0]) of a constant table T with equal halves (or, when
	// interleaved, equal neighbours 2i and 2i+1).
	table := func(name string, half int64, interleaved bool) (string, string, *graph.Node, bool) {
		s := producer[name]
		if s == nil || s.Op != "Slice" || len(s.Inputs) != 4 {
			return "", "", nil, false
		}
		st, ax := ints(s.Inputs[1]), ints(s.Inputs[3])
		t := l.g.Initializer(s.Inputs[0])
		if len(st) != 1 || st[0] != 0 || len(ax) != 1 || ax[0] != 0 || t == nil || t.DType != tensor.Float32 || len(t.Shape) != 2 || int64(t.Shape[1]) != 2*half {
			return "", "", nil, false
		}
		h := int(half)
		for r := 0; r < t.Shape[0]; r++ {
			for i := 0; i < h; i++ {
				a, b := r*2*h+i, r*2*h+h+i
				if interleaved {
					a, b = r*2*h+2*i, r*2*h+2*i+1
				}
				if t.F32[a] != t.F32[b] {
					return "", "", nil, false
				}
			}
		}
		return s.Inputs[0], s.Inputs[2], s, true
	}
	var out []*rotaryMatch
	for _, add := range nodes {
		if add.Op != "Add" || len(add.Inputs) != 2 || !isONNXDomain(add.Domain) {
			continue
		}
		for _, order := range [][2]string{{add.Inputs[0], add.Inputs[1]}, {add.Inputs[1], add.Inputs[0]}} {
			a, b := single(order[0], "Mul"), single(order[1], "Mul")
			if a == nil || b == nil {
				continue
			}
			m := l.rotaryFrom(add, a, b, single, lastAxisSlice, table, producer, ints)
			if m != nil {
				out = append(out, m)
				break
			}
		}
	}
	return out
}

// rotaryFrom checks a = x·cos and b = rotate_half(x)·sin (either operand order of each Mul).
func (l *lowering) rotaryFrom(add, a, b *graph.Node, single func(string, string) *graph.Node,
	lastAxisSlice func(*graph.Node) (string, int64, int64, bool),
	table func(string, int64, bool) (string, string, *graph.Node, bool),
	producer map[string]*graph.Node, ints func(string) []int64) *rotaryMatch {
	for _, bo := range [][2]string{{b.Inputs[0], b.Inputs[1]}, {b.Inputs[1], b.Inputs[0]}} {
		if m := l.interleavedFrom(add, a, b, bo, single, table, ints); m != nil {
			return m
		}
		cat := single(bo[0], "Concat")
		if cat == nil || len(cat.Inputs) != 2 || (cat.Int("axis", 0) != 3 && cat.Int("axis", 0) != -1) {
			continue
		}
		neg := single(cat.Inputs[0], "Neg")
		if neg == nil {
			continue
		}
		x2src, s2, e2, ok2 := lastAxisSlice(single(neg.Inputs[0], "Slice"))
		x1src, s1, e1, ok1 := lastAxisSlice(single(cat.Inputs[1], "Slice"))
		if !ok1 || !ok2 || x1src != x2src || s1 != 0 || e1 != s2 || e1 <= 0 {
			continue
		}
		half, x := e1, x1src
		shape := l.shape(x)
		if len(shape) != 4 || !shape[3].Known() || shape[3].Size != 2*half || e2 < 2*half {
			continue
		}
		sinT, nSin, sinSlice, ok := table(bo[1], half, false)
		if !ok {
			continue
		}
		for _, ao := range [][2]string{{a.Inputs[0], a.Inputs[1]}, {a.Inputs[1], a.Inputs[0]}} {
			if ao[0] != x {
				continue
			}
			cosT, nCos, cosSlice, ok := table(ao[1], half, false)
			if !ok || nCos != nSin {
				continue
			}
			nodes := map[*graph.Node]bool{add: true, a: true, b: true, cat: true, neg: true}
			for _, name := range []string{neg.Inputs[0], cat.Inputs[1]} {
				for _, n := range []*graph.Node{single(name, "Slice")} {
					nodes[n] = true
				}
			}
			return &rotaryMatch{nodes: nodes, last: add, x: x, cos: cosT, sin: sinT, n: nCos, cosSlices: []*graph.Node{cosSlice, sinSlice}}
		}
	}
	return nil
}

// interleavedFrom checks b = rotate_pairs(x)·sin for the interleaved layout, where
// rotate_pairs(x) = Reshape(Concat(−odd, even, axis 4), [0, 0, 0, d_k]) with even and odd the
// two slices of Reshape(x, [0, 0, 0, d_k/2, 2]) on axis 4, and a = x·cos.
func (l *lowering) interleavedFrom(add, a, b *graph.Node, bo [2]string, single func(string, string) *graph.Node,
	table func(string, int64, bool) (string, string, *graph.Node, bool), ints func(string) []int64) *rotaryMatch {
	back := single(bo[0], "Reshape")
	if back == nil {
		return nil
	}
	cat := single(back.Inputs[0], "Concat")
	if cat == nil || len(cat.Inputs) != 2 || (cat.Int("axis", 0) != 4 && cat.Int("axis", 0) != -1) {
		return nil
	}
	neg := single(cat.Inputs[0], "Neg")
	if neg == nil {
		return nil
	}
	pairSlice := func(s *graph.Node, want int64) (string, bool) {
		if s == nil || len(s.Inputs) != 4 {
			return "", false
		}
		st, en, ax := ints(s.Inputs[1]), ints(s.Inputs[2]), ints(s.Inputs[3])
		ok := len(st) == 1 && st[0] == want && len(en) == 1 && en[0] == want+1 && len(ax) == 1 && (ax[0] == 4 || ax[0] == -1)
		return s.Inputs[0], ok
	}
	odd, even := single(neg.Inputs[0], "Slice"), single(cat.Inputs[1], "Slice")
	p1, ok1 := pairSlice(odd, 1)
	p0, ok0 := pairSlice(even, 0)
	if !ok0 || !ok1 || p0 != p1 {
		return nil
	}
	pairs := l.producerOf(p0)
	if pairs == nil || pairs.Op != "Reshape" {
		return nil
	}
	x := pairs.Inputs[0]
	shape := l.shape(x)
	if len(shape) != 4 || !shape[3].Known() || shape[3].Size%2 != 0 {
		return nil
	}
	dk := shape[3].Size
	if s := ints(pairs.Inputs[1]); !slices.Equal(s, []int64{0, 0, 0, dk / 2, 2}) {
		return nil
	}
	if s := ints(back.Inputs[1]); !slices.Equal(s, []int64{0, 0, 0, dk}) {
		return nil
	}
	sinT, nSin, sinSlice, ok := table(bo[1], dk/2, true)
	if !ok {
		return nil
	}
	for _, ao := range [][2]string{{a.Inputs[0], a.Inputs[1]}, {a.Inputs[1], a.Inputs[0]}} {
		if ao[0] != x {
			continue
		}
		cosT, nCos, cosSlice, ok := table(ao[1], dk/2, true)
		if !ok || nCos != nSin {
			continue
		}
		nodes := map[*graph.Node]bool{add: true, a: true, b: true, back: true, cat: true, neg: true, odd: true, even: true}
		if l.usesOf(p0) == 2 {
			nodes[pairs] = true
		}
		return &rotaryMatch{nodes: nodes, last: add, x: x, cos: cosT, sin: sinT, n: nCos, interleaved: true, cosSlices: []*graph.Node{cosSlice, sinSlice}}
	}
	return nil
}

// fuseRotary returns nodes with each matched rotation replaced by RotaryEmbedding at opset
// 23 and later (the half tables and the position ids made once); below, it records them as
// decomposed.
func (l *lowering) fuseRotary(nodes []*graph.Node) []*graph.Node {
	ms := l.matchRotary(nodes)
	if len(ms) == 0 {
		return nodes
	}
	in := map[*graph.Node]*rotaryMatch{}
	for _, m := range ms {
		for n := range m.nodes {
			in[n] = m
		}
	}
	halves := map[string]string{}
	interleaved := map[string]bool{}
	for _, m := range ms {
		interleaved[m.cos], interleaved[m.sin] = m.interleaved, m.interleaved
	}
	half := func(table string) string {
		if h, ok := halves[table]; ok {
			return h
		}
		t := l.g.Initializer(table)
		w := t.Shape[1] / 2
		data := make([]float32, 0, t.Shape[0]*w)
		for r := 0; r < t.Shape[0]; r++ {
			for i := 0; i < w; i++ {
				if interleaved[table] {
					data = append(data, t.F32[r*2*w+2*i])
				} else {
					data = append(data, t.F32[r*2*w+i])
				}
			}
		}
		ht, _ := tensor.FromFloat32(data, t.Shape[0], w)
		name := constPrefixAdapter + l.fresh(table+"/half")
		l.g.Initializers = append(l.g.Initializers, graph.Initializer{Name: name, Tensor: ht})
		halves[table] = name
		return name
	}
	positions := map[string]string{}
	var out []*graph.Node
	for _, n := range nodes {
		m := in[n]
		if m == nil {
			out = append(out, n)
			continue
		}
		name := rotaryName(m)
		if l.opset < 23 {
			if n == m.last {
				l.dec[name] = "RotaryEmbedding"
			}
			out = append(out, n)
			continue
		}
		if n != m.last {
			continue
		}
		pos, ok := positions[m.n]
		if !ok {
			var extra []*graph.Node
			pos, extra = l.positionIDs(m)
			out = append(out, extra...)
			positions[m.n] = pos
		}
		var attrs graph.Attrs
		if m.interleaved {
			attrs = graph.Attrs{"interleaved": graph.Int(1)}
		}
		out = append(out, &graph.Node{Name: name, Op: "RotaryEmbedding", Inputs: []string{m.x, half(m.cos), half(m.sin), pos}, Outputs: []string{n.Outputs[0]}, Attrs: attrs})
	}
	return l.dropUnused(out, ms)
}

// positionIDs returns (B, n) int64 position ids 0 … n−1, from x's batch and the tables' n.
func (l *lowering) positionIDs(m *rotaryMatch) (string, []*graph.Node) {
	base := "rope/position_ids"
	scalar, rng, row, batch, shp, pos := l.fresh(base+"/n"), l.fresh(base+"/range"), l.fresh(base+"/row"), l.fresh(base+"/batch"), l.fresh(base+"/shape"), l.fresh(base)
	zero := constPrefixAdapter + l.fresh(base+"/zero")
	one := constPrefixAdapter + l.fresh(base+"/one")
	l.g.Initializers = append(l.g.Initializers, graph.Initializer{Name: zero, Tensor: tensor.Scalar64(0)}, graph.Initializer{Name: one, Tensor: tensor.Scalar64(1)})
	return pos, []*graph.Node{
		{Name: scalar, Op: "Squeeze", Inputs: []string{m.n, l.constInts(base+"/axes", 0)}, Outputs: []string{scalar}},
		{Name: rng, Op: "Range", Inputs: []string{zero, scalar, one}, Outputs: []string{rng}},
		{Name: row, Op: "Unsqueeze", Inputs: []string{rng, l.constInts(base+"/axes0", 0)}, Outputs: []string{row}},
		{Name: batch, Op: "Shape", Inputs: []string{m.x}, Outputs: []string{batch}, Attrs: graph.Attrs{"start": graph.Int(0), "end": graph.Int(1)}},
		{Name: shp, Op: "Concat", Inputs: []string{batch, m.n}, Outputs: []string{shp}, Attrs: graph.Attrs{"axis": graph.Int(0)}},
		{Name: pos, Op: "Expand", Inputs: []string{row, shp}, Outputs: []string{pos}},
	}
}

// dropUnused removes the table slices that only the fused rotations read.
func (l *lowering) dropUnused(nodes []*graph.Node, ms []*rotaryMatch) []*graph.Node {
	cand := map[*graph.Node]bool{}
	for _, m := range ms {
		for _, s := range m.cosSlices {
			cand[s] = true
		}
	}
	used := map[string]bool{}
	for _, n := range nodes {
		for _, in := range n.Inputs {
			used[in] = true
		}
	}
	for _, o := range l.g.Outputs {
		used[o.Name] = true
	}
	var out []*graph.Node
	for _, n := range nodes {
		if cand[n] && !used[n.Outputs[0]] {
			continue
		}
		out = append(out, n)
	}
	return out
}

// rotaryName names a rotation after its final Add ("layers.0.self_attn/Add_1" →
// "layers.0.self_attn/RotaryEmbedding_Add_1").
func rotaryName(m *rotaryMatch) string {
	name := m.last.Name
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] == '/' {
			return fmt.Sprintf("%s/RotaryEmbedding_%s", name[:i], name[i+1:])
		}
	}
	return "RotaryEmbedding_" + name
}

// producerOf returns the node of the graph being exported that writes value name, or nil.
func (l *lowering) producerOf(name string) *graph.Node {
	for _, n := range l.orig {
		for _, o := range n.Outputs {
			if o == name {
				return n
			}
		}
	}
	return nil
}

// usesOf counts the inputs of the graph's nodes that read value name.
func (l *lowering) usesOf(name string) int {
	c := 0
	for _, n := range l.orig {
		for _, in := range n.Inputs {
			if in == name {
				c++
			}
		}
	}
	return c
}
