package cpu_test

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Where(Greater(y, 0), dy, 0) fuses into one step that gives the unfused program's and the
// reference evaluator's bits, zeros, negative values and NaN in y included, on odd and empty
// shapes; operands that broadcast run the unfused steps, and a mask read twice does not fuse.
func TestFusedReluGrad(t *testing.T) {
	r := rand.New(rand.NewSource(13))
	for _, c := range []struct {
		y, dy   []int
		twice   bool
		matches int
	}{
		{[]int{1}, []int{1}, false, 1}, {[]int{3, 5}, []int{3, 5}, false, 1}, {[]int{2, 3, 40001}, []int{2, 3, 40001}, false, 1},
		{[]int{0, 4}, []int{0, 4}, false, 1}, {[]int{4}, []int{3, 4}, false, 1}, {[]int{3, 4}, []int{3, 4}, true, 0},
	} {
		name := fmt.Sprintf("%v/%v/twice=%v", c.y, c.dy, c.twice)
		b := graph.NewBuilder("rg")
		dimsOf := func(s []int) []graph.Dim {
			d := make([]graph.Dim, len(s))
			for i, v := range s {
				d[i] = graph.Fixed(int64(v))
			}
			return d
		}
		y := b.Input("y", tensor.Float32, dimsOf(c.y)...)
		dy := b.Input("dy", tensor.Float32, dimsOf(c.dy)...)
		m := b.Op("Greater", []string{y, b.ConstFloat(0)}, nil)
		b.Output("dx", b.Where(m, dy, b.ConstFloat(0)), tensor.Float32)
		if c.twice {
			b.Output("m", m, tensor.Bool)
		}
		g, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		fused, plain := compileBoth(t, g, backends.Options{Threads: 2})
		if got := fused.Fusions()["relu-backward"]; got != c.matches {
			t.Errorf("%s: %d relu-backward fusions, want %d", name, got, c.matches)
		}
		in := map[string]*tensor.Tensor{"y": randT(r, c.y...), "dy": randT(r, c.dy...)}
		for i := range in["y"].F32 {
			switch i % 7 {
			case 1:
				in["y"].F32[i] = 0
			case 2:
				in["y"].F32[i] = float32(math.NaN())
			case 3:
				in["y"].F32[i] = float32(math.Copysign(0, -1))
			}
		}
		runBitwise(t, name, fused, plain, in)
		ref, err := g.Eval(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := runBoth(t, name, fused, plain, in)
		for i, v := range ref["dx"].F32 {
			if math.Float32bits(got["dx"].F32[i]) != math.Float32bits(v) {
				t.Fatalf("%s: dx[%d] = %v, reference %v", name, i, got["dx"].F32[i], v)
			}
		}
	}
}
