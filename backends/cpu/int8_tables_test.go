package cpu_test

import (
	"context"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/backends/cpu"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// tableGraph reads a (rows × cols) table three ways: Gather of ids on axis 0 (an
// embedding), the first n rows (x + pe[:n], n from x's shape) and every other column of
// rows counted from the end (Slice with negative starts and steps, the starts a run-time
// input so that the slice is not folded at compile time).
func tableGraph(t *testing.T, table *tensor.Tensor) *graph.Graph {
	t.Helper()
	b := graph.NewBuilder("tables")
	ids := b.Input("ids", tensor.Int64, graph.Sym("n"))
	x := b.Input("x", tensor.Float32, graph.Sym("n"), graph.Fixed(int64(table.Shape[1])))
	starts := b.Input("starts", tensor.Int64, graph.Fixed(2))
	tab := b.Param("table", table)
	n := b.Slice(b.Shape(x), b.ConstInts(0), b.ConstInts(1), b.ConstInts(0))
	b.Output("emb", b.Gather(tab, ids, 0), tensor.Float32, graph.Sym("n"), graph.Fixed(int64(table.Shape[1])))
	b.Output("pos", b.Op("Add", []string{x, b.Slice(tab, b.ConstInts(0), n, b.ConstInts(0))}, nil), tensor.Float32, graph.Sym("n"), graph.Fixed(int64(table.Shape[1])))
	odd := b.Op("Slice", []string{tab, starts, b.ConstInts(-5, 1<<40), b.ConstInts(0, 1), b.ConstInts(-1, 2)}, nil)
	b.Output("odd", odd, tensor.Float32, graph.Fixed(4), graph.Fixed(int64(table.Shape[1]/2)))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestInt8Tables: an int8 program holds a table read only by Gather and Slice as int8 rows
// (one scale per row, max |row| / 127), counts it under "int8-table", keeps about a quarter
// of its bytes, and reads exactly the dequantized rows: each element q·scale of its row, q
// = round-half-even(v / scale), whichever way the rows are taken, fused or not. An index
// out of range is refused as Gather refuses it; an fp32 program keeps the table as it is.
func TestInt8Tables(t *testing.T) {
	const rows, cols = 600, 128
	rng := rand.New(rand.NewSource(41))
	table := randF32(rng, 1, rows, cols)
	for c := 0; c < cols; c++ {
		table.F32[7*cols+c] = 0 // a zero row
	}
	table.F32[9*cols+3] = 50 // a row with an outlier
	deq := make([]float32, rows*cols)
	for r := 0; r < rows; r++ {
		var amax float64
		for _, v := range table.F32[r*cols : (r+1)*cols] {
			amax = math.Max(amax, math.Abs(float64(v)))
		}
		s := float32(amax) / 127
		for c, v := range table.F32[r*cols : (r+1)*cols] {
			if s != 0 {
				deq[r*cols+c] = float32(math.RoundToEven(float64(v)/float64(s))) * s
			}
		}
	}
	g := tableGraph(t, table)
	n := 37
	ids := &tensor.Tensor{DType: tensor.Int64, Shape: []int{n}, I64: make([]int64, n)}
	for i := range ids.I64 {
		ids.I64[i] = int64(rng.Intn(2*rows) - rows) // negative ids count from the end
	}
	ids.I64[0], ids.I64[1] = 7, 9
	x := randF32(rng, 1, n, cols)
	starts := &tensor.Tensor{DType: tensor.Int64, Shape: []int{2}, I64: []int64{-1, 1}}
	fp32, err := cpu.Backend{}.Compile(g, backends.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer fp32.Close()
	for _, noFusion := range []bool{false, true} {
		p, err := cpu.Backend{}.Compile(g, backends.Options{Threads: 2, Precision: "int8", NoFusion: noFusion})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		prog := p.(*cpu.Program)
		if got := prog.Fusions()["int8-table"]; got != 1 {
			t.Fatalf("NoFusion %v: fusions %v, want int8-table 1", noFusion, prog.Fusions())
		}
		if wb, fb := prog.WeightBytes(), fp32.(*cpu.Program).WeightBytes(); wb > fb*3/10 {
			t.Errorf("NoFusion %v: weight bytes %d, fp32 %d: the table was not held in int8", noFusion, wb, fb)
		}
		out, err := p.Run(context.Background(), map[string]*tensor.Tensor{"ids": ids, "x": x, "starts": starts})
		if err != nil {
			t.Fatal(err)
		}
		for i, id := range ids.I64 {
			if id < 0 {
				id += rows
			}
			for c := 0; c < cols; c++ {
				if got, want := out["emb"].F32[i*cols+c], deq[int(id)*cols+c]; got != want {
					t.Fatalf("emb[%d][%d] = %v, want %v", i, c, got, want)
				}
				if got, want := out["pos"].F32[i*cols+c], x.F32[i*cols+c]+deq[i*cols+c]; got != want {
					t.Fatalf("pos[%d][%d] = %v, want %v", i, c, got, want)
				}
			}
		}
		if sh := out["odd"].Shape; len(sh) != 2 || sh[0] != 4 || sh[1] != cols/2 {
			t.Fatalf("odd: shape %v, want [4 %d]", sh, cols/2)
		}
		for i := 0; i < 4; i++ {
			for j := 0; j < cols/2; j++ {
				if got, want := out["odd"].F32[i*cols/2+j], deq[(rows-1-i)*cols+1+2*j]; got != want {
					t.Fatalf("odd[%d][%d] = %v, want %v", i, j, got, want)
				}
			}
		}
		bad := &tensor.Tensor{DType: tensor.Int64, Shape: []int{n}, I64: make([]int64, n)}
		bad.I64[3] = rows
		if _, err := p.Run(context.Background(), map[string]*tensor.Tensor{"ids": bad, "x": x, "starts": starts}); err == nil || !strings.Contains(err.Error(), "out of range") {
			t.Fatalf("an id of %d: err %v, want out of range", rows, err)
		}
	}
	if got := fp32.(*cpu.Program).Fusions()["int8-table"]; got != 0 {
		t.Fatalf("fp32 program: int8-table %d", got)
	}
}

// TestInt8Projection: in an int8-attention program, a MatMul whose left operand is a Slice
// of a table (linformer's E[:, :n]·K) runs in int8, counted under "int8-projection": its
// output is within int8's error of the fp32 product (cosine per output row at least 0.999,
// error at most 3 % of the row's largest value) and differs from the int8 program's, which
// keeps the product in fp32; the thread count changes no bit; a batch of one and a batch of
// three give the same rows.
func TestInt8Projection(t *testing.T) {
	const k, nmax, n, d = 96, 1024, 100, 40
	rng := rand.New(rand.NewSource(43))
	table := randF32(rng, 1, k, nmax)
	b := graph.NewBuilder("projection")
	x := b.Input("x", tensor.Float32, graph.Sym("b"), graph.Sym("n"), graph.Fixed(d))
	tab := b.Param("E", table)
	nn := b.Slice(b.Shape(x), b.ConstInts(1), b.ConstInts(2), b.ConstInts(0))
	en := b.Slice(tab, b.ConstInts(0), nn, b.ConstInts(1))
	b.Output("y", b.MatMul(en, x), tensor.Float32, graph.Sym("b"), graph.Fixed(k), graph.Fixed(d))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	xs := randF32(rng, 3, 3, n, d)
	run := func(prec string, threads int, in *tensor.Tensor) (*tensor.Tensor, map[string]int) {
		p, err := cpu.Backend{}.Compile(g, backends.Options{Precision: prec, Threads: threads})
		if err != nil {
			t.Fatal(err)
		}
		out, err := p.Run(context.Background(), map[string]*tensor.Tensor{"x": in})
		if err != nil {
			t.Fatal(err)
		}
		return out["y"], p.(*cpu.Program).Fusions()
	}
	ref, _ := run("fp32", 2, xs)
	q8, fu8 := run("int8", 2, xs)
	qa, fua := run("int8-attention", 1, xs)
	if fu8["int8-projection"] != 0 || fua["int8-projection"] != 1 {
		t.Fatalf("int8-projection fusions: int8 %d, int8-attention %d; want 0 and 1", fu8["int8-projection"], fua["int8-projection"])
	}
	if same(qa.F32, q8.F32) {
		t.Fatal("int8-attention's projection equals int8's fp32 product: the int8 kernel did not run")
	}
	closeTo(t, "int8-projection against fp32", qa.F32, ref.F32, d, 0.999, 0.03)
	for _, threads := range []int{2, 5} {
		if got, _ := run("int8-attention", threads, xs); !same(got.F32, qa.F32) {
			t.Fatalf("%d threads differ from 1", threads)
		}
	}
	one := &tensor.Tensor{DType: tensor.Float32, Shape: []int{1, n, d}, F32: xs.F32[n*d : 2*n*d]}
	if got, _ := run("int8-attention", 2, one); !same(got.F32, qa.F32[k*d:2*k*d]) {
		t.Fatal("a batch of one differs from the same matrix in a batch of three")
	}
}
