package cpu_test

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/variants/rope"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// TestFusedRotary checks that the rotate-half rotation x·cos + Concat(−x2, x1)·sin runs as one
// FusedRotary step whatever the operand orders and node names, from a head split's Transpose
// (read in place) or from a plain value, with cos and sin per position or one row, bitwise
// equal to the unfused program on awkward shapes; that slices which are not the two halves
// make it fall back to its steps with the same result; and that the rope variant fuses it
// (both layouts' outputs equal the unfused program's; the interleaved one does not fuse).
func TestFusedRotary(t *testing.T) {
	r := rand.New(rand.NewSource(71))
	const d = 8
	for _, c := range []struct {
		name              string
		transpose, swap   bool
		rowCos, wrongHalf bool
	}{
		{"plain", false, false, false, false},
		{"transpose-swapped", true, true, false, false},
		{"one-row-cos", false, true, true, false},
		{"wrong-halves", true, false, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := graph.NewBuilder("rot")
			var x string
			if c.transpose {
				x = b.Transpose(b.Input("x", tensor.Float32, graph.Sym("b"), graph.Sym("n"), graph.Sym("h"), graph.Fixed(d)), 0, 2, 1, 3)
			} else {
				x = b.Input("x", tensor.Float32, graph.Sym("b"), graph.Sym("h"), graph.Sym("n"), graph.Fixed(d))
			}
			cosRows := graph.Sym("n")
			if c.rowCos {
				cosRows = graph.Fixed(1)
			}
			cos := b.Input("cos", tensor.Float32, cosRows, graph.Fixed(d))
			sin := b.Input("sin", tensor.Float32, cosRows, graph.Fixed(d))
			half := int64(d / 2)
			if c.wrongHalf {
				half = 3
			}
			last := func(from, to int64) string {
				return b.Slice(x, b.ConstInts(from), b.ConstInts(to), b.ConstInts(-1))
			}
			rot := b.Op("Concat", []string{b.Op("Neg", []string{last(half, d)}, nil), last(0, half)}, graph.Attrs{"axis": graph.Int(-1)})
			var y string
			if c.swap {
				y = b.Add(b.Mul(sin, rot), b.Mul(cos, x))
			} else {
				y = b.Add(b.Mul(x, cos), b.Mul(rot, sin))
			}
			b.Output("y", y, tensor.Float32)
			g, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			for i, nd := range g.Nodes {
				nd.Name = fmt.Sprintf("r%d", r.Intn(1000)*100+i)
			}
			fused, plain := compileBoth(t, g, backends.Options{Threads: 2})
			if !slices.Contains(fused.Kernels(), "FusedRotary") || fused.Fusions()["rotary"] != 1 {
				t.Fatalf("steps %v, fusions %v: want one FusedRotary", fused.Kernels(), fused.Fusions())
			}
			if c.transpose && slices.Contains(fused.Kernels(), "Transpose") {
				t.Fatalf("steps %v: the Transpose should be read in place", fused.Kernels())
			}
			for _, sh := range []struct{ b, h, n int }{{1, 1, 1}, {2, 3, 7}, {2, 5, 300}} {
				xs := []int{sh.b, sh.h, sh.n, d}
				if c.transpose {
					xs = []int{sh.b, sh.n, sh.h, d}
				}
				rows := sh.n
				if c.rowCos {
					rows = 1
				}
				in := map[string]*tensor.Tensor{"x": randT(r, xs...), "cos": randT(r, rows, d), "sin": randT(r, rows, d)}
				want, err := plain.Run(context.Background(), in)
				if err != nil {
					t.Fatal(err)
				}
				got, err := fused.Run(context.Background(), in)
				if err != nil {
					t.Fatal(err)
				}
				for i, w := range want["y"].F32 {
					if math.Float32bits(got["y"].F32[i]) != math.Float32bits(w) {
						t.Fatalf("shape %v: y[%d] = %g, unfused %g", xs, i, got["y"].F32[i], w)
					}
				}
			}
		})
	}
	for _, layout := range []string{rope.LayoutHalf, rope.LayoutInterleaved} {
		t.Run("rope-"+layout, func(t *testing.T) {
			v := rope.New()
			cfg, err := variant.Resolve(v.Describe(), map[string]any{"layers": int64(1), "d_model": int64(32), "heads": int64(2), "d_ff": int64(64), "rope_layout": layout})
			if err != nil {
				t.Fatal(err)
			}
			g, err := v.Build(context.Background(), cfg, 0)
			if err != nil {
				t.Fatal(err)
			}
			fused, plain := compileBoth(t, g, backends.Options{Threads: 2})
			if want := map[string]int{rope.LayoutHalf: 2}[layout]; fused.Fusions()["rotary"] != want {
				t.Fatalf("%s: %d rotary fusions, want %d (queries and keys)", layout, fused.Fusions()["rotary"], want)
			}
			in := encoderInputs(2, 19)
			want, err := plain.Run(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			got, err := fused.Run(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			if d, _ := maxDiff(got["hidden"], want["hidden"]); d > 1e-5 {
				t.Fatalf("%s: fused hidden differs from unfused by %g", layout, d)
			}
		})
	}
}
