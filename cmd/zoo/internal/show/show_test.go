package show

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// stringer is a weights report as the CLI's prints.
type stringer string

func (s stringer) String() string { return string(s) }

func TestDescribeAndRender(t *testing.T) {
	w, _ := tensor.New(tensor.Float32, 2, 3)
	pos, _ := tensor.New(tensor.Float32, 4)
	g := &graph.Graph{
		Inputs:       []graph.ValueInfo{{Name: "x", DType: tensor.Float32, Shape: graph.Shape{graph.Sym("b"), graph.Sym("n"), graph.Fixed(3)}}},
		Initializers: []graph.Initializer{{Name: "fc.weight", Tensor: w}, {Name: "pe", Tensor: pos, Buffer: true}},
		Nodes:        []*graph.Node{{Name: "relu", Op: "Relu", Inputs: []string{"x"}, Outputs: []string{"y"}}},
		Outputs:      []graph.ValueInfo{{Name: "y", DType: tensor.Float32}},
	}
	d := variant.Description{Version: "1", Summary: "a test", Params: []variant.Param{{Name: "d_model", Kind: variant.KindInt, Default: int64(8), Doc: "width"}}}
	res := Describe("m.tiny", d, variant.Config{"d_model": int64(3)}, 5, g)
	if res.ParamCount != 6 || res.ParamBytes != 24 || len(res.Parameters) != 2 || !res.Parameters[1].Buffer || res.Hyper[0].Value != int64(3) {
		t.Fatalf("result %+v", res)
	}
	shapes := func(n int) map[string][]int { return map[string][]int{"x": {1, n, 3}} }
	if res.Costs, _ = Costs("m.tiny", g, []int{4, 8}, 0, "", shapes, 2, 3); len(res.Costs) != 2 || res.Costs[1].N != 8 || res.Costs[1].SeedFLOPs != 2*graph.SeedFLOPs(8, 3) {
		t.Fatalf("costs %+v", res.Costs)
	}
	var le *LengthError
	if _, err := Costs("m.tiny", g, []int{16}, 8, "max_len", shapes, 2, 3); !errors.As(err, &le) || !strings.Contains(err.Error(), "--seq 16 is longer than m.tiny's maximum length 8 (max_len)") {
		t.Errorf("beyond max_len: %v", err)
	}
	res.Weights = stringer("random (seed 5)")
	res.Feeds = &Feeds{Lines: []string{"x float32 [b n 3]: ids (test)"}, MaxLen: 64, MaxLenWhy: "the rows of its position table pe"}
	var b bytes.Buffer
	Render(&b, res)
	for _, want := range []string{"m.tiny 1 — a test", "weights: random (seed 5)", "d_model", "pe (buffer)", "  x float32 [b n 3]: ids (test)", "maximum length 64 (the rows of the position table pe)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

func TestClampSeqs(t *testing.T) {
	var b bytes.Buffer
	if got := ClampSeqs(&b, []int{128, 512}, 300, "the rows of its position table pe", "m"); !slices.Equal(got, []int{128, 300}) || !strings.Contains(b.String(), "maximum length 300 (the rows of its position table pe): showing n = 128,300") {
		t.Errorf("clamped to %v, note %q", got, b.String())
	}
	b.Reset()
	if got := ClampSeqs(&b, []int{128, 512}, 0, "", "m"); !slices.Equal(got, []int{128, 512}) || b.Len() != 0 {
		t.Errorf("no max_len: %v, %q", got, b.String())
	}
	if got := ClampSeqs(&b, []int{128, 512}, 64, "max_len", "m"); !slices.Equal(got, []int{64}) {
		t.Errorf("both beyond: %v", got)
	}
}

// TestShapes: a float input takes its declared shape (first dynamic axis 1, the others n)
// unless --shape gives one; a text model's plan gives its inputs' shapes; a bad spec is an
// error naming it.
func TestShapes(t *testing.T) {
	g := &graph.Graph{Name: "m", Inputs: []graph.ValueInfo{
		{Name: "src", DType: tensor.Float32, Shape: graph.Shape{graph.Sym("B"), graph.Sym("n"), graph.Fixed(4)}},
		{Name: "bias", DType: tensor.Float32, Shape: graph.Shape{graph.Sym("n"), graph.Sym("n")}},
	}}
	text := func(n int) map[string][]int { return map[string][]int{"src": {1, n}, "bias": {1, n}} }
	for _, c := range []struct {
		name  string
		text  func(int) map[string][]int
		specs []string
		want  map[string][]int // at n = 5
		err   string
	}{
		{"declared", nil, nil, map[string][]int{"src": {1, 5, 4}, "bias": {1, 5}}, ""},
		{"given", nil, []string{"src=2xnx4", "bias=nxn"}, map[string][]int{"src": {2, 5, 4}, "bias": {5, 5}}, ""},
		{"text", text, nil, map[string][]int{"src": {1, 5}, "bias": {1, 5}}, ""},
		{"over text", text, []string{"bias=3x7"}, map[string][]int{"src": {1, 5}, "bias": {3, 7}}, ""},
		{"no input", nil, []string{"x=1"}, nil, `model m has no input "x" (inputs: src`},
		{"fixed", nil, []string{"src=1xnx3"}, nil, "axis 2 is fixed at 4"},
		{"rank", nil, []string{"src=1xn"}, nil, "of 3 dimensions, not 2"},
		{"zero", nil, []string{"src=0xnx4"}, nil, `dimension "0" is neither a positive count nor n`},
		{"no dims", nil, []string{"src="}, nil, "want NAME=DIMS"},
	} {
		f, err := Shapes(g, c.text, c.specs)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got := f(5)
		if len(got) != len(c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
		for k, v := range c.want {
			if !slices.Equal(got[k], v) {
				t.Errorf("%s: %s is %v, want %v", c.name, k, got[k], v)
			}
		}
	}
}
