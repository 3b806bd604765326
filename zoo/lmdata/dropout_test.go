package lmdata

import (
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

func dropoutGraph(rate string) *graph.Graph {
	d := graph.Shape{graph.Sym("batch"), graph.Sym("seq"), graph.Fixed(50)}
	return &graph.Graph{
		Inputs: []graph.ValueInfo{{Name: variant.InputTokens, DType: tensor.Int64}, {Name: variant.DropoutInput("layers.0.ffn"), DType: tensor.Float32, Shape: d},
			{Name: variant.DropoutInput("layers.0.self_attn"), DType: tensor.Float32, Shape: d}},
		Meta: map[string]string{variant.MetaDropout: rate},
	}
}

func TestDropoutFeeds(t *testing.T) {
	g := dropoutGraph("0.25")
	a, err := DropoutFeeds(g, 1, 3, 4, 20)
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != 2 {
		t.Fatalf("%d feeds, want 2", len(a))
	}
	zeros, n := 0, 0
	for _, x := range a {
		if !reflect.DeepEqual(x.Shape, []int{4, 20, 50}) {
			t.Fatalf("shape %v", x.Shape)
		}
		for _, v := range x.F32 {
			switch v {
			case 0:
				zeros++
			case float32(1 / 0.75):
			default:
				t.Fatalf("value %v, want 0 or 1/(1−p)", v)
			}
			n++
		}
	}
	// 8000 draws of p = 0.25: σ ≈ 0.0048
	if f := float64(zeros) / float64(n); math.Abs(f-0.25) > 0.02 {
		t.Errorf("dropped share %.3f, want 0.25", f)
	}
	same, _ := DropoutFeeds(g, 1, 3, 4, 20)
	next, _ := DropoutFeeds(g, 1, 4, 4, 20)
	site := variant.DropoutInput("layers.0.ffn")
	if !reflect.DeepEqual(a[site].F32, same[site].F32) || reflect.DeepEqual(a[site].F32, next[site].F32) ||
		reflect.DeepEqual(a[site].F32, a[variant.DropoutInput("layers.0.self_attn")].F32) {
		t.Error("masks are not a function of seed, step and site")
	}
	none, err := DropoutFeeds(&graph.Graph{Inputs: []graph.ValueInfo{{Name: variant.InputTokens}}}, 1, 1, 1, 1)
	if err != nil || len(none) != 0 {
		t.Errorf("inference graph: %v, %v", none, err)
	}
	for _, bad := range []string{"", "1", "-0.1", "x"} {
		if _, err := DropoutFeeds(dropoutGraph(bad), 1, 1, 1, 1); err == nil || !strings.Contains(err.Error(), "not a rate") {
			t.Errorf("rate %q: err %v", bad, err)
		}
	}
}
