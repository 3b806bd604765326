package graph_test

import (
	"math"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

var (
	batch = graph.Sym("batch")
	seq   = graph.Sym("seq")
	fx    = graph.Fixed
	f32   = tensor.Float32
	i64   = tensor.Int64
)

// scalarI adds an int64 scalar constant.
func scalarI(b *graph.Builder, v int64) string { return b.Const(tensor.Scalar64(v)) }

// seqLen returns Shape(x)[1:2], the nn package's way to get n.
func seqLen(b *graph.Builder, x string) string {
	return b.Slice(b.Shape(x), b.ConstInts(1), b.ConstInts(2), b.ConstInts(0))
}

// buildOne builds a graph whose single output "out" is the value build returns.
func buildOne(t *testing.T, build func(b *graph.Builder) string) *graph.Graph {
	t.Helper()
	b := graph.NewBuilder("t")
	v := build(b)
	b.Output("out", v, tensor.Invalid)
	g, err := b.Build()
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	return g
}

func TestInferShapesOps(t *testing.T) {
	cases := []struct {
		name  string
		build func(b *graph.Builder) string
		want  string
		dt    tensor.DType
	}{
		{"add bias broadcast", func(b *graph.Builder) string {
			x := b.Input("x", f32, batch, seq, fx(64))
			return b.Add(x, b.Const(mustF(make([]float32, 64), 64)))
		}, "(batch, seq, 64)", f32},
		{"add mask to scores", func(b *graph.Builder) string {
			s := b.Input("s", f32, batch, fx(4), seq, seq)
			m := b.Input("m", f32, batch, fx(1), fx(1), seq)
			return b.Add(m, s)
		}, "(batch, 4, seq, seq)", f32},
		{"add outer broadcast", func(b *graph.Builder) string {
			return b.Add(b.Input("x", f32, fx(3), fx(1)), b.Input("y", f32, fx(1), fx(4)))
		}, "(3, 4)", f32},
		{"add different symbols", func(b *graph.Builder) string {
			return b.Add(b.Input("x", f32, batch, seq), b.Input("y", f32, graph.Sym("other"), seq))
		}, "(?, seq)", f32},
		{"add symbol and known", func(b *graph.Builder) string {
			return b.Mul(b.Input("x", f32, batch, fx(1)), b.Input("y", f32, fx(5), seq))
		}, "(5, seq)", f32},
		{"equal gives bool", func(b *graph.Builder) string {
			return b.Op("Equal", []string{b.Input("x", i64, batch, seq), scalarI(b, 0)}, nil)
		}, "(batch, seq)", tensor.Bool},
		{"where mask", func(b *graph.Builder) string {
			pad := b.Input("pad", tensor.Bool, batch, seq)
			return b.Where(pad, b.ConstFloat(float32(math.Inf(-1))), b.ConstFloat(0))
		}, "(batch, seq)", f32},
		{"max variadic", func(b *graph.Builder) string {
			return b.Op("Max", []string{b.Input("x", f32, fx(2), fx(1)), b.Input("y", f32, fx(3)), b.Input("z", f32, fx(1))}, nil)
		}, "(2, 3)", f32},
		{"erf unary", func(b *graph.Builder) string {
			return b.Op("Erf", []string{b.Input("x", f32, batch, fx(7))}, nil)
		}, "(batch, 7)", f32},
		{"matmul linear", func(b *graph.Builder) string {
			w := b.Const(mustF(make([]float32, 128*64), 128, 64))
			return b.MatMul(b.Input("x", f32, batch, seq, fx(64)), b.Transpose(w, 1, 0))
		}, "(batch, seq, 128)", f32},
		{"matmul scores", func(b *graph.Builder) string {
			q := b.Input("q", f32, batch, fx(4), seq, fx(16))
			return b.MatMul(q, b.Transpose(b.Input("k", f32, batch, fx(4), seq, fx(16)), 0, 1, 3, 2))
		}, "(batch, 4, seq, seq)", f32},
		{"matmul batch broadcast", func(b *graph.Builder) string {
			return b.MatMul(b.Input("a", f32, fx(5), fx(1), fx(3), fx(4)), b.Input("b", f32, fx(6), fx(4), fx(2)))
		}, "(5, 6, 3, 2)", f32},
		{"matmul vector left", func(b *graph.Builder) string {
			return b.MatMul(b.Input("a", f32, fx(64)), b.Input("b", f32, fx(64), fx(8)))
		}, "(8)", f32},
		{"matmul vector right", func(b *graph.Builder) string {
			return b.MatMul(b.Input("a", f32, fx(2), fx(3), fx(64)), b.Input("b", f32, fx(64)))
		}, "(2, 3)", f32},
		{"gemm transB with C", func(b *graph.Builder) string {
			return b.Op("Gemm", []string{b.Input("a", f32, fx(4), fx(8)), b.Input("b", f32, fx(16), fx(8)), b.Input("c", f32, fx(16))},
				graph.Attrs{"transB": graph.Int(1)})
		}, "(4, 16)", f32},
		{"reshape split heads", func(b *graph.Builder) string {
			return b.Reshape(b.Input("x", f32, batch, seq, fx(64)), 0, 0, 4, -1)
		}, "(batch, seq, 4, 16)", f32},
		{"reshape merge heads infers seq", func(b *graph.Builder) string {
			return b.Reshape(b.Input("x", f32, batch, seq, fx(4), fx(16)), 0, -1, 64)
		}, "(batch, seq, 64)", f32},
		{"reshape known -1", func(b *graph.Builder) string {
			return b.Reshape(b.Input("x", f32, fx(2), fx(3), fx(4)), -1, 4)
		}, "(6, 4)", f32},
		{"reshape -1 over two symbols", func(b *graph.Builder) string {
			return b.Reshape(b.Input("x", f32, batch, seq, fx(64)), -1, 64)
		}, "(?, 64)", f32},
		{"reshape to computed shape", func(b *graph.Builder) string {
			x := b.Input("x", f32, batch, seq, fx(64))
			sh := b.Op("Concat", []string{b.Shape(x), b.ConstInts(1)}, graph.Attrs{"axis": graph.Int(0)})
			return b.Op("Reshape", []string{x, sh}, nil)
		}, "(batch, seq, 64, 1)", f32},
		{"transpose perm", func(b *graph.Builder) string {
			return b.Transpose(b.Input("x", f32, batch, seq, fx(4), fx(16)), 0, 2, 1, 3)
		}, "(batch, 4, seq, 16)", f32},
		{"transpose default reverses", func(b *graph.Builder) string {
			return b.Op("Transpose", []string{b.Input("x", f32, fx(2), fx(3), fx(4))}, nil)
		}, "(4, 3, 2)", f32},
		{"slice negative", func(b *graph.Builder) string {
			return b.Slice(b.Input("x", f32, fx(10), fx(20)), b.ConstInts(-3), b.ConstInts(-1), b.ConstInts(1))
		}, "(10, 2)", f32},
		{"slice negative step", func(b *graph.Builder) string {
			x := b.Input("x", f32, fx(10), seq)
			return b.Op("Slice", []string{x, b.ConstInts(-1), b.ConstInts(math.MinInt64), b.ConstInts(0), b.ConstInts(-2)}, nil)
		}, "(5, seq)", f32},
		{"slice to end of symbolic axis", func(b *graph.Builder) string {
			x := b.Input("x", f32, batch, seq)
			return b.Slice(x, b.ConstInts(0), b.ConstInts(math.MaxInt64), b.ConstInts(1))
		}, "(batch, seq)", f32},
		{"slice positional table to seq", func(b *graph.Builder) string {
			pe := b.Const(mustF(make([]float32, 128*8), 128, 8))
			tok := b.Input("tokens", i64, batch, seq)
			return b.Slice(pe, b.ConstInts(0), seqLen(b, tok), b.ConstInts(0))
		}, "(seq, 8)", f32},
		{"slice symbolic from nonzero", func(b *graph.Builder) string {
			return b.Slice(b.Input("x", f32, batch, seq), b.ConstInts(1), b.ConstInts(math.MaxInt64), b.ConstInts(1))
		}, "(batch, ?)", f32},
		{"gather embedding", func(b *graph.Builder) string {
			w := b.Const(mustF(make([]float32, 257*8), 257, 8))
			return b.Gather(w, b.Input("tokens", i64, batch, seq), 0)
		}, "(batch, seq, 8)", f32},
		{"gather axis 1", func(b *graph.Builder) string {
			return b.Gather(b.Input("x", f32, fx(3), fx(5), fx(7)), b.ConstInts(0, 4), 1)
		}, "(3, 2, 7)", f32},
		{"gather scalar index negative axis", func(b *graph.Builder) string {
			return b.Gather(b.Input("x", f32, fx(3), fx(5), fx(7)), scalarI(b, -1), -1)
		}, "(3, 5)", f32},
		{"gather shape element feeds reshape", func(b *graph.Builder) string {
			x := b.Input("x", f32, batch, seq, fx(64))
			n := b.Unsqueeze(b.Gather(b.Shape(x), scalarI(b, 1), 0), 0)
			sh := b.Op("Concat", []string{b.ConstInts(-1), n, b.ConstInts(8, 8)}, graph.Attrs{"axis": graph.Int(0)})
			return b.Op("Reshape", []string{x, sh}, nil)
		}, "(batch, seq, 8, 8)", f32},
		{"concat", func(b *graph.Builder) string {
			return b.Op("Concat", []string{b.Input("x", f32, batch, fx(3)), b.Input("y", f32, batch, fx(5))}, graph.Attrs{"axis": graph.Int(-1)})
		}, "(batch, 8)", f32},
		{"concat symbolic axis", func(b *graph.Builder) string {
			return b.Op("Concat", []string{b.Input("x", f32, batch, seq), b.Input("y", f32, batch, fx(5))}, graph.Attrs{"axis": graph.Int(1)})
		}, "(batch, ?)", f32},
		{"split equal", func(b *graph.Builder) string {
			return b.OpN("Split", []string{b.Input("x", f32, batch, fx(12))}, 3, graph.Attrs{"axis": graph.Int(1)})[2]
		}, "(batch, 4)", f32},
		{"split sizes", func(b *graph.Builder) string {
			return b.OpN("Split", []string{b.Input("x", f32, fx(12), seq), b.ConstInts(2, 10)}, 2, nil)[1]
		}, "(10, seq)", f32},
		{"layernorm", func(b *graph.Builder) string {
			x := b.Input("x", f32, batch, seq, fx(64))
			w := b.Const(mustF(make([]float32, 64), 64))
			return b.LayerNorm(x, w, w, 1e-5)
		}, "(batch, seq, 64)", f32},
		{"layernorm mean output", func(b *graph.Builder) string {
			x := b.Input("x", f32, batch, seq, fx(4), fx(16))
			w := b.Const(mustF(make([]float32, 64), 4, 16))
			return b.OpN("LayerNormalization", []string{x, w}, 3, graph.Attrs{"axis": graph.Int(2)})[1]
		}, "(batch, seq, 1, 1)", f32},
		{"softmax", func(b *graph.Builder) string {
			return b.Softmax(b.Input("x", f32, batch, fx(4), seq, seq), -1)
		}, "(batch, 4, seq, seq)", f32},
		{"unsqueeze mask", func(b *graph.Builder) string {
			return b.Unsqueeze(b.Input("m", f32, batch, seq), 1, 2)
		}, "(batch, 1, 1, seq)", f32},
		{"unsqueeze negative", func(b *graph.Builder) string {
			return b.Unsqueeze(b.Input("m", f32, batch, seq), -1)
		}, "(batch, seq, 1)", f32},
		{"squeeze", func(b *graph.Builder) string {
			return b.Op("Squeeze", []string{b.Input("x", f32, batch, fx(1), fx(64)), b.ConstInts(1)}, nil)
		}, "(batch, 64)", f32},
		{"squeeze all ones", func(b *graph.Builder) string {
			return b.Op("Squeeze", []string{b.Input("x", f32, fx(1), fx(3), fx(1))}, nil)
		}, "(3)", f32},
		{"expand scalar to shape", func(b *graph.Builder) string {
			x := b.Input("x", f32, batch, seq)
			return b.Op("Expand", []string{b.ConstFloat(1), b.Shape(x)}, nil)
		}, "(batch, seq)", f32},
		{"expand keeps ones", func(b *graph.Builder) string {
			return b.Op("Expand", []string{b.Input("x", f32, fx(3), fx(1)), b.ConstInts(2, 1, 6)}, nil)
		}, "(2, 3, 6)", f32},
		{"constant of shape", func(b *graph.Builder) string {
			return b.Op("ConstantOfShape", []string{b.Shape(b.Input("x", f32, batch, seq))}, nil)
		}, "(batch, seq)", f32},
		{"constant of shape int fill", func(b *graph.Builder) string {
			return b.Op("ConstantOfShape", []string{b.ConstInts(2, 3)}, graph.Attrs{"value": graph.TensorAttr(mustI([]int64{7}, 1))})
		}, "(2, 3)", i64},
		{"range", func(b *graph.Builder) string {
			return b.Op("Range", []string{scalarI(b, 2), scalarI(b, 11), scalarI(b, 3)}, nil)
		}, "(3)", i64},
		{"range to symbolic", func(b *graph.Builder) string {
			n := b.Gather(b.Shape(b.Input("x", f32, batch, seq)), scalarI(b, 1), 0)
			return b.Op("Range", []string{scalarI(b, 0), n, scalarI(b, 1)}, nil)
		}, "(?)", i64},
		{"cast", func(b *graph.Builder) string {
			return b.Op("Cast", []string{b.Input("x", tensor.Bool, batch, seq)}, graph.Attrs{"to": graph.Int(int64(f32))})
		}, "(batch, seq)", f32},
		{"tile", func(b *graph.Builder) string {
			return b.Op("Tile", []string{b.Input("x", f32, fx(2), batch), b.ConstInts(2, 1)}, nil)
		}, "(4, batch)", f32},
		{"reducesum axes input", func(b *graph.Builder) string {
			return b.Op("ReduceSum", []string{b.Input("x", f32, batch, seq, fx(64)), b.ConstInts(-1)}, graph.Attrs{"keepdims": graph.Int(0)})
		}, "(batch, seq)", f32},
		{"reducemean axes attr", func(b *graph.Builder) string {
			return b.Op("ReduceMean", []string{b.Input("x", f32, batch, seq, fx(64))}, graph.Attrs{"axes": graph.Ints(1)})
		}, "(batch, 1, 64)", f32},
		{"reducemax all", func(b *graph.Builder) string {
			return b.Op("ReduceMax", []string{b.Input("x", f32, batch, seq)}, graph.Attrs{"keepdims": graph.Int(0)})
		}, "()", f32},
		{"constant ints", func(b *graph.Builder) string {
			return b.Op("Constant", nil, graph.Attrs{"value_ints": graph.Ints(1, 2, 3)})
		}, "(3)", i64},
		{"shape with start", func(b *graph.Builder) string {
			return b.Op("Shape", []string{b.Input("x", f32, batch, seq, fx(3))}, graph.Attrs{"start": graph.Int(-2)})
		}, "(2)", i64},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := buildOne(t, tc.build)
			if err := g.InferShapes(); err != nil {
				t.Fatal(err)
			}
			vi, ok := g.ValueInfo["out"]
			if !ok {
				t.Fatal("no ValueInfo for out")
			}
			if got := vi.Shape.String(); got != tc.want {
				t.Errorf("shape %s, want %s", got, tc.want)
			}
			if vi.DType != tc.dt {
				t.Errorf("dtype %v, want %v", vi.DType, tc.dt)
			}
		})
	}
}

func TestInferShapesErrors(t *testing.T) {
	cases := []struct {
		name  string
		build func(b *graph.Builder) string
		want  []string
	}{
		{"matmul inner", func(b *graph.Builder) string {
			defer b.Scope("layers.0")()
			return b.MatMul(b.Input("a", f32, batch, fx(3)), b.Input("b", f32, fx(4), fx(5)))
		}, []string{`"layers.0/MatMul"`, "inner dimensions"}},
		{"matmul int64", func(b *graph.Builder) string {
			return b.MatMul(b.Input("a", i64, fx(2), fx(3)), b.Input("b", f32, fx(3), fx(5)))
		}, []string{`"MatMul"`, "int64", "want float32"}},
		{"add not broadcastable", func(b *graph.Builder) string {
			return b.Add(b.Input("a", f32, batch, fx(3)), b.Input("b", f32, fx(4)))
		}, []string{`"Add"`, "broadcast"}},
		{"add mixed dtypes", func(b *graph.Builder) string {
			return b.Add(b.Input("a", f32, fx(3)), b.Input("b", i64, fx(3)))
		}, []string{`"Add"`, "int64"}},
		{"where float condition", func(b *graph.Builder) string {
			x := b.Input("x", f32, fx(3))
			return b.Where(x, x, x)
		}, []string{`"Where"`, "want bool"}},
		{"reshape element count", func(b *graph.Builder) string {
			return b.Reshape(b.Input("x", f32, fx(2), fx(3)), 4, 2)
		}, []string{`"Reshape"`, "6 elements"}},
		{"reshape -1 not divisible", func(b *graph.Builder) string {
			return b.Reshape(b.Input("x", f32, fx(2), fx(3)), -1, 4)
		}, []string{`"Reshape"`, "multiple"}},
		{"transpose bad perm", func(b *graph.Builder) string {
			return b.Transpose(b.Input("x", f32, fx(2), fx(3)), 0, 0)
		}, []string{`"Transpose"`, "permutation"}},
		{"gather index out of range", func(b *graph.Builder) string {
			return b.Gather(b.Input("x", f32, fx(3), fx(5)), b.ConstInts(5), 1)
		}, []string{`"Gather"`, "out of range"}},
		{"concat rank", func(b *graph.Builder) string {
			return b.Op("Concat", []string{b.Input("x", f32, fx(3)), b.Input("y", f32, fx(3), fx(1))}, graph.Attrs{"axis": graph.Int(0)})
		}, []string{`"Concat"`, "rank"}},
		{"concat off-axis mismatch", func(b *graph.Builder) string {
			return b.Op("Concat", []string{b.Input("x", f32, fx(2), fx(3)), b.Input("y", f32, fx(4), fx(3))}, graph.Attrs{"axis": graph.Int(1)})
		}, []string{`"Concat"`, "differs"}},
		{"softmax axis", func(b *graph.Builder) string {
			return b.Softmax(b.Input("x", f32, fx(2), fx(3)), 2)
		}, []string{`"Softmax"`, "out of range"}},
		{"layernorm scale", func(b *graph.Builder) string {
			x := b.Input("x", f32, batch, fx(64))
			w := b.Const(mustF(make([]float32, 32), 32))
			return b.LayerNorm(x, w, w, 1e-5)
		}, []string{`"LayerNormalization"`, "scale"}},
		{"split uneven", func(b *graph.Builder) string {
			return b.OpN("Split", []string{b.Input("x", f32, fx(10))}, 3, nil)[0]
		}, []string{`"Split"`, "evenly"}},
		{"squeeze non-one", func(b *graph.Builder) string {
			return b.Op("Squeeze", []string{b.Input("x", f32, fx(2), fx(3)), b.ConstInts(0)}, nil)
		}, []string{`"Squeeze"`, "size 2"}},
		{"exp on int", func(b *graph.Builder) string {
			return b.Op("Exp", []string{b.Input("x", i64, fx(2))}, nil)
		}, []string{`"Exp"`, "want float32"}},
		{"gemm inner", func(b *graph.Builder) string {
			return b.Op("Gemm", []string{b.Input("a", f32, fx(4), fx(8)), b.Input("b", f32, fx(16), fx(8))}, nil)
		}, []string{`"Gemm"`, "inner"}},
		{"integer division by zero", func(b *graph.Builder) string {
			return b.Div(b.ConstInts(4), b.ConstInts(0))
		}, []string{`"Div"`, "division by zero"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := buildOne(t, tc.build)
			err := g.InferShapes()
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %s", err, w)
				}
			}
			if g.ValueInfo != nil {
				t.Error("ValueInfo filled despite the error")
			}
		})
	}
}

func TestInferShapesDeclaredOutputMismatch(t *testing.T) {
	b := graph.NewBuilder("t")
	x := b.Input("x", f32, batch, fx(3))
	b.Output("y", b.Relu(x), f32, batch, fx(4))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := g.InferShapes(); err == nil || !strings.Contains(err.Error(), `"y"`) {
		t.Fatalf("want an error naming output y, got %v", err)
	}
	if err := (*graph.Graph)(nil).InferShapes(); err == nil {
		t.Error("nil graph: no error")
	}
}

func TestBroadcast(t *testing.T) {
	cases := []struct {
		in   []graph.Shape
		want string
	}{
		{[]graph.Shape{{fx(2), fx(1)}, {fx(3)}}, "(2, 3)"},
		{[]graph.Shape{{batch, fx(1)}, {fx(1), seq}}, "(batch, seq)"},
		{[]graph.Shape{{batch}, {batch}}, "(batch)"},
		{[]graph.Shape{{batch}, {seq}}, "(?)"},
		{[]graph.Shape{{batch}, {fx(7)}}, "(7)"},
		{[]graph.Shape{{}, {fx(2), fx(3)}}, "(2, 3)"},
		{[]graph.Shape{nil, {fx(2)}}, "(unknown rank)"},
	}
	for _, tc := range cases {
		got, err := graph.Broadcast(tc.in...)
		if err != nil {
			t.Errorf("Broadcast%v: %v", tc.in, err)
			continue
		}
		if got.String() != tc.want {
			t.Errorf("Broadcast%v = %v, want %s", tc.in, got, tc.want)
		}
	}
	if _, err := graph.Broadcast(graph.Shape{fx(2)}, graph.Shape{fx(3)}); err == nil {
		t.Error("Broadcast((2), (3)): no error")
	}
}

// Shape subgraphs the vanilla encoder does not use (Range, Equal, Where, Mul, Expand, Tile,
// Cast of a float constant, ConstantOfShape) resolve only with concrete shapes.
func TestConcreteShapesEvaluatesShapeSubgraphs(t *testing.T) {
	b := graph.NewBuilder("t")
	x := b.Input("x", f32, batch, seq, fx(6))
	shp := b.Shape(x)
	n := b.Gather(shp, scalarI(b, 1), 0)
	idx := b.Op("Range", []string{scalarI(b, 0), n, scalarI(b, 1)}, nil) // (n)
	// dims = Where(Equal(shape, 0), 1, shape) = shape (no zeros); doubled n: Mul(n, 2).
	dims := b.Where(b.Op("Equal", []string{shp, scalarI(b, 0)}, nil), b.ConstInts(1), shp)
	twoN := b.Unsqueeze(b.Mul(n, scalarI(b, 2)), 0)
	cat := b.Op("Concat", []string{b.Slice(dims, b.ConstInts(0), b.ConstInts(1), b.ConstInts(0)), twoN, b.ConstInts(-1)}, graph.Attrs{"axis": graph.Int(0)})
	r := b.Op("Reshape", []string{x, cat}, nil) // (B, 2n, 3)
	e := b.Op("Expand", []string{b.Op("Cast", []string{idx}, graph.Attrs{"to": graph.Int(int64(f32))}), b.Op("Concat", []string{b.ConstInts(2), b.Shape(idx)}, graph.Attrs{"axis": graph.Int(0)})}, nil)
	tiled := b.Op("Tile", []string{x, b.Op("Cast", []string{b.Op("Constant", nil, graph.Attrs{"value_floats": graph.Floats(1, 2, 1)})}, graph.Attrs{"to": graph.Int(int64(i64))})}, nil)
	sq := b.Op("ConstantOfShape", []string{b.Op("Squeeze", []string{b.Unsqueeze(dims, 0), b.ConstInts(0)}, nil)}, nil)
	b.Output("r", r, f32)
	b.Output("e", e, f32)
	b.Output("tiled", tiled, f32)
	b.Output("sq", sq, f32)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := g.InferShapes(); err != nil {
		t.Fatal(err)
	}
	if got := g.ValueInfo["r"].Shape.String(); got != "(?, ?, ?)" {
		t.Errorf("symbolic r: %s", got)
	}
	shapes, err := g.ConcreteShapes(map[string][]int{"x": {2, 5, 6}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]int{
		"x": {2, 5, 6}, "r": {2, 10, 3}, "e": {2, 5}, "tiled": {2, 10, 6}, "sq": {2, 5, 6},
		idx: {5}, n: {}, "const::0": {},
	}
	for name, w := range want {
		if got, ok := shapes[name]; !ok || !tensor.SameShape(got, w) {
			t.Errorf("%s: shape %v, want %v", name, got, w)
		}
	}
}

func TestConcreteShapesErrors(t *testing.T) {
	b := graph.NewBuilder("t")
	x := b.Input("x", f32, batch, seq)
	s := b.Input("s", i64, fx(2))
	b.Output("y", b.Op("Reshape", []string{x, s}, nil), f32)
	b.Output("z", b.Add(x, b.Input("w", f32, batch, seq)), f32)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		in   map[string][]int
		want string
	}{
		{map[string][]int{"x": {2, 3}, "s": {2}}, `no shape given for graph input "w"`},
		{map[string][]int{"x": {2, 3}, "s": {2}, "w": {2, 3}, "v": {1}}, `"v" is not a graph input`},
		{map[string][]int{"x": {2, 3}, "s": {3}, "w": {2, 3}}, "contradicts"},
		{map[string][]int{"x": {2, 3}, "s": {2}, "w": {2, 4}}, "seq"},
		{map[string][]int{"x": {2, 3, 1}, "s": {2}, "w": {2, 3}}, "rank"},
		{map[string][]int{"x": {2, -3}, "s": {2}, "w": {2, 3}}, "negative"},
		{map[string][]int{"x": {2, 3}, "s": {2}, "w": {2, 3}}, `"Reshape"`},
	}
	for _, tc := range cases {
		_, err := g.ConcreteShapes(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ConcreteShapes(%v): error %v, want one mentioning %s", tc.in, err, tc.want)
		}
	}
	_, err = g.ConcreteShapes(map[string][]int{"x": {2, 3}, "s": {2}, "w": {2, 3}})
	if err == nil || !strings.Contains(err.Error(), `input "s"`) {
		t.Errorf("unevaluable shape: error %v should name the input", err)
	}
}

// tinyVanilla builds the vanilla encoder at the tiny test configuration.
func TestInferShapesVanilla(t *testing.T) {
	g := tinyVanilla(t)
	if err := g.InferShapes(); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"hidden": "(batch, seq, 64)", "logits": "(batch, seq, 257)"}
	for name, w := range want {
		vi := g.ValueInfo[name]
		if vi.Shape.String() != w || vi.DType != f32 {
			t.Errorf("%s: %v %v, want float32 %s", name, vi.DType, vi.Shape, w)
		}
	}
	// Every node output has a rank, and every softmax works on (batch, 4, seq, seq).
	for _, n := range g.Nodes {
		for _, o := range n.Outputs {
			if g.ValueInfo[o].Shape == nil {
				t.Errorf("%s (%s): unknown rank", o, n.Op)
			}
		}
		if n.Op == "Softmax" {
			if got := g.ValueInfo[n.Outputs[0]].Shape.String(); got != "(batch, 4, seq, seq)" {
				t.Errorf("%s: %s", n.Name, got)
			}
		}
	}
}

func TestConcreteShapesVanilla(t *testing.T) {
	g := tinyVanilla(t)
	shapes, err := g.ConcreteShapes(map[string][]int{"tokens": {2, 37}, "key_padding_mask": {2, 37}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]int{
		"tokens": {2, 37}, "hidden": {2, 37, 64}, "logits": {2, 37, 257},
		"embedding.weight": {257, 64}, "pos_encoding.pe": {128, 64}, "fc.bias": {257},
	}
	for name, w := range want {
		if got, ok := shapes[name]; !ok || !tensor.SameShape(got, w) {
			t.Errorf("%s: %v, want %v", name, got, w)
		}
	}
	for _, n := range g.Nodes {
		if n.Op == "Softmax" {
			if got := shapes[n.Outputs[0]]; !tensor.SameShape(got, []int{2, 4, 37, 37}) {
				t.Errorf("%s: %v", n.Name, got)
			}
		}
	}
	nvals := len(g.Inputs) + len(g.Initializers)
	for _, n := range g.Nodes {
		nvals += len(n.Outputs)
	}
	if len(shapes) != nvals {
		t.Errorf("%d shapes for %d values", len(shapes), nvals)
	}
	// The graph's sequences are limited by max_len only at run time; a mismatched mask is not.
	if _, err := g.ConcreteShapes(map[string][]int{"tokens": {2, 37}, "key_padding_mask": {2, 38}}); err == nil {
		t.Error("mismatched mask: no error")
	}
}

func mustF(data []float32, shape ...int) *tensor.Tensor {
	t, err := tensor.FromFloat32(data, shape...)
	if err != nil {
		panic(err)
	}
	return t
}

func mustI(data []int64, shape ...int) *tensor.Tensor {
	t, err := tensor.FromInt64(data, shape...)
	if err != nil {
		panic(err)
	}
	return t
}
