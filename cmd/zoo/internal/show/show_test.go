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
	if res.Costs, _ = Costs("m.tiny", g, []int{4, 8}, 0, shapes, 2, 3); len(res.Costs) != 2 || res.Costs[1].N != 8 || res.Costs[1].SeedFLOPs != 2*graph.SeedFLOPs(8, 3) {
		t.Fatalf("costs %+v", res.Costs)
	}
	var le *LengthError
	if _, err := Costs("m.tiny", g, []int{16}, 8, shapes, 2, 3); !errors.As(err, &le) || !strings.Contains(err.Error(), "--seq 16 is longer than m.tiny's maximum length 8") {
		t.Errorf("beyond max_len: %v", err)
	}
	res.Weights = stringer("random (seed 5)")
	res.Feeds = &Feeds{Lines: []string{"x float32 [b n 3]: ids (test)"}, MaxLen: 64, MaxLenFrom: "pe"}
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
	if got := ClampSeqs(&b, []int{128, 512}, 300, "m"); !slices.Equal(got, []int{128, 300}) || !strings.Contains(b.String(), "showing n = 128,300") {
		t.Errorf("clamped to %v, note %q", got, b.String())
	}
	b.Reset()
	if got := ClampSeqs(&b, []int{128, 512}, 0, "m"); !slices.Equal(got, []int{128, 512}) || b.Len() != 0 {
		t.Errorf("no max_len: %v, %q", got, b.String())
	}
	if got := ClampSeqs(&b, []int{128, 512}, 64, "m"); !slices.Equal(got, []int{64}) {
		t.Errorf("both beyond: %v", got)
	}
}
