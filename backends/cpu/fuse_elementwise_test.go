package cpu_test

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/backends/cpu"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// TestFusedElementwise checks that chains of Add, Sub, Mul and Div (from a Transpose that
// keeps the last axis, or from a run-time value; operands scalar, a row, a (B, 1, n, 1) mask
// or the full shape; the chain value left or right of Sub and Div) run as one
// FusedElementwise step, bitwise equal to the unfused program and within float tolerance of
// the graph's reference evaluation, on shapes with axes of 1, odd and beyond a parallel
// grain, a lone op keeping its step (and the row kernel, whichever operand is the wide one);
// that integer shape arithmetic is left alone; and that an operand widening the chain
// makes the fused step fall back to its steps, with the same result.
func TestFusedElementwise(t *testing.T) {
	r := rand.New(rand.NewSource(61))
	for _, c := range []struct {
		name  string
		build func(b *graph.Builder, x, m, row string) string
	}{
		{"transpose-mul-div", func(b *graph.Builder, x, m, row string) string {
			// Nyström's (x · keep) / d_k^¼
			return b.Div(b.Mul(b.Transpose(x, 0, 2, 1, 3), m), b.ConstFloat(2.828427))
		}},
		{"reversed-sub-div", func(b *graph.Builder, x, m, row string) string {
			return b.Div(b.ConstFloat(3), b.Sub(row, b.Mul(b.ConstFloat(0.5), x)))
		}},
		{"single-op-wide-operand-second", func(b *graph.Builder, x, m, row string) string {
			return b.Sub(row, x) // the chain value is x, the right operand
		}},
		{"full-operand", func(b *graph.Builder, x, m, row string) string {
			return b.Add(b.Sub(b.Mul(x, x), row), b.ConstFloat(1))
		}},
		{"sub-first", func(b *graph.Builder, x, m, row string) string {
			return b.Add(b.Sub(x, row), row) // a first op in one pass, then one in place
		}},
		{"add-first-times-one", func(b *graph.Builder, x, m, row string) string {
			return b.Div(b.Mul(b.Add(row, x), b.ConstFloat(1)), b.ConstFloat(1)) // ·1 and /1 move nothing
		}},
		{"transpose-scalar", func(b *graph.Builder, x, m, row string) string {
			// operands that merge along any axes, and a transposed x that must not
			return b.Sub(b.Mul(b.Transpose(x, 0, 2, 1, 3), b.ConstFloat(3)), b.ConstFloat(0.5))
		}},
		{"matrix-operand", func(b *graph.Builder, x, m, row string) string {
			// Nyström's 7I − AZ: an operand as wide as x's last two axes, broadcast over the
			// leading ones, so the chain's rows merge across them
			mat := b.Input("mat", tensor.Float32, graph.Sym("h"), graph.Fixed(8))
			return b.Sub(mat, b.Mul(x, b.ConstFloat(0.25)))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := graph.NewBuilder("ew")
			x := b.Input("x", tensor.Float32, graph.Sym("b"), graph.Sym("n"), graph.Sym("h"), graph.Fixed(8))
			m := b.Input("m", tensor.Float32, graph.Sym("b"), graph.Fixed(1), graph.Sym("n"), graph.Fixed(1))
			row := b.Input("row", tensor.Float32, graph.Fixed(8))
			// integer shape arithmetic, which must stay as it is
			n := b.Slice(b.Shape(x), b.ConstInts(1), b.ConstInts(2), b.ConstInts(0))
			b.Output("len", b.Mul(b.Add(n, b.ConstInts(3)), b.ConstInts(2)), tensor.Int64)
			b.Output("y", c.build(b, x, m, row), tensor.Float32)
			g, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			for i, nd := range g.Nodes {
				nd.Name = fmt.Sprintf("e%d", r.Intn(1000)*100+i)
			}
			p, err := cpu.Backend{}.Compile(g, backends.Options{Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			prog := p.(*cpu.Program)
			single := strings.HasPrefix(c.name, "single")
			if fu := prog.Fusions(); fu["elementwise"] != 1 && !single || fu["elementwise"] != 0 && single {
				t.Fatalf("fusions %v; steps %v", fu, prog.Kernels())
			}
			if slices.Contains(prog.Kernels(), "FusedElementwise") == single || !slices.Contains(prog.Kernels(), "Add") {
				t.Fatalf("steps %v: want one FusedElementwise (none for one op) and the integer Add left", prog.Kernels())
			}
			plain, err := cpu.Backend{}.Compile(g, backends.Options{Threads: 2, NoFusion: true})
			if err != nil {
				t.Fatal(err)
			}
			for _, sh := range []struct{ b, n, h int }{{1, 1, 1}, {2, 7, 3}, {2, 515, 9}} {
				in := map[string]*tensor.Tensor{"x": randT(r, sh.b, sh.n, sh.h, 8), "m": randT(r, sh.b, 1, sh.n, 1), "row": randT(r, 8)}
				if c.name != "transpose-mul-div" {
					in["m"] = randT(r, 1, 1, 1, 1) // unread
				}
				if c.name == "matrix-operand" {
					in["mat"] = randT(r, sh.h, 8)
				}
				got, err := prog.Run(context.Background(), in)
				if err != nil {
					t.Fatal(err)
				}
				want, err := plain.Run(context.Background(), in)
				if err != nil {
					t.Fatal(err)
				}
				ref, err := g.Eval(context.Background(), in)
				if err != nil {
					t.Fatal(err)
				}
				if !tensor.SameShape(got["y"].Shape, want["y"].Shape) || !slices.Equal(got["y"].F32, want["y"].F32) {
					t.Errorf("%+v: fused and unfused differ", sh)
				}
				if d, ok := maxDiff(got["y"], ref["y"]); !ok || d > 1e-5 {
					t.Errorf("%+v: fused and reference differ by %g", sh, d)
				}
				if got["len"].I64[0] != int64((sh.n+3)*2) {
					t.Errorf("integer chain: %v", got["len"].I64)
				}
			}
		})
	}
	t.Run("widening-operand-falls-back", func(t *testing.T) {
		b := graph.NewBuilder("ew-wide")
		x := b.Input("x", tensor.Float32, graph.Sym("a"), graph.Fixed(1))
		w := b.Input("w", tensor.Float32, graph.Sym("c"))
		b.Output("y", b.Mul(b.Add(x, w), b.ConstFloat(2)), tensor.Float32) // (a, 1) + (c,) → (a, c)
		g, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		p, err := cpu.Backend{}.Compile(g, backends.Options{Threads: 2})
		if err != nil {
			t.Fatal(err)
		}
		if fu := p.(*cpu.Program).Fusions(); fu["elementwise"] != 1 {
			t.Fatalf("fusions %v", fu)
		}
		in := map[string]*tensor.Tensor{"x": randT(r, 5, 1), "w": randT(r, 3)}
		got, err := p.Run(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		want, err := g.Eval(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		if d, ok := maxDiff(got["y"], want["y"]); !ok || d > 1e-6 || !tensor.SameShape(got["y"].Shape, []int{5, 3}) {
			t.Errorf("fallback: shape %v, differs by %g", got["y"].Shape, d)
		}
	})
}
