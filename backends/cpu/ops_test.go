package cpu

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/backends/backendtest"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// These tests run ops on shapes large and awkward enough to take the multi-threaded paths
// (row-split GEMMs, chunked elementwise loops) and compare them with naive float64 loops.

// runOp compiles a one-node graph over run-time inputs and returns its first output.
func runOp(t *testing.T, threads int, op string, attrs graph.Attrs, ins ...*tensor.Tensor) *tensor.Tensor {
	t.Helper()
	c := backendtest.Case{Name: op, Op: op, Attrs: attrs, Want: []*tensor.Tensor{nil}}
	for _, in := range ins {
		c.Args = append(c.Args, backendtest.In(in))
	}
	g, inputs, err := backendtest.BuildCase(c, false)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Backend{}.Compile(g, backends.Options{Threads: threads})
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.Run(context.Background(), inputs)
	if err != nil {
		t.Fatal(err)
	}
	return out["y0"]
}

// index returns the row-major offset of idx in shape, broadcasting dims of size 1.
func index(shape, idx []int) int {
	off := 0
	r := len(idx) - len(shape)
	for i, d := range shape {
		v := idx[r+i]
		if d == 1 {
			v = 0
		}
		off = off*d + v
	}
	return off
}

// each calls fn with every multi-index of shape in row-major order.
func each(shape []int, fn func(idx []int)) {
	idx := make([]int, len(shape))
	n := tensor.NumElements(shape)
	for i := 0; i < n; i++ {
		fn(idx)
		for d := len(shape) - 1; d >= 0; d-- {
			idx[d]++
			if idx[d] < shape[d] {
				break
			}
			idx[d] = 0
		}
	}
}

func checkClose(t *testing.T, what string, got *tensor.Tensor, want []float64, shape []int, tol float64) {
	t.Helper()
	if !tensor.SameShape(got.Shape, shape) {
		t.Fatalf("%s: shape %v, want %v", what, got.Shape, shape)
	}
	for i, w := range want {
		g := float64(got.F32[i])
		if math.IsNaN(w) && math.IsNaN(g) {
			continue
		}
		if math.Abs(g-w) > tol*math.Max(1, math.Abs(w)) {
			t.Fatalf("%s: element %d = %v, want %v", what, i, g, w)
		}
	}
}

func TestMatMulLarge(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	cases := []struct{ a, b []int }{
		{[]int{201, 70}, []int{70, 93}},            // single GEMM split by rows
		{[]int{3, 95, 70}, []int{70, 80}},          // batch folded into rows
		{[]int{3, 1, 37, 50}, []int{4, 50, 29}},    // broadcast batch
		{[]int{2, 5, 64, 40}, []int{2, 5, 40, 64}}, // attention-like
		{[]int{130}, []int{130, 140}},              // vector × matrix
		{[]int{2, 140, 130}, []int{130}},           // matrix × vector
	}
	for _, c := range cases {
		t.Run(fmt.Sprint(c.a, c.b), func(t *testing.T) {
			a, b := randTensor(r, c.a...), randTensor(r, c.b...)
			as, bs := append([]int{}, c.a...), append([]int{}, c.b...)
			if len(as) == 1 {
				as = []int{1, as[0]}
			}
			if len(bs) == 1 {
				bs = []int{bs[0], 1}
			}
			m, k, n := as[len(as)-2], as[len(as)-1], bs[len(bs)-1]
			batch, _ := graph.BroadcastShapes(as[:len(as)-2], bs[:len(bs)-2])
			full := append(append([]int{}, batch...), m, n)
			var want []float64
			each(full, func(idx []int) {
				s := 0.0
				ai := append([]int{}, idx...)
				bi := append([]int{}, idx...)
				for p := 0; p < k; p++ {
					ai[len(ai)-1], bi[len(bi)-2] = p, p
					s += float64(a.F32[index(as, ai)]) * float64(b.F32[index(bs, bi)])
				}
				want = append(want, s)
			})
			shape := append([]int{}, batch...)
			if len(c.a) > 1 {
				shape = append(shape, m)
			}
			if len(c.b) > 1 {
				shape = append(shape, n)
			}
			for _, threads := range []int{1, 3} {
				checkClose(t, "MatMul", runOp(t, threads, "MatMul", nil, a, b), want, shape, 1e-4)
			}
		})
	}
}

func TestGemmRowsPerTask(t *testing.T) {
	for _, c := range [][3]int{{150, 80, 100}, {201, 70, 93}, {285, 80, 70}, {4096, 512, 512}, {7, 1000, 1000}, {1, 1, 1}, {0, 5, 5}} {
		m, n, k := c[0], c[1], c[2]
		rows := gemmRowsPerTask(m, n, k)
		tasks := (m + rows - 1) / rows
		if rows < 1 || tasks > gemmMaxSplit || (rows < m && rows%gemmRowAlign != 0) {
			t.Errorf("gemmRowsPerTask(%d, %d, %d) = %d (%d tasks)", m, n, k, rows, tasks)
		}
		if m*n*k > 2*gemmTaskMACs && m >= 2*gemmRowAlign && tasks < 2 {
			t.Errorf("gemmRowsPerTask(%d, %d, %d) = %d: a large product is not split", m, n, k, rows)
		}
	}
}

func TestGemmLarge(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	const m, n, k = 150, 80, 100
	for _, ta := range []bool{false, true} {
		for _, tb := range []bool{false, true} {
			ashape, bshape := []int{m, k}, []int{k, n}
			if ta {
				ashape = []int{k, m}
			}
			if tb {
				bshape = []int{n, k}
			}
			a, b, c := randTensor(r, ashape...), randTensor(r, bshape...), randTensor(r, n)
			attrs := graph.Attrs{"alpha": graph.Float(0.5), "beta": graph.Float(-1)}
			if ta {
				attrs["transA"] = graph.Int(1)
			}
			if tb {
				attrs["transB"] = graph.Int(1)
			}
			want := make([]float64, m*n)
			for i := 0; i < m; i++ {
				for j := 0; j < n; j++ {
					s := 0.0
					for p := 0; p < k; p++ {
						av, bv := a.F32[i*k+p], b.F32[p*n+j]
						if ta {
							av = a.F32[p*m+i]
						}
						if tb {
							bv = b.F32[j*k+p]
						}
						s += float64(av) * float64(bv)
					}
					want[i*n+j] = 0.5*s - float64(c.F32[j])
				}
			}
			for _, threads := range []int{1, 4} {
				checkClose(t, fmt.Sprintf("Gemm transA=%v transB=%v", ta, tb), runOp(t, threads, "Gemm", attrs, a, b, c), want, []int{m, n}, 1e-4)
			}
		}
	}
}

func TestBroadcastLarge(t *testing.T) {
	r := rand.New(rand.NewSource(4))
	cases := [][2][]int{
		{{64, 1, 300}, {1, 50, 300}},
		{{7, 300, 11}, {300, 1}},
		{{5, 1, 3, 1000}, {1, 7, 1, 1}},
		{{1}, {33, 1001}},
	}
	for _, c := range cases {
		a, b := randTensor(r, c[0]...), randTensor(r, c[1]...)
		shape, err := graph.BroadcastShapes(c[0], c[1])
		if err != nil {
			t.Fatal(err)
		}
		// every operator, each operand order (a scalar or broadcast row on either side)
		for _, op := range []string{"Add", "Sub", "Mul", "Div"} {
			for _, ab := range [][2]*tensor.Tensor{{a, b}, {b, a}} {
				x, y := ab[0], ab[1]
				var want []float64
				each(shape, func(idx []int) {
					u, v := x.F32[index(x.Shape, idx)], y.F32[index(y.Shape, idx)]
					w := map[string]float32{"Add": u + v, "Sub": u - v, "Mul": u * v, "Div": u / v}[op]
					want = append(want, float64(w))
				})
				for _, threads := range []int{1, 3} {
					checkClose(t, fmt.Sprint(op, " ", x.Shape, y.Shape), runOp(t, threads, op, nil, x, y), want, shape, 0)
				}
			}
		}
	}
}

func TestTransposeSliceLarge(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	x := randTensor(r, 6, 35, 9, 40)
	perm := []int{2, 0, 3, 1}
	shape := []int{9, 6, 40, 35}
	var want []float64
	each(shape, func(idx []int) {
		src := make([]int, 4)
		for i, p := range perm {
			src[p] = idx[i]
		}
		want = append(want, float64(x.F32[index(x.Shape, src)]))
	})
	got := runOp(t, 3, "Transpose", graph.Attrs{"perm": graph.Ints(2, 0, 3, 1)}, x)
	checkClose(t, "Transpose", got, want, shape, 0)

	// Perms that only move unit axes keep the element order (returned as a view); one that
	// also swaps two longer axes does not.
	u := randTensor(r, 40, 1, 9, 1)
	for _, c := range []struct {
		perm  []int64
		shape []int
	}{{[]int64{1, 0, 2, 3}, []int{1, 40, 9, 1}}, {[]int64{3, 0, 1, 2}, []int{1, 40, 1, 9}}, {[]int64{2, 1, 0, 3}, []int{9, 1, 40, 1}}} {
		want = want[:0]
		each(c.shape, func(idx []int) {
			src := make([]int, 4)
			for i, p := range c.perm {
				src[p] = idx[i]
			}
			want = append(want, float64(u.F32[index(u.Shape, src)]))
		})
		got := runOp(t, 2, "Transpose", graph.Attrs{"perm": graph.Ints(c.perm...)}, u)
		checkClose(t, fmt.Sprintf("Transpose %v", c.perm), got, want, c.shape, 0)
	}

	// x[::-2, 1:30:3, :, -5:] over a large tensor
	starts := &tensor.Tensor{DType: tensor.Int64, Shape: []int{3}, I64: []int64{-1, 1, -5}}
	ends := &tensor.Tensor{DType: tensor.Int64, Shape: []int{3}, I64: []int64{math.MinInt64, 30, math.MaxInt64}}
	axes := &tensor.Tensor{DType: tensor.Int64, Shape: []int{3}, I64: []int64{0, 1, -1}}
	steps := &tensor.Tensor{DType: tensor.Int64, Shape: []int{3}, I64: []int64{-2, 3, 1}}
	sshape := []int{3, 10, 9, 5}
	want = want[:0]
	each(sshape, func(idx []int) {
		src := []int{5 - 2*idx[0], 1 + 3*idx[1], idx[2], 35 + idx[3]}
		want = append(want, float64(x.F32[index(x.Shape, src)]))
	})
	got = runOp(t, 2, "Slice", nil, x, starts, ends, axes, steps)
	checkClose(t, "Slice", got, want, sshape, 0)
}

func TestSoftmaxLayerNormReduceLarge(t *testing.T) {
	r := rand.New(rand.NewSource(6))
	x := randTensor(r, 4, 50, 3, 70)
	for i := range x.F32 {
		if i%7 == 0 {
			x.F32[i] = float32(math.Inf(-1))
		}
	}
	// Softmax over axis 1 (strided rows)
	want := make([]float64, len(x.F32))
	st := tensor.Strides(x.Shape)
	each([]int{4, 1, 3, 70}, func(idx []int) {
		base := index(x.Shape, idx)
		mx := math.Inf(-1)
		for j := 0; j < 50; j++ {
			mx = math.Max(mx, float64(x.F32[base+j*st[1]]))
		}
		s := 0.0
		for j := 0; j < 50; j++ {
			s += math.Exp(float64(x.F32[base+j*st[1]]) - mx)
		}
		for j := 0; j < 50; j++ {
			want[base+j*st[1]] = math.Exp(float64(x.F32[base+j*st[1]])-mx) / s
		}
	})
	checkClose(t, "Softmax axis 1", runOp(t, 3, "Softmax", graph.Attrs{"axis": graph.Int(1)}, x), want, x.Shape, 1e-6)

	// LayerNorm over the last two axes
	y := randTensor(r, 40, 30, 64)
	scale, bias := randTensor(r, 30, 64), randTensor(r, 64)
	want = make([]float64, len(y.F32))
	d := 30 * 64
	for row := 0; row < 40; row++ {
		v := y.F32[row*d : (row+1)*d]
		mu, vr := 0.0, 0.0
		for _, e := range v {
			mu += float64(e)
		}
		mu /= float64(d)
		for _, e := range v {
			vr += (float64(e) - mu) * (float64(e) - mu)
		}
		inv := 1 / math.Sqrt(vr/float64(d)+1e-5)
		for i, e := range v {
			want[row*d+i] = (float64(e)-mu)*inv*float64(scale.F32[i]) + float64(bias.F32[i%64])
		}
	}
	checkClose(t, "LayerNorm", runOp(t, 4, "LayerNormalization", graph.Attrs{"axis": graph.Int(-2)}, y, scale, bias), want, y.Shape, 1e-6)

	// ReduceSum over non-trailing axes 0 and 2 of y, keepdims
	axes := &tensor.Tensor{DType: tensor.Int64, Shape: []int{2}, I64: []int64{0, -1}}
	sums := make([]float64, 30)
	each(y.Shape, func(idx []int) { sums[idx[1]] += float64(y.F32[index(y.Shape, idx)]) })
	checkClose(t, "ReduceSum", runOp(t, 2, "ReduceSum", nil, y, axes), sums, []int{1, 30, 1}, 1e-5)
}

func TestElementwiseLargeThreads(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	x := randTensor(r, 3, 100, 257)
	for _, op := range []string{"Erf", "Exp", "Tanh", "Sigmoid", "Relu", "Abs"} {
		a := runOp(t, 1, op, nil, x)
		b := runOp(t, 4, op, nil, x)
		if !tensor.Equal(a, b) {
			t.Errorf("%s differs between 1 and 4 threads", op)
		}
	}
	y := randTensor(r, 100, 1)
	pw := runOp(t, 3, "Pow", nil, x, &tensor.Tensor{DType: tensor.Float32, Shape: []int{}, F32: []float32{2}})
	for i, v := range x.F32 {
		if pw.F32[i] != v*v {
			t.Fatalf("Pow 2 at %d: %v, want %v", i, pw.F32[i], v*v)
		}
	}
	mx := runOp(t, 3, "Max", nil, x, y)
	for i, v := range x.F32 {
		if w := max(v, y.F32[(i/257)%100]); mx.F32[i] != w {
			t.Fatalf("Max at %d: %v, want %v", i, mx.F32[i], w)
		}
	}
}

// TestWhereRows checks Where against its definition where the condition is one value per
// row (a token mask broadcast over the channels: whole rows copied or filled) and where it
// is not, with either side a full tensor, a row or a scalar, on one and three threads.
func TestWhereRows(t *testing.T) {
	r := rand.New(rand.NewSource(8))
	cases := []struct{ c, x, y []int }{
		{[]int{4, 300, 1}, []int{4, 300, 64}, []int{1}},
		{[]int{4, 300, 1}, []int{1}, []int{4, 300, 64}},
		{[]int{4, 300, 1}, []int{4, 300, 64}, []int{4, 300, 64}},
		{[]int{4, 300, 1}, []int{64}, []int{300, 64}},
		{[]int{4, 1, 300}, []int{4, 7, 300}, []int{1}},
		{[]int{4, 300, 64}, []int{4, 300, 64}, []int{1}},
	}
	for _, tc := range cases {
		cond, _ := tensor.New(tensor.Bool, tc.c...)
		for i := range cond.Bool {
			cond.Bool[i] = r.Intn(3) > 0
		}
		x, y := randTensor(r, tc.x...), randTensor(r, tc.y...)
		shape, err := graph.BroadcastShapes(tc.c, tc.x, tc.y)
		if err != nil {
			t.Fatal(err)
		}
		var want []float64
		each(shape, func(idx []int) {
			if cond.Bool[index(tc.c, idx)] {
				want = append(want, float64(x.F32[index(tc.x, idx)]))
			} else {
				want = append(want, float64(y.F32[index(tc.y, idx)]))
			}
		})
		for _, threads := range []int{1, 3} {
			checkClose(t, fmt.Sprint("Where ", tc), runOp(t, threads, "Where", nil, cond, x, y), want, shape, 0)
		}
	}
}
