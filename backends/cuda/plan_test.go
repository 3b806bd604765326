//go:build cgo && linux

package cuda

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/backends/compile"
	"github.com/zoo-dev/zoo/variants"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/registry"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// TestPlanConfig compiles a graph with the CUDA backend's part of the shared compile step,
// which needs no device: the shape arithmetic of a static input folds on the host, device
// ops keep their kernel and host ops run without one.
func TestPlanConfig(t *testing.T) {
	b := graph.NewBuilder("g")
	x := b.Input("x", tensor.Float32, graph.Fixed(2), graph.Fixed(6))
	ids := b.Input("ids", tensor.Int64, graph.Sym("n"))
	d0 := b.Unsqueeze(b.Gather(b.Shape(x), b.Const(tensor.Scalar64(0)), 0), 0)
	target := b.Op("Concat", []string{d0, b.Add(b.ConstInts(1, 1), b.ConstInts(2, 1))}, graph.Attrs{"axis": graph.Int(0)})
	b.Output("y", b.Op("Reshape", []string{x, target}, nil), tensor.Float32)
	b.Output("m", b.Op("Equal", []string{ids, b.Const(tensor.Scalar64(0))}, nil), tensor.Bool)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	p, err := compile.Compile(g, planConfig(backends.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	var ops []string
	for _, st := range p.Steps {
		ops = append(ops, st.Node.Op)
		if device := st.Kernel != nil; device != (st.Node.Op != "Equal") {
			t.Errorf("%s: device kernel %v", st.Node.Op, device)
		}
		if st.Node.Op == "Reshape" {
			if c := p.Consts[st.In[1]]; c == nil || !slices.Equal(c.I64, []int64{2, 3, 2}) {
				t.Errorf("folded Reshape target = %v, want [2 3 2]", c)
			}
		}
	}
	if !slices.Equal(ops, []string{"Reshape", "Identity", "Equal", "Identity"}) {
		t.Errorf("run-time steps %v, want Reshape and Equal, each with its output Identity", ops)
	}
}

// TestFuseAttentionPlan compiles every built-in variant with the CUDA backend's compile
// config (no device needed) and checks what the attention fusion made of it: vanilla's
// layers each become one fused step that reads the head-split projections and writes the
// merged heads through strides (no Transpose left around them), with the key-padding mask
// as its bias and 1/√dh as its scale.
func TestFuseAttentionPlan(t *testing.T) {
	for _, name := range builtinNames() {
		g := buildBuiltin(t, name, "tiny")
		pl, err := compile.Compile(g, planConfig(backends.Options{}))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var fused []*graph.Node
		transposes := 0
		for _, st := range pl.Steps {
			switch st.Node.Op {
			case fusedAttentionOp:
				fused = append(fused, st.Node)
			case "Transpose":
				transposes++
			}
		}
		t.Logf("%s: %d fused attention steps, %d Transpose steps left", name, len(fused), transposes)
		if name != "vanilla" {
			continue
		}
		if len(fused) != 2 || transposes != 0 {
			t.Errorf("vanilla.tiny: %d fused attention steps and %d Transposes, want 2 and 0", len(fused), transposes)
		}
		heads := []int64{0, 2, 1, 3}
		for _, n := range fused {
			for _, k := range []string{"q_perm", "k_perm", "v_perm", "out_perm"} {
				if got, _ := n.IntList(k); !slices.Equal(got, heads) {
					t.Errorf("vanilla.tiny %s: %s = %v, want %v", n.Name, k, got, heads)
				}
			}
			// 1/√dh at tiny's head width; 10 steps: 4 Transposes, 2 MatMuls, Div, Add, Softmax, the merge.
			if n.Int("k_swap", -1) != 0 || n.Int("biases", 0) != 1 || n.Int("replaced", 0) != 10 || n.Float("scale", 0) <= 0 {
				t.Errorf("vanilla.tiny %s: %v", n.Name, n.Attrs)
			}
		}
	}
}

// TestFuseAttentionPlanForms checks that the test graphs of TestFusedAttentionMatchesUnfused
// fuse as that test expects: one fused step, every Transpose absorbed, Kᵀ written as one
// Transpose or as two.
func TestFuseAttentionPlanForms(t *testing.T) {
	for _, c := range []struct{ kt, r5 bool }{{false, false}, {true, false}, {false, true}} {
		g, err := attentionGraph(64, c.kt, c.r5)
		if err != nil {
			t.Fatal(err)
		}
		pl, err := compile.Compile(g, planConfig(backends.Options{}))
		if err != nil {
			t.Fatal(err)
		}
		var ops []string
		for _, st := range pl.Steps {
			ops = append(ops, st.Node.Op)
			if st.Node.Op == fusedAttentionOp {
				if got, _ := st.Node.IntList("k_perm"); len(got) == 0 || st.Node.Int("k_swap", -1) != 0 {
					t.Errorf("kt=%v rank5=%v: k_perm %v k_swap %d", c.kt, c.r5, got, st.Node.Int("k_swap", -1))
				}
			}
		}
		want := []string{fusedAttentionOp, "Identity"}
		if c.r5 {
			want = []string{"Unsqueeze", "Unsqueeze", "Unsqueeze", "Unsqueeze", fusedAttentionOp, "Squeeze", "Identity"}
		}
		if !slices.Equal(ops, want) {
			t.Errorf("kt=%v rank5=%v: steps %v, want %v", c.kt, c.r5, ops, want)
		}
	}
}

func builtinNames() []string { return slices.Sorted(maps.Keys(variants.Builtin())) }

// buildBuiltin builds a built-in variant at a preset of the repository's registry.yaml.
func buildBuiltin(t *testing.T, name, preset string) *graph.Graph {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "registry.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	reg, err := registry.Parse("registry.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	v := variants.Builtin()[name]
	var layers []map[string]any
	for _, e := range reg.Entries() {
		if e.Name == name {
			layers = append(layers, e.Defaults, e.Presets[preset])
		}
	}
	cfg, err := variant.Resolve(v.Describe(), layers...)
	if err != nil {
		t.Fatal(err)
	}
	g, err := v.Build(context.Background(), cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestFuseElementwisePlan checks the elementwise pairs on vanilla.tiny (two layers): each
// layer's feed-forward bias and ReLU become one step, and each of its two residual
// connections (attention's output projection, the feed-forward's second layer) fuses the
// bias Add with the residual Add; the fused residual step reads the product, the bias and
// the residual stream.
func TestFuseElementwisePlan(t *testing.T) {
	g := buildBuiltin(t, "vanilla", "tiny")
	pl, err := compile.Compile(g, planConfig(backends.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, st := range pl.Steps {
		counts[st.Node.Op]++
		if st.Node.Op == fusedBiasResidualOp && (len(st.In) != 3 || len(st.Node.Inputs) != 3 || len(st.Out) != 1) {
			t.Errorf("%s: in %v (%v), out %v", st.Node.Name, st.In, st.Node.Inputs, st.Out)
		}
	}
	if counts[fusedBinaryReluOp] != 2 || counts[fusedBiasResidualOp] != 4 {
		t.Errorf("vanilla.tiny: %d bias+ReLU and %d bias+residual steps, want 2 and 4 (ops %v)", counts[fusedBinaryReluOp], counts[fusedBiasResidualOp], counts)
	}
	unfused, err := compile.Compile(g, planConfig(backends.Options{NoFusion: true}))
	if err != nil {
		t.Fatal(err)
	}
	if n := counts[fusedBiasResidualOp]; len(unfused.Steps)-len(pl.Steps) < n {
		t.Errorf("fused plan has %d steps, unfused %d: the %d bias+residual pairs should each save one", len(pl.Steps), len(unfused.Steps), n)
	}
}
