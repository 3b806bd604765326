package cuda

import (
	"encoding/binary"
	"reflect"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

func TestBroadcastAndCoalesce(t *testing.T) {
	out, err := broadcastShape([]int{4, 1, 3}, []int{5, 1})
	if err != nil || !reflect.DeepEqual(out, []int{4, 5, 3}) {
		t.Fatalf("broadcast = %v, %v", out, err)
	}
	if _, err := broadcastShape([]int{2}, []int{3}); err == nil || !strings.Contains(err.Error(), "(2) and (3)") {
		t.Errorf("bad broadcast: err = %v", err)
	}
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

func TestSliceAxis(t *testing.T) {
	for _, c := range []struct {
		dim              int
		start, end, step int64
		first            int64
		count            int
	}{
		{5, -3, -1, 1, 2, 2},
		{5, 2, 1 << 62, 1, 2, 3},
		{5, -1, -1 << 63, -1, 4, 5},
		{5, 3, 0, -2, 3, 2},
		{3, 2, 1, 1, 2, 0},
		{5, 1, 100, 2, 1, 2},
	} {
		first, count, err := sliceAxis(c.dim, c.start, c.end, c.step)
		if err != nil || count != c.count || (count > 0 && first != c.first) {
			t.Errorf("sliceAxis(%d, %d, %d, %d) = %d, %d, %v; want %d, %d", c.dim, c.start, c.end, c.step, first, count, err, c.first, c.count)
		}
	}
}

func TestShapeOps(t *testing.T) {
	if s, err := reshapeTo([]int{2, 3, 4}, []int64{0, -1}, false); err != nil || !reflect.DeepEqual(s, []int{2, 12}) {
		t.Errorf("reshape = %v, %v", s, err)
	}
	if _, err := reshapeTo([]int{2, 3, 4}, []int64{5, -1}, false); err == nil {
		t.Error("reshape 24 to (5, -1) should fail")
	}
	if s, err := squeezeShape([]int{1, 3, 1}, nil); err != nil || !reflect.DeepEqual(s, []int{3}) {
		t.Errorf("squeeze = %v, %v", s, err)
	}
	if _, err := squeezeShape([]int{1, 3}, []int64{1}); err == nil {
		t.Error("squeezing a size-3 axis should fail")
	}
	if s, err := unsqueezeShape([]int{3}, []int64{0, -1}); err != nil || !reflect.DeepEqual(s, []int{1, 3, 1}) {
		t.Errorf("unsqueeze = %v, %v", s, err)
	}
}

func TestHostNode(t *testing.T) {
	n := &graph.Node{Name: "m", Op: "Mul", Inputs: []string{"a", "a"}, Outputs: []string{"y"}}
	h := newHostNode(n)
	defer h.close()
	a, _ := tensor.FromInt64([]int64{2, 3}, 2)
	out, err := h.run([]*tensor.Tensor{a, a})
	if err != nil || !reflect.DeepEqual(out[0].I64, []int64{4, 9}) {
		t.Fatalf("host Mul = %v, %v", out, err)
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
