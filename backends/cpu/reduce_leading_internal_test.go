package cpu

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// reduceRun agrees bit for bit with the generic reduction (its twin: transpose the
// reduced axes last, sum each block) on sums and means over leading axes, for random and
// awkward shapes (single rows, one column, more columns than an accumulator block, empty
// reductions) and thread counts; reductions it does not handle go to the generic path.
func TestReduceLeadingMatchesGeneric(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	for _, tc := range []struct {
		shape []int
		lead  int
	}{
		{[]int{1, 1}, 1}, {[]int{3, 5}, 1}, {[]int{1024, 7}, 1}, {[]int{2, 3, 4}, 2}, {[]int{2, 3, 4}, 1},
		{[]int{5, 1, 9}, 2}, {[]int{4, 600}, 1}, {[]int{2, 3, 517}, 2}, {[]int{0, 6}, 1}, {[]int{3, 0}, 1},
		{[]int{8, 16, 64}, 2}, {[]int{1, 1, 1, 300}, 3},
	} {
		x := &tensor.Tensor{DType: tensor.Float32, Shape: tc.shape, F32: make([]float32, prod(tc.shape))}
		for i := range x.F32 {
			x.F32[i] = float32(r.NormFloat64()) * float32(math.Pow(10, float64(r.Intn(5)-2)))
		}
		mark := make([]bool, len(tc.shape))
		for i := range tc.lead {
			mark[i] = true
		}
		for _, kind := range []reduceKind{reduceSum, reduceMean} {
			for _, keep := range []bool{true, false} {
				for _, threads := range []int{1, 2, 5} {
					name := fmt.Sprintf("%v/lead%d/kind%d/keep%v/threads%d", tc.shape, tc.lead, kind, keep, threads)
					e := &exec{threads: threads}
					got, ok, err := reduceRun(e, x, mark, keep, kind)
					if err != nil || !ok {
						t.Fatalf("%s: ok %v, err %v", name, ok, err)
					}
					want, err := reduceGeneric(e, x, mark, keep, kind)
					if err != nil {
						t.Fatal(err)
					}
					if !tensor.SameShape(got.Shape, want.Shape) || len(got.F32) != len(want.F32) {
						t.Fatalf("%s: shape %v, want %v", name, got.Shape, want.Shape)
					}
					for i := range want.F32 {
						if math.Float32bits(got.F32[i]) != math.Float32bits(want.F32[i]) {
							t.Fatalf("%s: [%d] = %v, want %v", name, i, got.F32[i], want.F32[i])
						}
					}
				}
			}
		}
	}
	x := &tensor.Tensor{DType: tensor.Float32, Shape: []int{2, 3}, F32: make([]float32, 6)}
	for _, mark := range [][]bool{{false, true}, {true, true}, {false, false}} {
		if _, ok, _ := reduceRun(&exec{threads: 1}, x, mark, true, reduceSum); ok {
			t.Errorf("mark %v: reduceRun took a reduction that is not over leading axes only", mark)
		}
	}
	if _, ok, _ := reduceRun(&exec{threads: 1}, x, []bool{true, false}, true, reduceMax); ok {
		t.Error("reduceRun took a ReduceMax")
	}
}

func prod(s []int) int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}
