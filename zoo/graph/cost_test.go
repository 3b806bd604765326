package graph_test

import (
	"math"
	"testing"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

func TestCostPerOp(t *testing.T) {
	cases := []struct {
		name   string
		build  func(b *graph.Builder) string
		inputs map[string][]int
		flops  int64
	}{
		{"matmul", func(b *graph.Builder) string {
			return b.MatMul(b.Input("a", f32, batch, fx(3), fx(4)), b.Input("b", f32, fx(4), fx(5)))
		}, map[string][]int{"a": {2, 3, 4}, "b": {4, 5}}, 2 * 2 * 3 * 4 * 5},
		{"matmul broadcast batch", func(b *graph.Builder) string {
			return b.MatMul(b.Input("a", f32, fx(5), fx(1), fx(3), fx(4)), b.Input("b", f32, fx(6), fx(4), fx(2)))
		}, map[string][]int{"a": {5, 1, 3, 4}, "b": {6, 4, 2}}, 2 * 5 * 6 * 3 * 4 * 2},
		{"matmul vector", func(b *graph.Builder) string {
			return b.MatMul(b.Input("a", f32, fx(64)), b.Input("b", f32, fx(64), fx(8)))
		}, map[string][]int{"a": {64}, "b": {64, 8}}, 2 * 64 * 8},
		{"gemm with C", func(b *graph.Builder) string {
			return b.Op("Gemm", []string{b.Input("a", f32, fx(4), fx(8)), b.Input("b", f32, fx(16), fx(8)), b.Input("c", f32, fx(16))},
				graph.Attrs{"transB": graph.Int(1)})
		}, map[string][]int{"a": {4, 8}, "b": {16, 8}, "c": {16}}, 2*4*8*16 + 4*16},
		{"gemm without C, transA", func(b *graph.Builder) string {
			return b.Op("Gemm", []string{b.Input("a", f32, fx(8), fx(4)), b.Input("b", f32, fx(8), fx(16))},
				graph.Attrs{"transA": graph.Int(1)})
		}, map[string][]int{"a": {8, 4}, "b": {8, 16}}, 2 * 4 * 8 * 16},
		{"add broadcast counts output", func(b *graph.Builder) string {
			return b.Add(b.Input("a", f32, fx(2), fx(1)), b.Input("b", f32, fx(3)))
		}, map[string][]int{"a": {2, 1}, "b": {3}}, 6},
		{"where", func(b *graph.Builder) string {
			return b.Where(b.Input("c", tensor.Bool, batch, seq), b.ConstFloat(1), b.ConstFloat(0))
		}, map[string][]int{"c": {2, 7}}, 14},
		{"max of three", func(b *graph.Builder) string {
			return b.Op("Max", []string{b.Input("a", f32, fx(2), fx(3)), b.Input("b", f32, fx(3)), b.Input("c", f32, fx(1))}, nil)
		}, map[string][]int{"a": {2, 3}, "b": {3}, "c": {1}}, 2 * 6},
		{"erf counts one", func(b *graph.Builder) string {
			return b.Op("Erf", []string{b.Input("a", f32, fx(2), fx(3))}, nil)
		}, map[string][]int{"a": {2, 3}}, 6},
		{"softmax", func(b *graph.Builder) string {
			return b.Softmax(b.Input("a", f32, fx(2), fx(3), fx(5)), -1)
		}, map[string][]int{"a": {2, 3, 5}}, 5 * 30},
		{"layernorm", func(b *graph.Builder) string {
			w := b.Const(mustF(make([]float32, 4), 4))
			return b.LayerNorm(b.Input("a", f32, fx(2), fx(3), fx(4)), w, w, 1e-5)
		}, map[string][]int{"a": {2, 3, 4}}, 8 * 24},
		{"reducemean counts input", func(b *graph.Builder) string {
			return b.Op("ReduceMean", []string{b.Input("a", f32, fx(2), fx(3), fx(4))}, graph.Attrs{"axes": graph.Ints(-1)})
		}, map[string][]int{"a": {2, 3, 4}}, 24},
		{"data movement is free", func(b *graph.Builder) string {
			x := b.Input("a", f32, batch, seq, fx(8))
			y := b.Transpose(b.Reshape(x, 0, 0, 2, 4), 0, 2, 1, 3)
			y = b.Op("Concat", []string{y, y}, graph.Attrs{"axis": graph.Int(1)})
			y = b.Slice(y, b.ConstInts(1), b.ConstInts(3), b.ConstInts(1))
			y = b.Op("Expand", []string{y, b.ConstInts(2, 1, 1, 1)}, nil)
			y = b.Unsqueeze(b.Gather(y, scalarI(b, 0), 1), 0)
			return b.Op("Cast", []string{y}, graph.Attrs{"to": graph.Int(int64(f32))})
		}, map[string][]int{"a": {2, 5, 8}}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := buildOne(t, tc.build)
			c, err := g.Cost(tc.inputs)
			if err != nil {
				t.Fatal(err)
			}
			if c.FLOPs != tc.flops {
				t.Errorf("FLOPs %d, want %d (by op %v)", c.FLOPs, tc.flops, c.ByOp)
			}
			var sum int64
			for _, f := range c.ByOp {
				sum += f
			}
			if sum != c.FLOPs {
				t.Errorf("ByOp sums to %d, FLOPs %d", sum, c.FLOPs)
			}
		})
	}
}

// Memory accounting on a chain: x (2,3) → a = x·W (2,100) → b = ReduceSum(a) (2,1) →
// c = x*b (2,3) → out = Identity(c).
func TestCostMemory(t *testing.T) {
	b := graph.NewBuilder("mem")
	x := b.Input("x", f32, batch, fx(3))
	w := b.Param("w", mustF(make([]float32, 300), 3, 100))
	a := b.MatMul(x, w)
	r := b.Op("ReduceSum", []string{a, b.ConstInts(-1)}, nil)
	b.Output("out", b.Mul(x, r), f32)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	c, err := g.Cost(map[string][]int{"x": {2, 3}})
	if err != nil {
		t.Fatal(err)
	}
	// Live: x 24; +a 800 → 824; +r 8 → 832 (peak), a freed → 32; +c 24 → 56, x and r
	// freed → 24; +out 24 → 48, c freed → 24.
	want := graph.Cost{
		FLOPs:              2*2*3*100 + 200 + 6,
		ParamBytes:         300*4 + 8,
		ActivationBytes:    832,
		SumActivationBytes: 24 + 800 + 8 + 24 + 24,
	}
	if c.FLOPs != want.FLOPs || c.ParamBytes != want.ParamBytes || c.ActivationBytes != want.ActivationBytes || c.SumActivationBytes != want.SumActivationBytes {
		t.Errorf("cost %+v, want %+v", c, want)
	}
	if c.ByOp["MatMul"] != 1200 || c.ByOp["ReduceSum"] != 200 || c.ByOp["Mul"] != 6 {
		t.Errorf("ByOp %v", c.ByOp)
	}
	if _, err := g.Cost(map[string][]int{}); err == nil {
		t.Error("missing input shape: no error")
	}
	if _, err := (*graph.Graph)(nil).Cost(nil); err == nil {
		t.Error("nil graph: no error")
	}
}

// vanillaFLOPs counts the tiny vanilla encoder by hand: batch B, length n, width d, h heads,
// FFN width dff, vocabulary V, L post-LN layers with ReLU.
func vanillaFLOPs(B, n, d, h, dff, V, L int64) (total, matmul, quadratic int64) {
	tokens := B * n
	perLayer := int64(0)
	// Q, K, V, O projections: MatMul + bias Add each.
	perLayer += 4 * (2*tokens*d*d + tokens*d)
	// Scores Q·Kᵀ and weights·V: 2·B·h·n·n·(d/h) each.
	quad := 2*B*n*n*d + 2*B*n*n*d
	// Divide by √dk, add the mask bias, softmax (5 per element).
	quad += B*h*n*n + B*h*n*n + 5*B*h*n*n
	perLayer += quad
	// Residual Add + LayerNorm, twice.
	perLayer += 2 * (tokens*d + 8*tokens*d)
	// FFN: Linear(d, dff) + bias, ReLU, Linear(dff, d) + bias.
	perLayer += 2*tokens*d*dff + tokens*dff + tokens*dff + 2*tokens*dff*d + tokens*d
	total = L * perLayer
	total += tokens * d              // positional encoding Add
	total += tokens                  // mask Where
	total += 2*tokens*d*V + tokens*V // output projection fc
	matmul = L*(4*2*tokens*d*d+4*B*n*n*d+4*tokens*d*dff) + 2*tokens*d*V
	return total, matmul, L * quad
}

func TestCostVanilla(t *testing.T) {
	g := tinyVanilla(t)
	const d, h, dff, V, L = 64, 4, 128, 257, 2
	cost := func(B, n int) graph.Cost {
		t.Helper()
		c, err := g.Cost(map[string][]int{"tokens": {B, n}, "key_padding_mask": {B, n}})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	const B, n = 2, 37
	c1, c2 := cost(B, n), cost(B, 2*n)
	for _, tc := range []struct {
		n int64
		c graph.Cost
	}{{n, c1}, {2 * n, c2}} {
		total, matmul, _ := vanillaFLOPs(B, tc.n, d, h, dff, V, L)
		if tc.c.FLOPs != total {
			t.Errorf("n=%d: FLOPs %d, want %d (by op %v)", tc.n, tc.c.FLOPs, total, tc.c.ByOp)
		}
		if got := tc.c.ByOp["MatMul"]; got != matmul {
			t.Errorf("n=%d: MatMul FLOPs %d, want %d", tc.n, got, matmul)
		}
		if got, want := tc.c.ByOp["Softmax"], int64(L*5*B*h*tc.n*tc.n); got != want {
			t.Errorf("n=%d: Softmax FLOPs %d, want %d", tc.n, got, want)
		}
		if got, want := tc.c.ByOp["LayerNormalization"], int64(L*2*8*B*tc.n*d); got != want {
			t.Errorf("n=%d: LayerNormalization FLOPs %d, want %d", tc.n, got, want)
		}
	}
	// Linear terms cancel in Cost(2n) − 2·Cost(n), leaving 4n² − 2n² = 2n² times the
	// per-n² coefficient: L·B·(4·d + 7·h) (two attention MatMuls, Div, mask Add, 5·softmax).
	_, _, quad := vanillaFLOPs(B, n, d, h, dff, V, L)
	if got, want := c2.FLOPs-2*c1.FLOPs, 2*quad; got != want {
		t.Errorf("Cost(2n) − 2·Cost(n) = %d, want the n² part doubled, %d", got, want)
	}
	if want := int64(L * B * (4*d + 7*h) * 2 * n * n); 2*quad != want {
		t.Errorf("hand formula inconsistent: %d vs %d", 2*quad, want)
	}

	// The attention MatMuls of one sequence are the seed's estimate, doubled (multiply-add = 2).
	one := cost(1, n)
	wantMatMul := int64(L)*(2*graph.SeedFLOPs(n, d)+4*n*d*dff) + 2*n*d*V
	if got := one.ByOp["MatMul"]; got != wantMatMul {
		t.Errorf("B=1 MatMul FLOPs %d, want L·(2·SeedFLOPs + FFN) + fc = %d", got, wantMatMul)
	}

	// Memory: the scores (B, h, n, n) float32 are live at the peak; params include the table.
	scores := int64(B * h * n * n * 4)
	if c1.ActivationBytes < 2*scores || c1.ActivationBytes > c1.SumActivationBytes {
		t.Errorf("peak activations %d, scores %d, sum %d", c1.ActivationBytes, scores, c1.SumActivationBytes)
	}
	if floor := g.ParamCount()*4 + 128*64*4; c1.ParamBytes < floor {
		t.Errorf("ParamBytes %d < %d (params + positional table)", c1.ParamBytes, floor)
	}
	if c2.ActivationBytes <= c1.ActivationBytes || c2.ParamBytes != c1.ParamBytes {
		t.Errorf("memory at 2n: %+v vs n: %+v", c2, c1)
	}
}

func TestSeedFLOPs(t *testing.T) {
	cases := []struct{ n, d, want int64 }{
		{4096, 512, 4*4096*512*512 + 2*4096*4096*512},
		{1, 1, 6},
		{0, 512, 0},
		{-1, 512, -1},
		{math.MaxInt64 / 2, 512, -1},
	}
	for _, tc := range cases {
		if got := graph.SeedFLOPs(tc.n, tc.d); got != tc.want {
			t.Errorf("SeedFLOPs(%d, %d) = %d, want %d", tc.n, tc.d, got, tc.want)
		}
	}
}

// BytesMoved adds each node's OpCost.Bytes: inputs read and outputs written once, views free.
func TestCostBytesMoved(t *testing.T) {
	cases := []struct {
		name   string
		build  func(b *graph.Builder) string
		inputs map[string][]int
		bytes  int64
	}{
		{"relu reads and writes", func(b *graph.Builder) string {
			return b.Relu(b.Input("x", f32, fx(2), fx(3)))
		}, map[string][]int{"x": {2, 3}}, 24 + 24},
		{"matmul", func(b *graph.Builder) string {
			return b.MatMul(b.Input("a", f32, fx(2), fx(3)), b.Input("b", f32, fx(3), fx(4)))
		}, map[string][]int{"a": {2, 3}, "b": {3, 4}}, 24 + 48 + 32},
		{"reshape is a view", func(b *graph.Builder) string {
			return b.Reshape(b.Input("x", f32, fx(2), fx(3)), -1)
		}, map[string][]int{"x": {2, 3}}, 0},
		{"slice reads what it writes", func(b *graph.Builder) string {
			return b.Slice(b.Input("x", f32, fx(6)), b.ConstInts(1), b.ConstInts(3), b.ConstInts(0))
		}, map[string][]int{"x": {6}}, 3*8 + 2*8},
		{"shape writes its output", func(b *graph.Builder) string {
			return b.Shape(b.Input("x", f32, fx(2), fx(3)))
		}, map[string][]int{"x": {2, 3}}, 16},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := buildOne(t, tc.build)
			c, err := g.Cost(tc.inputs)
			if err != nil {
				t.Fatal(err)
			}
			if c.BytesMoved != tc.bytes {
				t.Errorf("BytesMoved %d, want %d", c.BytesMoved, tc.bytes)
			}
		})
	}
}

// NodeCosts splits Cost node by node: its FLOPs and bytes add up to Cost's totals, each node
// of the graph has an entry; ValueBytes sizes inputs, initializers and outputs; and a graph input without a shape is an error naming it.
func TestNodeCosts(t *testing.T) {
	g := tinyVanilla(t)
	shapes := map[string][]int{"tokens": {2, 37}, "key_padding_mask": {2, 37}}
	c, err := g.Cost(shapes)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := g.NodeCosts(shapes)
	if err != nil {
		t.Fatal(err)
	}
	if len(nc) != len(g.Nodes) {
		t.Fatalf("%d node costs for %d nodes", len(nc), len(g.Nodes))
	}
	var flops, bytes int64
	byOp := map[string]int64{}
	for _, n := range g.Nodes {
		oc, ok := nc[n]
		if !ok {
			t.Fatalf("no cost for node %q", n.Name)
		}
		flops, bytes = flops+oc.FLOPs, bytes+oc.Bytes
		if oc.FLOPs > 0 {
			byOp[n.Op] += oc.FLOPs
		}
	}
	if flops != c.FLOPs || bytes != c.BytesMoved {
		t.Errorf("node costs sum to %d FLOPs, %d bytes; Cost says %d, %d", flops, bytes, c.FLOPs, c.BytesMoved)
	}
	for op, f := range c.ByOp {
		if byOp[op] != f {
			t.Errorf("%s: node costs sum to %d FLOPs, Cost.ByOp says %d", op, byOp[op], f)
		}
	}
	vb, err := g.ValueBytes(shapes)
	if err != nil {
		t.Fatal(err)
	}
	if vb["tokens"] != 2*37*8 || vb["key_padding_mask"] != 2*37 {
		t.Errorf("tokens %d bytes, mask %d: want %d, %d", vb["tokens"], vb["key_padding_mask"], 2*37*8, 2*37)
	}
	for _, in := range g.Initializers {
		if vb[in.Name] != int64(in.Tensor.Bytes()) {
			t.Errorf("initializer %s: %d bytes, want %d", in.Name, vb[in.Name], in.Tensor.Bytes())
		}
	}
	for _, o := range g.Outputs {
		if vb[o.Name] <= 0 {
			t.Errorf("output %s: %d bytes", o.Name, vb[o.Name])
		}
	}
	if _, err := g.NodeCosts(map[string][]int{"tokens": {2, 37}}); err == nil {
		t.Error("NodeCosts without the mask's shape: no error")
	}
}
