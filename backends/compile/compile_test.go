package compile

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// node is a one-output node named after its output.
func node(op, out string, in ...string) *graph.Node {
	return &graph.Node{Name: out, Op: op, Inputs: in, Outputs: []string{out}}
}

// testGraph: x (input, static shape 2×3) and c (initializer) feed
//
//	nc = Neg(c); nn = Neg(nc)      folds: all-constant
//	s  = Shape(x)                  folds: x has a static shape
//	a  = Add(x, nn); b = Neg(a)    run: they read x
//	y  = Identity(b)               the output, listed twice
func testGraph() *graph.Graph {
	return &graph.Graph{
		Name:         "g",
		Opset:        graph.DefaultOpset,
		Inputs:       []graph.ValueInfo{{Name: "x", DType: tensor.Float32, Shape: graph.Shape{graph.Fixed(2), graph.Fixed(3)}}},
		Initializers: []graph.Initializer{{Name: "c", Tensor: tensor.ScalarF(2)}},
		Nodes: []*graph.Node{
			node("Neg", "nc", "c"), node("Neg", "nn", "nc"), node("Shape", "s", "x"),
			node("Add", "a", "x", "nn"), node("Neg", "b", "a"), node("Identity", "y", "b"),
		},
		Outputs: []graph.ValueInfo{{Name: "y", DType: tensor.Float32}, {Name: "y", DType: tensor.Float32}},
	}
}

// evaluator folds Neg of a float32 scalar and Shape, recording what it was asked.
type evaluator struct{ calls []string }

func (e *evaluator) fold(n *graph.Node, k string, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	e.calls = append(e.calls, k+":"+n.Name)
	switch n.Op {
	case "Neg":
		return []*tensor.Tensor{tensor.ScalarF(-in[0].F32[0])}, nil
	case "Shape":
		if in[0].F32 != nil {
			return nil, fmt.Errorf("Shape got data")
		}
		dims := make([]int64, len(in[0].Shape))
		for i, d := range in[0].Shape {
			dims[i] = int64(d)
		}
		t, err := tensor.FromInt64(dims, len(dims))
		return []*tensor.Tensor{t}, err
	}
	return nil, fmt.Errorf("cannot fold %s", n.Op)
}

func config(e *evaluator) Config[string] {
	return Config[string]{
		Backend: "test",
		Kernel:  func(n *graph.Node) (string, error) { return "k" + n.Op, nil },
		Fold:    e.fold,
	}
}

func stepNames(p *Plan[string]) (s []string) {
	for _, st := range p.Steps {
		s = append(s, st.Node.Name+"/"+st.Kernel)
	}
	return s
}

func TestCompileFoldsPlansAndDrops(t *testing.T) {
	e := &evaluator{}
	p, err := Compile(testGraph(), config(e))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"kNeg:nc", "kNeg:nn", "kShape:s"}; !slices.Equal(e.calls, want) {
		t.Errorf("folded %v, want %v", e.calls, want)
	}
	if want := []string{"a/kAdd", "b/kNeg", "y/kIdentity"}; !slices.Equal(stepNames(p), want) {
		t.Errorf("steps %v, want %v", stepNames(p), want)
	}
	if !slices.Equal(p.Outputs, []string{"y"}) || p.Slots[p.OutSlot[0]] != "y" {
		t.Errorf("outputs %v (slots %v), want [y] once", p.Outputs, p.OutSlot)
	}
	kept := map[string]float32{}
	for s, c := range p.Consts {
		if c != nil {
			if p.Kinds[s] != SlotConst {
				t.Errorf("slot %s holds a constant but is %v", p.Slots[s], p.Kinds[s])
			}
			if c.DType == tensor.Float32 {
				kept[p.Slots[s]] = c.F32[0]
			} else {
				kept[p.Slots[s]] = -1
			}
		}
	}
	// c and nc fed only folded nodes, s nothing at all; nn is read by Add.
	if len(kept) != 1 || kept["nn"] != 2 {
		t.Errorf("constants kept %v, want only nn = 2", kept)
	}
	freed := map[string]string{}
	for _, st := range p.Steps {
		for _, s := range st.Free {
			freed[p.Slots[s]] = st.Node.Name
		}
	}
	if want := map[string]string{"a": "b", "b": "y"}; fmt.Sprint(freed) != fmt.Sprint(want) {
		t.Errorf("freed %v, want %v (never x, nn or the output y)", freed, want)
	}
}

func TestCompileFreeInputs(t *testing.T) {
	c := config(&evaluator{})
	c.FreeInputs = true
	p, err := Compile(testGraph(), c)
	if err != nil {
		t.Fatal(err)
	}
	if st := p.Steps[0]; !slices.Contains(st.Free, p.InSlot[0]) {
		t.Errorf("with FreeInputs, x is not released after its last reader %s (frees %v)", st.Node.Name, st.Free)
	}
}

func TestCompileWithoutFold(t *testing.T) {
	c := config(nil)
	c.Fold = nil
	p, err := Compile(testGraph(), c)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Steps) != 6 {
		t.Errorf("without an evaluator every node runs; steps %v", stepNames(p))
	}
}

func TestCompileKeepIntermediates(t *testing.T) {
	for _, tc := range []struct {
		keep    []string
		outputs []string
		err     string
	}{
		{keep: []string{"a", "y", "a"}, outputs: []string{"y", "a"}},
		{keep: []string{"nn"}, outputs: []string{"y", "nn"}},
		{keep: []string{"nope"}, err: `test: compile graph g: kept intermediate "nope" is not a value of the graph`},
	} {
		c := config(&evaluator{})
		c.KeepIntermediates = tc.keep
		p, err := Compile(testGraph(), c)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("keep %v: err %v, want %q", tc.keep, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("keep %v: %v", tc.keep, err)
		}
		if !slices.Equal(p.Outputs, tc.outputs) {
			t.Errorf("keep %v: outputs %v, want %v", tc.keep, p.Outputs, tc.outputs)
		}
		for i, name := range p.Outputs {
			s := p.OutSlot[i]
			for _, st := range p.Steps {
				if slices.Contains(st.Free, s) {
					t.Errorf("keep %v: output %s is released by %s", tc.keep, name, st.Node.Name)
				}
			}
			if p.Kinds[s] == SlotConst && p.Consts[s] == nil {
				t.Errorf("keep %v: constant output %s was dropped", tc.keep, name)
			}
		}
	}
}

func TestCompileErrors(t *testing.T) {
	bad := errors.New("bad attribute")
	for _, tc := range []struct {
		name   string
		kernel func(n *graph.Node) (string, error)
		fold   bool
		want   string
	}{
		{"unsupported", func(n *graph.Node) (string, error) {
			if n.Op == "Add" {
				return "", &backends.UnsupportedOpError{Detail: "no test kernel"}
			}
			return "", nil
		}, false, `backend test cannot run op Add (node "a"): no test kernel`},
		{"kernel error", func(n *graph.Node) (string, error) {
			if n.Op == "Identity" {
				return "", bad
			}
			return "", nil
		}, false, `test: compile node 5 (Identity "y"): bad attribute`},
		{"fold error", func(n *graph.Node) (string, error) { return "", nil }, true, `test: compile node 0 (Neg "nc"): fold constant: cannot fold`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Config[string]{Backend: "test", Kernel: tc.kernel}
			if tc.fold {
				c.Fold = func(*graph.Node, string, []*tensor.Tensor) ([]*tensor.Tensor, error) {
					return nil, errors.New("cannot fold")
				}
			}
			_, err := Compile(testGraph(), c)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			var u *backends.UnsupportedOpError
			if errors.As(err, &u) != (tc.name == "unsupported") {
				t.Errorf("err %T: UnsupportedOpError expected only for an unsupported op", err)
			}
		})
	}
	g := testGraph()
	g.Nodes[3].Inputs[1] = "missing"
	if _, err := Compile(g, config(&evaluator{})); err == nil || !strings.HasPrefix(err.Error(), "test: compile graph: ") {
		t.Errorf("invalid graph: err = %v", err)
	}
}

// TestCompileFuseBeforeFrees checks that the last uses are planned on the fused steps: a
// fusion that merges Add and Neg into one step leaves a released after nothing.
func TestCompileFuseBeforeFrees(t *testing.T) {
	c := config(&evaluator{})
	c.Fuse = func(p *Plan[string]) {
		add, neg := p.Steps[0], p.Steps[1]
		fused := Step[string]{Node: neg.Node, Kernel: "fused", In: add.In, Out: neg.Out}
		p.Steps = append([]Step[string]{fused}, p.Steps[2:]...)
	}
	p, err := Compile(testGraph(), c)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"b/fused", "y/kIdentity"}; !slices.Equal(stepNames(p), want) {
		t.Fatalf("steps %v, want %v", stepNames(p), want)
	}
	if len(p.Steps[0].Free) != 0 || len(p.Steps[1].Free) != 1 || p.Slots[p.Steps[1].Free[0]] != "b" {
		t.Errorf("frees %v, %v; want none, then b", p.Steps[0].Free, p.Steps[1].Free)
	}
}

func TestLastUses(t *testing.T) {
	// slot 0: input read by steps 0 and 2; 1: made by 0, read by 1; 2: made by 1, unread;
	// 3: untouched; 4: made by 2 (the output).
	steps := [][2][]int{{{0}, {1}}, {{1, -1}, {2}}, {{0}, {4}}}
	got := LastUses(5, len(steps), func(i int) ([]int, []int) { return steps[i][0], steps[i][1] })
	if want := []int{2, 1, 1, -1, 2}; !slices.Equal(got, want) {
		t.Fatalf("LastUses = %v, want %v", got, want)
	}
}

// TestPeakBytes checks the live-bytes walk over testGraph's steps a = Add(x, nn), b = Neg(a),
// y = Identity(b): x stays live (an input), a dies at b, b at y, and y (the output) stays;
// constants and unknown names count nothing.
func TestPeakBytes(t *testing.T) {
	p, err := Compile(testGraph(), config(&evaluator{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		size map[string]int64
		want int64
	}{
		{"all alike", map[string]int64{"x": 10, "a": 10, "b": 10, "y": 10, "nn": 1000}, 30}, // x + a + b at Neg, x + b + y at Identity
		{"a large", map[string]int64{"x": 1, "a": 100, "b": 1, "y": 1}, 102},                // x + a + b while Neg runs
		{"y large", map[string]int64{"x": 1, "a": 1, "b": 1, "y": 100}, 102},                // x + b + y
		{"nothing known", nil, 0},
	} {
		if got := p.PeakBytes(tc.size); got != tc.want {
			t.Errorf("%s: PeakBytes = %d, want %d (steps %v)", tc.name, got, tc.want, stepNames(p))
		}
	}
}
