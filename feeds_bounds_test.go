package zoo

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/onnx"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// slicedTableGraph is PyTorch's classic sinusoidal encoding as it exports: emb(ids) +
// pe[:n], with n read from the ids' shape (Shape → Slice) and pe a (rows, d) buffer, or a
// (1, rows, d) one sliced on its second axis.
func slicedTableGraph(t *testing.T, rows int, batched bool) *graph.Graph {
	t.Helper()
	const d = 4
	b := graph.NewBuilder("sliced")
	ids := b.Input("ids", tensor.Int64, graph.Sym("batch"), graph.Sym("seq"))
	emb, _ := tensor.New(tensor.Float32, 300, d) // the byte tokenizer's ids
	x := b.Op("Gather", []string{b.Param("emb", emb), ids}, nil)
	peShape, axis := []int{rows, d}, int64(0)
	if batched {
		peShape, axis = []int{1, rows, d}, 1
	}
	pe, _ := tensor.New(tensor.Float32, peShape...)
	n := b.Op("Slice", []string{b.Op("Shape", []string{ids}, nil), b.ConstInts(1), b.ConstInts(2)}, nil)
	sliced := b.Op("Slice", []string{b.Buffer("pe", pe), b.ConstInts(0), n, b.ConstInts(axis)}, nil)
	b.Output("hidden", b.Add(x, sliced), tensor.Float32)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestSlicedPositionTableBoundsTheLength(t *testing.T) {
	for _, batched := range []bool{false, true} {
		p, err := PlanFeeds(slicedTableGraph(t, 128, batched), nil)
		if err != nil {
			t.Fatal(err)
		}
		if p.MaxLen != 128 || p.MaxLenFrom != "pe" {
			t.Errorf("batched %v: max length %d from %q, want 128 from pe (the sliced table)", batched, p.MaxLen, p.MaxLenFrom)
		}
		w, err := ChooseWindow("sliced", 0, p, 0)
		if err != nil || w != 128 {
			t.Errorf("batched %v: window %d, %v; want 128", batched, w, err)
		}
		if _, err := ChooseWindow("sliced", 0, p, 229); err == nil {
			t.Errorf("batched %v: a window of 229 tokens over a 128-row table was accepted", batched)
		}
	}
}

// TestShapeBound: a model whose scores get a fixed (1, 1, 16, 16) bias added has no position
// table, but cannot take more than 16 tokens; the plan says so, naming the failing node.
func TestShapeBound(t *testing.T) {
	b := graph.NewBuilder("fixedbias")
	ids := b.Input("ids", tensor.Int64, graph.Sym("batch"), graph.Sym("seq"))
	emb, _ := tensor.New(tensor.Float32, 50, 4)
	x := b.Op("Gather", []string{b.Param("emb", emb), ids}, nil)
	scores := b.Op("MatMul", []string{x, b.Op("Transpose", []string{x}, graph.Attrs{"perm": graph.Ints(0, 2, 1)})}, nil)
	bias, _ := tensor.New(tensor.Float32, 1, 16, 16)
	b.Output("scores", b.Add(scores, b.Buffer("bias", bias)), tensor.Float32)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	p, err := PlanFeeds(g, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.MaxLen != 16 || p.MaxLenNode == "" {
		t.Fatalf("max length %d (%q), want 16 from the graph's shapes", p.MaxLen, p.MaxLenNode)
	}
	if w, err := ChooseWindow("fixedbias", 0, p, 0); err != nil || w != 16 {
		t.Errorf("window %d, %v; want 16", w, err)
	}
	_, err = ChooseWindow("fixedbias", 0, p, 40)
	if err == nil || !strings.Contains(err.Error(), "fail beyond 16 tokens") {
		t.Errorf("a window of 40: %v, want a refusal naming the 16-token bound", err)
	}
	t.Log(err)
}

// TestSlicedTableFileWindows loads an ONNX file whose position table is sliced (exported from
// slicedTableGraph) and streams a 229-token text through it: it is windowed at the table's 128
// rows, where it used to run at 512 and fail in Add with a broadcast error.
func TestSlicedTableFileWindows(t *testing.T) {
	data, err := onnx.Export(slicedTableGraph(t, 128, false), onnx.ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "sliced.onnx")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := Load(context.Background(), path, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	enc, err := m.NewEncoder(EncoderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if enc.Window() != 128 {
		t.Fatalf("window %d, want 128 (the sliced table's rows)", enc.Window())
	}
	tokens := 0
	err = enc.Stream(context.Background(), strings.NewReader(strings.Repeat("a", 229)), func(b Batch) error {
		for _, n := range b.Windows.Lengths[:b.Windows.B] {
			tokens += int(n)
		}
		return nil
	})
	if err != nil || tokens != 229 {
		t.Errorf("streamed %d tokens, %v; want all 229 in windows of 128", tokens, err)
	}
}

// TestFeedPlanLimit: the shortest of the inputs' static length, max_len and the graph's
// bound, and what sets it.
func TestFeedPlanLimit(t *testing.T) {
	for _, c := range []struct {
		plan   FeedPlan
		maxLen int
		want   int
		why    string
	}{
		{FeedPlan{}, 0, 0, ""},
		{FeedPlan{}, 128, 128, "max_len"},
		{FeedPlan{MaxLen: 16, MaxLenFrom: "pe"}, 0, 16, "the rows of its position table pe"},
		{FeedPlan{MaxLen: 16, MaxLenFrom: "pe"}, 128, 128, "max_len"},
		{FeedPlan{MaxLen: 9, MaxLenNode: "its shapes fail beyond 9 tokens: x"}, 0, 9, "its shapes fail beyond 9 tokens: x"},
		{FeedPlan{Seq: 8, MaxLen: 16, MaxLenFrom: "pe"}, 0, 8, "the static length of its inputs"},
		{FeedPlan{Seq: 64}, 32, 32, "max_len"},
	} {
		if got, why := c.plan.Limit(c.maxLen); got != c.want || why != c.why {
			t.Errorf("%+v, max_len %d: %d (%s), want %d (%s)", c.plan, c.maxLen, got, why, c.want, c.why)
		}
	}
}
