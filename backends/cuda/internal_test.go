package cuda

import (
	"encoding/binary"
	"reflect"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/backends"
)

func TestCoalesce(t *testing.T) {
	// Bias add over (B, n, d) + (d): merges to one dimension for the bias and the output.
	shape := []int{2, 8, 16}
	d := coalesce(shape, broadcastStrides(shape, shape), broadcastStrides([]int{16}, shape))
	if !reflect.DeepEqual(d.shape, []int64{16, 16}) || !reflect.DeepEqual(d.st[0], []int64{16, 1}) || !reflect.DeepEqual(d.st[1], []int64{0, 1}) {
		t.Errorf("coalesce = %+v", d)
	}
	// Same shapes collapse to one contiguous dimension.
	d = coalesce([]int{3, 1, 4}, contiguous([]int{3, 1, 4}), contiguous([]int{3, 1, 4}))
	if !reflect.DeepEqual(d.shape, []int64{12}) {
		t.Errorf("coalesce same = %+v", d)
	}
	// A transpose stays two-dimensional.
	d = coalesce([]int{3, 2}, []int64{1, 3}, contiguous([]int{3, 2}))
	if !reflect.DeepEqual(d.shape, []int64{3, 2}) {
		t.Errorf("coalesce transpose = %+v", d)
	}
}

func TestDescPack(t *testing.T) {
	d := desc{shape: []int64{3, 2}}
	d.st[0] = []int64{1, 3}
	d.st[1] = []int64{2, 1}
	b, err := d.pack()
	if err != nil || len(b) != descBytes || descBytes != 264 {
		t.Fatalf("pack: %d bytes, %v", len(b), err)
	}
	get := func(i int) int64 { return int64(binary.LittleEndian.Uint64(b[8*i:])) }
	if get(0) != 2 || get(1) != 3 || get(2) != 2 || get(9) != 1 || get(10) != 3 || get(17) != 2 || get(18) != 1 {
		t.Errorf("layout: %v", b[:160])
	}
	if _, err := (desc{shape: make([]int64, 9)}).pack(); err == nil {
		t.Error("9 dimensions should not pack")
	}
}

// TestSliceView checks the layout Slice reads: the shape and first element from
// graph.SliceDims, the strides from the steps.
func TestSliceView(t *testing.T) {
	for _, c := range []struct {
		in                        []int
		starts, ends, axes, steps []int64
		shape                     []int
		base                      int64
		strides                   []int64
	}{
		{[]int{5}, []int64{-3}, []int64{-1}, nil, nil, []int{2}, 2, []int64{1}},
		{[]int{5}, []int64{2}, []int64{1 << 62}, nil, nil, []int{3}, 2, []int64{1}},
		{[]int{5}, []int64{-1}, []int64{-1 << 63}, nil, []int64{-1}, []int{5}, 4, []int64{-1}},
		{[]int{5}, []int64{3}, []int64{0}, nil, []int64{-2}, []int{2}, 3, []int64{-2}},
		{[]int{3}, []int64{2}, []int64{1}, nil, nil, []int{0}, 0, []int64{1}},
		// A start below -dim with a negative step takes x[0] (ONNX; CUDA once took nothing).
		{[]int{4}, []int64{-10}, []int64{-20}, nil, []int64{-1}, []int{1}, 0, []int64{-1}},
		{[]int{2, 5}, []int64{1}, []int64{100}, []int64{-1}, []int64{2}, []int{2, 2}, 1, []int64{5, 2}},
	} {
		shape, base, st, err := sliceView(c.in, c.starts, c.ends, c.axes, c.steps)
		if err != nil || !reflect.DeepEqual(shape, c.shape) || base != c.base || !reflect.DeepEqual(st, c.strides) {
			t.Errorf("sliceView(%v, %v, %v, %v, %v) = %v, %d, %v, %v; want %v, %d, %v", c.in, c.starts, c.ends, c.axes, c.steps, shape, base, st, err, c.shape, c.base, c.strides)
		}
	}
	if _, _, _, err := sliceView([]int{3}, []int64{0}, []int64{3}, nil, []int64{0}); err == nil {
		t.Error("a zero step should fail")
	}
}

func TestPrecision(t *testing.T) {
	t.Setenv(PrecisionEnv, "")
	for in, want := range map[string]string{"": "fp32", "FP32": "fp32", "tf32": "tf32", "bf16": "bf16"} {
		if got, err := precision(backends.Options{Precision: in}); err != nil || got != want {
			t.Errorf("precision(%q) = %q, %v", in, got, err)
		}
	}
	t.Setenv(PrecisionEnv, "tf32")
	if got, _ := precision(backends.Options{}); got != "tf32" {
		t.Errorf("%s=tf32 gives %q", PrecisionEnv, got)
	}
	if _, err := precision(backends.Options{Precision: "fp8"}); err == nil || !strings.Contains(err.Error(), "fp8") {
		t.Errorf("fp8: err = %v", err)
	}
}

func TestLibraryCandidates(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(LibPathEnv, dir)
	if got := libDirs(); len(got) == 0 || got[0] != dir {
		t.Fatalf("libDirs()[0] = %v, want %s first", got, dir)
	}
	c := candidates([]string{"libnvrtc.so.13"}, []string{dir})
	if !reflect.DeepEqual(c, []string{"libnvrtc.so.13"}) {
		t.Errorf("candidates = %v (missing files must not be listed)", c)
	}
}
