package cpu

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// reduceRef is the pure-Go twin of reduceRun: every output element is reduceRowF of the
// elements it reduces, gathered in index order of the reduced axes.
func reduceRef(x *tensor.Tensor, a0, a1 int, kind reduceKind) []float32 {
	outer, red, inner := 1, 1, 1
	for i, d := range x.Shape {
		switch {
		case i < a0:
			outer *= d
		case i < a1:
			red *= d
		default:
			inner *= d
		}
	}
	out := make([]float32, outer*inner)
	row := make([]float32, red)
	for o := 0; o < outer; o++ {
		for j := 0; j < inner; j++ {
			for r := 0; r < red; r++ {
				row[r] = x.F32[(o*red+r)*inner+j]
			}
			out[o*inner+j] = reduceRowF(row, kind)
		}
	}
	return out
}

// TestReduceMiddle checks reduceRun's middle-axes Sum and Mean against reduceRef bit for bit, on
// shapes with axes of 1, odd sizes and more elements than one parallel grain, reducing one
// axis or two adjacent ones, keeping the reduced axes or not; and that it declines the
// reductions it does not do (two runs of axes, Max).
func TestReduceMiddle(t *testing.T) {
	r := rand.New(rand.NewSource(17))
	for _, c := range []struct {
		shape  []int
		a0, a1 int
	}{
		{[]int{1, 1, 1}, 1, 2}, {[]int{3, 5, 7}, 1, 2}, {[]int{2, 3, 5, 7}, 1, 3}, {[]int{1, 8, 64, 33, 64}, 3, 4}, {[]int{5, 1, 9}, 0, 1}, {[]int{2, 0, 3}, 1, 2},
	} {
		for _, kind := range []reduceKind{reduceSum, reduceMean} {
			for _, keep := range []bool{true, false} {
				t.Run(fmt.Sprintf("%v_%d-%d_kind%d_keep%v", c.shape, c.a0, c.a1, kind, keep), func(t *testing.T) {
					x, _ := tensor.New(tensor.Float32, c.shape...)
					for i := range x.F32 {
						x.F32[i] = float32(r.NormFloat64())
					}
					mark := make([]bool, len(c.shape))
					var outShape []int
					for i, d := range c.shape {
						mark[i] = i >= c.a0 && i < c.a1
						if !mark[i] {
							outShape = append(outShape, d)
						} else if keep {
							outShape = append(outShape, 1)
						}
					}
					got, err := reduce(&exec{threads: 2}, x, mark, keep, kind)
					if err != nil {
						t.Fatal(err)
					}
					if !tensor.SameShape(got.Shape, outShape) {
						t.Fatalf("shape %v, want %v", got.Shape, outShape)
					}
					want := reduceRef(x, c.a0, c.a1, kind)
					for i := range want {
						if got.F32[i] != want[i] && !(got.F32[i] != got.F32[i] && want[i] != want[i]) {
							t.Fatalf("element %d: %g, want %g", i, got.F32[i], want[i])
						}
					}
				})
			}
		}
	}
	x, _ := tensor.New(tensor.Float32, 2, 3, 4, 5)
	if _, ok, _ := reduceRun(&exec{threads: 1}, x, []bool{false, true, false, true}, false, reduceSum); ok {
		t.Error("two runs of axes were reduced by reduceRun")
	}
	if _, ok, _ := reduceRun(&exec{threads: 1}, x, []bool{false, true, false, false}, false, reduceMax); ok {
		t.Error("Max was reduced by reduceRun")
	}
}
