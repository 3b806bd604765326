package graph_test

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/zoo/graph"
)

// checkDims compares a shape helper's result with want, or its error with the wanted
// substring when wantErr is set.
func checkDims(t *testing.T, what string, got []int, err error, want []int, wantErr string) {
	t.Helper()
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%s: got %v, %v; want an error mentioning %q", what, got, err, wantErr)
		}
		return
	}
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	if got == nil || !slices.Equal(got, want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func TestNumElements(t *testing.T) {
	cases := []struct {
		in   []int
		want int
	}{
		{nil, 1},
		{[]int{}, 1},
		{[]int{2, 3, 4}, 24},
		{[]int{2, 0, 4}, 0},
		{[]int{2, -1}, -1},
		{[]int{math.MaxInt / 2, 3}, -1},
		{[]int{0, math.MaxInt, math.MaxInt}, 0},
	}
	for _, tc := range cases {
		if got := graph.NumElements(tc.in); got != tc.want {
			t.Errorf("NumElements(%v) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestBroadcastShapes(t *testing.T) {
	cases := []struct {
		in      [][]int
		want    []int
		wantErr string
	}{
		{[][]int{{2, 1}, {3}}, []int{2, 3}, ""},
		{[][]int{{3}, {2, 1}}, []int{2, 3}, ""},
		{[][]int{{}, {2, 3}}, []int{2, 3}, ""},
		{[][]int{{}, {}}, []int{}, ""},
		{nil, []int{}, ""},
		{[][]int{{1, 4, 1}, {5, 1, 1, 6}}, []int{5, 1, 4, 6}, ""},
		{[][]int{{2, 0}, {1}}, []int{2, 0}, ""},
		{[][]int{{0}, {1}}, []int{0}, ""},
		{[][]int{{3, 1}, {1, 4}, {2, 1, 1}}, []int{2, 3, 4}, ""},
		{[][]int{{8, 1, 6, 1}, {7, 1, 5}}, []int{8, 7, 6, 5}, ""},
		{[][]int{{2}, {3}}, nil, "axis -1: 2 vs 3"},
		{[][]int{{2, 3}, {4, 3}}, nil, "axis -2"},
		{[][]int{{0}, {2}}, nil, "cannot be broadcast"},
		{[][]int{{-1}, {2}}, nil, "negative"},
	}
	for _, tc := range cases {
		got, err := graph.BroadcastShapes(tc.in...)
		checkDims(t, fmt.Sprintf("BroadcastShapes%v", tc.in), got, err, tc.want, tc.wantErr)
	}
}

func TestNormAxis(t *testing.T) {
	cases := []struct {
		axis    int64
		rank    int
		want    int
		wantErr bool
	}{
		{0, 3, 0, false},
		{2, 3, 2, false},
		{-1, 3, 2, false},
		{-3, 3, 0, false},
		{3, 3, 0, true},
		{-4, 3, 0, true},
		{0, 0, 0, true},
		{math.MinInt64, 2, 0, true},
	}
	for _, tc := range cases {
		got, err := graph.NormAxis(tc.axis, tc.rank)
		if (err != nil) != tc.wantErr || (err == nil && got != tc.want) {
			t.Errorf("NormAxis(%d, %d) = %d, %v; want %d, error %v", tc.axis, tc.rank, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestNormAxes(t *testing.T) {
	cases := []struct {
		axes    []int64
		rank    int
		want    []int
		wantErr string
	}{
		{[]int64{0, -1}, 3, []int{0, 2}, ""},
		{[]int64{-1, 0}, 3, []int{2, 0}, ""},
		{[]int64{}, 3, []int{}, ""},
		{[]int64{2, -1}, 3, nil, "repeat"},
		{[]int64{3}, 3, nil, "out of range"},
	}
	for _, tc := range cases {
		got, err := graph.NormAxes(tc.axes, tc.rank)
		checkDims(t, fmt.Sprintf("NormAxes(%v, %d)", tc.axes, tc.rank), got, err, tc.want, tc.wantErr)
	}
}

func TestReshapeDims(t *testing.T) {
	cases := []struct {
		in        []int
		target    []int64
		allowZero bool
		want      []int
		wantErr   string
	}{
		{[]int{2, 3, 4}, []int64{0, -1}, false, []int{2, 12}, ""},
		{[]int{2, 3, 4}, []int64{-1}, false, []int{24}, ""},
		{[]int{2, 3, 4}, []int64{4, 0, 2}, false, []int{4, 3, 2}, ""},
		{[]int{2, 3, 4}, []int64{0, 0, 0}, false, []int{2, 3, 4}, ""},
		{[]int{6}, []int64{2, -1, 1}, false, []int{2, 3, 1}, ""},
		{[]int{}, []int64{1, 1}, false, []int{1, 1}, ""},
		{[]int{1}, []int64{}, false, []int{}, ""},
		{[]int{0, 3}, []int64{0, -1}, false, nil, "cannot be inferred"},
		{[]int{0, 3}, []int64{3, 0}, true, []int{3, 0}, ""},
		{[]int{0, 3}, []int64{0, 3}, true, []int{0, 3}, ""},
		{[]int{2, 3}, []int64{0, 3}, true, nil, "6 elements"},
		{[]int{0, 3}, []int64{-1, 0}, true, nil, "both -1 and 0"},
		{[]int{2, 3}, []int64{4, 2}, false, nil, "(8 elements)"},
		{[]int{2, 3}, []int64{-1, 4}, false, nil, "not a multiple of 4"},
		{[]int{2, 3}, []int64{-1, -1}, false, nil, "more than one -1"},
		{[]int{2, 3}, []int64{-2, 3}, false, nil, "-2"},
		{[]int{6}, []int64{1, 0}, false, nil, "copies dimension 1"},
	}
	for _, tc := range cases {
		got, err := graph.ReshapeDims(tc.in, tc.target, tc.allowZero)
		checkDims(t, fmt.Sprintf("ReshapeDims(%v, %v, %v)", tc.in, tc.target, tc.allowZero), got, err, tc.want, tc.wantErr)
	}
}

func TestSqueezeDims(t *testing.T) {
	cases := []struct {
		in      []int
		axes    []int64
		want    []int
		wantErr string
	}{
		{[]int{1, 3, 1, 2}, nil, []int{3, 2}, ""},
		{[]int{1, 3, 1, 2}, []int64{0}, []int{3, 1, 2}, ""},
		{[]int{1, 3, 1, 2}, []int64{-2, 0}, []int{3, 2}, ""},
		{[]int{1, 3, 1, 2}, []int64{}, []int{1, 3, 1, 2}, ""},
		{[]int{1, 1}, nil, []int{}, ""},
		{[]int{}, nil, []int{}, ""},
		{[]int{0, 1}, nil, []int{0}, ""},
		{[]int{2, 3}, []int64{0}, nil, "size 2"},
		{[]int{1, 3}, []int64{2}, nil, "out of range"},
		{[]int{1, 3}, []int64{0, -2}, nil, "repeat"},
	}
	for _, tc := range cases {
		got, err := graph.SqueezeDims(tc.in, tc.axes)
		checkDims(t, fmt.Sprintf("SqueezeDims(%v, %v)", tc.in, tc.axes), got, err, tc.want, tc.wantErr)
	}
}

func TestUnsqueezeDims(t *testing.T) {
	cases := []struct {
		in      []int
		axes    []int64
		want    []int
		wantErr string
	}{
		{[]int{3, 4}, []int64{0}, []int{1, 3, 4}, ""},
		{[]int{3, 4}, []int64{-1}, []int{3, 4, 1}, ""},
		{[]int{3, 4}, []int64{1, 3}, []int{3, 1, 4, 1}, ""},
		{[]int{3, 4}, []int64{3, 1}, []int{3, 1, 4, 1}, ""},
		{[]int{}, []int64{0}, []int{1}, ""},
		{[]int{}, []int64{-1, 0}, []int{1, 1}, ""},
		{[]int{3}, []int64{}, []int{3}, ""},
		{[]int{3, 4}, []int64{3}, nil, "out of range"},
		{[]int{3, 4}, []int64{1, -3}, nil, "repeat"},
	}
	for _, tc := range cases {
		got, err := graph.UnsqueezeDims(tc.in, tc.axes)
		checkDims(t, fmt.Sprintf("UnsqueezeDims(%v, %v)", tc.in, tc.axes), got, err, tc.want, tc.wantErr)
	}
}

func TestSliceBound(t *testing.T) {
	cases := []struct {
		start, end, step, dim int64
		first, count          int64
	}{
		{0, 3, 1, 5, 0, 3},
		{1, -1, 1, 5, 1, 3},
		{-2, math.MaxInt64, 1, 5, 3, 2},
		{0, 10, 2, 5, 0, 3},
		{0, 5, 3, 5, 0, 2},
		{3, 1, 1, 5, 3, 0},
		{-10, 2, 1, 5, 0, 2},
		{7, 9, 1, 5, 5, 0},
		// Negative steps: start clamps to [0, dim-1], end to [-1, dim-1].
		{-1, math.MinInt64, -1, 5, 4, 5},
		{4, 0, -2, 5, 4, 2},
		{10, -10, -1, 5, 4, 5},
		// start below -dim with a negative step clamps to 0: x[0] only, as ONNX takes it.
		{-7, -10, -1, 5, 0, 1},
		{-6, -10, -1, 5, 0, 1},
		{0, 0, -1, 5, 0, 0},
		{2, 2, -1, 5, 2, 0},
		{0, 3, 1, 0, 0, 0},
		{0, -1, -1, 0, -1, 0},
		{0, 5, math.MaxInt64, 5, 0, 1},
		{4, -6, math.MinInt64, 5, 4, 1},
		{math.MinInt64, math.MaxInt64, 1, 5, 0, 5},
		{1, 3, 0, 5, 1, 0},
	}
	for _, tc := range cases {
		f, n := graph.SliceBound(tc.start, tc.end, tc.step, tc.dim)
		if n != tc.count || (n > 0 && f != tc.first) {
			t.Errorf("SliceBound(%d, %d, %d, %d) = %d, %d; want %d, %d", tc.start, tc.end, tc.step, tc.dim, f, n, tc.first, tc.count)
		}
	}
}

func TestSliceDims(t *testing.T) {
	cases := []struct {
		in                        []int
		starts, ends, axes, steps []int64
		out, first, step          []int
		wantErr                   string
	}{
		{[]int{4, 5}, []int64{1}, []int64{3}, nil, nil, []int{2, 5}, []int{1, 0}, []int{1, 1}, ""},
		{[]int{4, 5}, []int64{1}, []int64{3}, []int64{-1}, nil, []int{4, 2}, []int{0, 1}, []int{1, 1}, ""},
		{[]int{4, 5}, []int64{-1, 0}, []int64{math.MinInt64, 5}, []int64{0, 1}, []int64{-1, 2}, []int{4, 3}, []int{3, 0}, []int{-1, 2}, ""},
		{[]int{4}, []int64{0}, []int64{4}, nil, []int64{math.MaxInt64}, []int{1}, []int{0}, []int{math.MaxInt32}, ""},
		{[]int{4}, []int64{0}, []int64{4, 1}, nil, nil, nil, nil, nil, "ends has 2"},
		{[]int{4}, []int64{0}, []int64{4}, []int64{0, 1}, nil, nil, nil, nil, "axes has 2"},
		{[]int{4}, []int64{0}, []int64{4}, nil, []int64{1, 1}, nil, nil, nil, "steps has 2"},
		{[]int{4}, []int64{0}, []int64{4}, nil, []int64{0}, nil, nil, nil, "is 0"},
		{[]int{4, 5}, []int64{0, 0}, []int64{1, 1}, []int64{1, -1}, nil, nil, nil, nil, "repeat"},
		{[]int{4}, []int64{0}, []int64{1}, []int64{1}, nil, nil, nil, nil, "out of range"},
	}
	for _, tc := range cases {
		what := fmt.Sprintf("SliceDims(%v, %v, %v, %v, %v)", tc.in, tc.starts, tc.ends, tc.axes, tc.steps)
		out, first, step, err := graph.SliceDims(tc.in, tc.starts, tc.ends, tc.axes, tc.steps)
		checkDims(t, what+" out", out, err, tc.out, tc.wantErr)
		if tc.wantErr == "" && err == nil {
			checkDims(t, what+" first", first, nil, tc.first, "")
			checkDims(t, what+" step", step, nil, tc.step, "")
		}
	}
}
