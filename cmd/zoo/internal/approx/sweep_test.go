package approx

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/zoo/attnmap"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

func TestValues(t *testing.T) {
	for _, c := range []struct {
		flag, variant string
		n, block      int
		want          []int
		err           string
	}{
		{"", "linformer", 10, 0, []int{2, 4, 8, 10}, ""},
		{"", "nystrom", 8, 0, []int{2, 4, 8}, ""},
		{"", "performer", 10, 0, []int{8, 16, 32, 64, 128, 256, 512, 1024}, ""},
		{"", "sparse", 32, 4, []int{0, 1, 2, 4, 8}, ""},
		{"", "vanilla", 10, 0, []int{0}, ""},
		{"3,5", "linformer", 10, 0, []int{3, 5}, ""},
		{"0,2", "sparse", 10, 1, []int{0, 2}, ""},
		{"0", "linformer", 10, 0, nil, `--values "0": want positive integers`},
		{"-1", "sparse", 10, 1, nil, "want window sizes ≥ 0"},
		{"4", "linear", 10, 0, nil, "linear has no approximation knob"},
	} {
		got, err := Values(c.flag, c.variant, c.n, c.block)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s %q: error %v, want %q", c.variant, c.flag, err, c.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%s %q: %v, %v; want %v", c.variant, c.flag, got, err, c.want)
		}
	}
	if b := SparseBlock("sparse", 64, 100); b != 12 {
		t.Errorf("SparseBlock(sparse, 64, 100) = %d, want 12 (8 blocks)", b)
	}
	if b := SparseBlock("linformer", 64, 100); b != 0 {
		t.Errorf("SparseBlock(linformer) = %d, want 0", b)
	}
	for v, want := range map[string]string{"linformer": "k", "vanilla": ""} {
		if k, ok := Knob(v); !ok || k != want {
			t.Errorf("Knob(%s) = %q, %v", v, k, ok)
		}
	}
	if _, ok := Knob("gqa"); ok {
		t.Error("gqa has a knob")
	}
}

func TestSweepLayers(t *testing.T) {
	q, k, v := qkv(16, 4, 1)
	exact := Exact(q, k, v, nil)
	layers := []Layer{{Q: [][][]float64{q}, K: [][][]float64{k}, V: [][][]float64{v}, Out: [][][]float64{exact}}}
	doc, err := SweepLayers(Setup{Variant: "vanilla", Vanilla: "vanilla.tiny", N: 16, Values: []int{0}}, layers)
	if err != nil || len(doc.Points) != 1 || doc.Points[0].Max != 0 || doc.N != 16 {
		t.Fatalf("vanilla against itself: %+v, %v", doc, err)
	}
	doc, err = SweepLayers(Setup{Variant: "sparse", Vanilla: "vanilla.tiny", N: 16, Values: []int{0, 4}, Block: 4}, layers)
	if err != nil || len(doc.Points) != 2 || doc.Points[0].Coverage >= doc.Points[1].Coverage || doc.Points[1].Coverage != 1 || doc.Points[1].Max > 1e-12 {
		t.Fatalf("sparse: %+v, %v", doc, err)
	}
	var b bytes.Buffer
	Print(&b, *doc, "p.png")
	if out := b.String(); !strings.Contains(out, "coverage") || !strings.Contains(out, "100.0 %") || !strings.HasSuffix(out, "plot: p.png\n") {
		t.Errorf("table:\n%s", out)
	}
}

func TestProbes(t *testing.T) {
	n := func(op string, in []string, out string) *graph.Node {
		return &graph.Node{Name: "layers.0.self_attn/" + out, Op: op, Inputs: in, Outputs: []string{out}}
	}
	g := &graph.Graph{Nodes: []*graph.Node{
		n("Transpose", []string{"k"}, "kt"),
		n("MatMul", []string{"q", "kt"}, "qk"),
		n("Div", []string{"qk", "scale"}, "scores"),
		n("Softmax", []string{"scores"}, "p"),
		n("MatMul", []string{"p", "v"}, "o"),
	}}
	sites := []attnmap.Site{{Layer: 0, Value: "p"}}
	keep, err := Probes(g, sites, "m")
	if err != nil || !slices.Equal(keep, []string{"q", "k", "v", "o"}) {
		t.Errorf("keep %v, %v", keep, err)
	}
	g.Nodes = g.Nodes[:4]
	if _, err := Probes(g, sites, "m"); err == nil || !strings.Contains(err.Error(), "no MatMul(softmax, V)") {
		t.Errorf("without the product by V: %v", err)
	}
}

func TestPerHead(t *testing.T) {
	x := &tensor.Tensor{DType: tensor.Float32, Shape: []int{1, 2, 2, 1}, F32: []float32{1, 2, 3, 4}}
	h, err := PerHead(x, 2)
	if err != nil || len(h) != 2 || h[1][0][0] != 3 || h[1][1][0] != 4 {
		t.Errorf("heads %v, %v", h, err)
	}
	if _, err := PerHead(x, 3); err == nil || !strings.Contains(err.Error(), "(1, heads, 3, d)") {
		t.Errorf("wrong length: %v", err)
	}
	if _, err := Layers(map[string]*tensor.Tensor{}, []string{"q", "k", "v", "o"}, 2); err == nil || !strings.Contains(err.Error(), "layer 0, q") {
		t.Errorf("a missing value: %v", err)
	}
}
