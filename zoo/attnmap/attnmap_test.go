package attnmap

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

func f32(shape []int, v []float32) *tensor.Tensor {
	return &tensor.Tensor{DType: tensor.Float32, Shape: shape, F32: v}
}

// seq returns 0, 1, 2, ... n-1 as float32.
func seq(n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(i)
	}
	return out
}

func node(name, op string, in, out []string) *graph.Node {
	return &graph.Node{Name: name, Op: op, Inputs: in, Outputs: out}
}

func TestSites(t *testing.T) {
	for _, c := range []struct {
		name  string
		nodes []*graph.Node
		want  []string
		err   string
	}{
		{"two layers", []*graph.Node{
			node("layers.0.self_attn/sm", "Softmax", []string{"s0"}, []string{"p0"}),
			node("layers.1.self_attn/sm", "Softmax", []string{"s1"}, []string{"p1"}),
			node("layers.1.ffn/relu", "Relu", []string{"x"}, []string{"y"}),
		}, []string{"p0", "p1"}, ""},
		{"no layers", []*graph.Node{node("fc", "MatMul", nil, []string{"o"})}, nil, "no layers.N nodes"},
		{"a layer without softmax", []*graph.Node{
			node("layers.0.self_attn/sm", "Softmax", []string{"s0"}, []string{"p0"}),
			node("layers.1.ffn/relu", "Relu", []string{"x"}, []string{"y"}),
		}, nil, "layer 1 computes no attention softmax"},
		{"two softmaxes", []*graph.Node{
			node("layers.0.self_attn/a", "Softmax", []string{"s0"}, []string{"p0"}),
			node("layers.0.self_attn/b", "Softmax", []string{"s1"}, []string{"p1"}),
		}, nil, "layer 0 has 2 softmaxes"},
		{"a softmax outside self_attn", []*graph.Node{
			node("layers.0.ffn/sm", "Softmax", []string{"s0"}, []string{"p0"}),
		}, nil, "layer 0 computes no attention softmax"},
	} {
		sites, err := Sites(&graph.Graph{Nodes: c.nodes})
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want %q", c.name, err, c.err)
			}
			continue
		}
		var got []string
		for i, s := range sites {
			if s.Layer != i {
				t.Errorf("%s: site %d is layer %d", c.name, i, s.Layer)
			}
			got = append(got, s.Value)
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, %v; want %v", c.name, got, err, c.want)
		}
	}
}

func TestLinearSites(t *testing.T) {
	g := &graph.Graph{Nodes: []*graph.Node{
		node("layers.0.self_attn/eq", "Elu", []string{"q"}, []string{"eq"}),
		node("layers.0.self_attn/ek", "Elu", []string{"k"}, []string{"ek"}),
		node("layers.0.self_attn/fq", "Add", []string{"eq", "one"}, []string{"fq"}),
		node("layers.0.self_attn/fk1", "Add", []string{"ek", "one"}, []string{"fk1"}),
		node("layers.0.self_attn/fk", "Mul", []string{"fk1", "keep"}, []string{"fk"}),
	}}
	sites, err := LinearSites(g)
	if err != nil || len(sites) != 1 || sites[0] != (Site{Layer: 0, Value: "fq", Keys: "fk"}) {
		t.Errorf("sites %+v, %v", sites, err)
	}
	g.Nodes = g.Nodes[:4]
	if _, err := LinearSites(g); err == nil || !strings.Contains(err.Error(), "not found after its Elu nodes") {
		t.Errorf("without the keep Mul: %v", err)
	}
}

func TestLayoutRead(t *testing.T) {
	// (1, 2, 2, 2): two heads over two tokens.
	plain := f32([]int{1, 2, 2, 2}, []float32{0.1, 0.9, 0.2, 0.8, 0.3, 0.7, 0.4, 0.6})
	// gqa: one group (H=1) of two query heads, rows j·n...
	gqa := f32([]int{1, 1, 4, 2}, []float32{0.1, 0.9, 0.2, 0.8, 0.3, 0.7, 0.4, 0.6})
	// linformer: two tokens over three projected keys, one head.
	proj := f32([]int{1, 1, 2, 3}, seq(6))
	// sparse: 3 tokens, block 2, window 0: two blocks of 2 × 2 scores.
	sparse := f32([]int{1, 1, 2, 2, 2}, []float32{1, 0, 0.5, 0.5, 1, 9, 9, 9})
	for _, c := range []struct {
		name string
		lay  Layout
		t    *tensor.Tensor
		head int
		want map[int][][]float32
		err  string
	}{
		{"every head", Layout{N: 2, Heads: 2}, plain, -1, map[int][][]float32{0: {{0.1, 0.9}, {0.2, 0.8}}, 1: {{0.3, 0.7}, {0.4, 0.6}}}, ""},
		{"one head", Layout{N: 2, Heads: 2}, plain, 1, map[int][][]float32{1: {{0.3, 0.7}, {0.4, 0.6}}}, ""},
		{"gqa", Layout{N: 2, Heads: 2}, gqa, -1, map[int][][]float32{0: {{0.1, 0.9}, {0.2, 0.8}}, 1: {{0.3, 0.7}, {0.4, 0.6}}}, ""},
		{"projected", Layout{N: 2, Heads: 1, Projected: 3}, proj, -1, map[int][][]float32{0: {{0, 1, 2}, {3, 4, 5}}}, ""},
		{"sparse", Layout{N: 3, Heads: 1, Block: 2}, sparse, -1, map[int][][]float32{0: {{1, 0, 0}, {0.5, 0.5, 0}, {0, 0, 1}}}, ""},
		{"wrong heads", Layout{N: 2, Heads: 3}, plain, -1, nil, "does not fit 3 heads over 2 tokens"},
		{"wrong keys", Layout{N: 2, Heads: 1, Projected: 2}, proj, -1, nil, "does not fit"},
		{"nil", Layout{N: 2, Heads: 2}, nil, -1, nil, "not a float32 tensor"},
		{"sparse shape", Layout{N: 3, Heads: 1, Block: 2, Window: 1}, sparse, -1, nil, "want (1, 1, blocks, 2, 6)"},
	} {
		l, err := c.lay.Read(c.t, c.head)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil || len(l.Heads) != len(c.want) {
			t.Fatalf("%s: %+v, %v", c.name, l, err)
		}
		for _, h := range l.Heads {
			if want, ok := c.want[h.Head]; !ok || !equalRows(h.Weights, want) {
				t.Errorf("%s: head %d weights %v, want %v", c.name, h.Head, h.Weights, want)
			}
		}
	}
}

func equalRows(a, b [][]float32) bool {
	return slices.EqualFunc(a, b, func(x, y []float32) bool { return slices.Equal(x, y) })
}

func TestLinearWeights(t *testing.T) {
	// One head, 3 tokens, d_k 1: φq = 1, 2, 3 and φk = 1, 1, 2, so w_ij ∝ k_j per row.
	fq := f32([]int{1, 1, 3, 1}, []float32{1, 2, 3})
	fk := f32([]int{1, 1, 3, 1}, []float32{1, 1, 2})
	for _, c := range []struct {
		causal bool
		want   [][]float64
	}{
		{false, [][]float64{{0.25, 0.25, 0.5}, {0.25, 0.25, 0.5}, {0.25, 0.25, 0.5}}},
		{true, [][]float64{{1, 0, 0}, {0.5, 0.5, 0}, {0.25, 0.25, 0.5}}},
	} {
		l, err := LinearWeights(fq, fk, 3, -1, 0, c.causal)
		if err != nil || len(l.Heads) != 1 {
			t.Fatalf("causal %v: %+v, %v", c.causal, l, err)
		}
		for i, row := range l.Heads[0].Weights {
			for j, w := range row {
				if math.Abs(float64(w)-c.want[i][j]) > 1e-7 {
					t.Errorf("causal %v: w[%d][%d] = %g, want %g", c.causal, i, j, w, c.want[i][j])
				}
			}
		}
	}
	if _, err := LinearWeights(fq, nil, 3, -1, 0, false); err == nil {
		t.Error("a missing φ(K) is not an error")
	}
}

func TestNewPlan(t *testing.T) {
	g := &graph.Graph{Nodes: []*graph.Node{
		node("layers.0.self_attn/sm", "Softmax", []string{"s0"}, []string{"p0"}),
		node("layers.1.self_attn/sm", "Softmax", []string{"s1"}, []string{"p1"}),
	}}
	p, err := NewPlan(g, "linformer", variant.Config{"heads": int64(4), "k": int64(16)}, 10)
	if err != nil || p.Layout != (Layout{N: 10, Heads: 4, Projected: 16}) || !slices.Equal(p.Keep(), []string{"p0", "p1"}) {
		t.Fatalf("linformer plan %+v, %v", p, err)
	}
	p.Only(1)
	if !slices.Equal(p.Keep(), []string{"p1"}) {
		t.Errorf("Only(1) keeps %v", p.Keep())
	}
	if _, err := NewPlan(g, "sparse", variant.Config{"heads": int64(4), "stride": int64(2)}, 10); err == nil || !strings.Contains(err.Error(), "sliding-window") {
		t.Errorf("strided sparse: %v", err)
	}
	for v, ok := range map[string]bool{"performer": true, "nystrom": true, "vanilla": false} {
		if why, got := NoMatrix(v); got != ok || ok == (why == "") {
			t.Errorf("NoMatrix(%s) = %q, %v", v, why, got)
		}
	}
}

func TestPlanRead(t *testing.T) {
	p := &Plan{Sites: []Site{{Layer: 0, Value: "p0"}}, Layout: Layout{N: 2, Heads: 1, Projected: 3}}
	m, err := p.Read("linformer.tiny", map[string]*tensor.Tensor{"p0": f32([]int{1, 1, 2, 3}, seq(6))}, []int64{'h' + 1, 'i' + 1}, -1)
	if err != nil || m.Model != "linformer.tiny" || !slices.Equal(m.Tokens, []string{"h", "i"}) || !slices.Equal(m.Keys, []string{"k0", "k1", "k2"}) {
		t.Fatalf("map %+v, %v", m, err)
	}
	if _, err := p.Read("x", nil, []int64{1, 2}, -1); err == nil || !strings.HasPrefix(err.Error(), "layer 0 (p0): ") {
		t.Errorf("a missing value: %v", err)
	}
}

func TestTokenLabels(t *testing.T) {
	ids := []int64{'a' + 1, ' ' + 1, '\n' + 1, '\t' + 1, 0x01 + 1, 0xc3 + 1, 0, 300}
	want := []string{"a", "·", `\n`, `\t`, `\x01`, `\xc3`, "#0", "#300"}
	if got := TokenLabels(ids); !slices.Equal(got, want) {
		t.Errorf("labels %q, want %q", got, want)
	}
}
