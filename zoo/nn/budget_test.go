package nn

import (
	"context"
	"errors"
	"testing"

	"github.com/zoo-dev/zoo/internal/memlimit"
	"github.com/zoo-dev/zoo/zoo/graph"
)

func tinyEncoder(ctx context.Context, layers int) (*graph.Graph, *Ctx, error) {
	c := NewCtx(ctx, "tiny", 1)
	cfg := EncoderConfig{Vocab: 257, DModel: 16, Layers: layers, DFF: 32, MaxLen: 64, PosEncoding: "sinusoidal", Activation: "relu", LNEps: 1e-5}
	g, err := c.Encoder(cfg, MultiHeadAttention(16, 2))
	return g, c, err
}

// initBytes is the size of a graph's parameters and buffers (not the builder's constants).
func initBytes(g *graph.Graph) int64 {
	var n int64
	for _, in := range g.Initializers {
		if !graph.IsConstName(in.Name) {
			n += int64(in.Tensor.Bytes())
		}
	}
	return n
}

func TestWeightBudget(t *testing.T) {
	g, c, err := tinyEncoder(context.Background(), 3)
	if err != nil {
		t.Fatal(err)
	}
	w := initBytes(g)
	if c.WeightBytes() != w {
		t.Fatalf("WeightBytes() = %d, want the graph's %d", c.WeightBytes(), w)
	}
	cases := []struct {
		name   string
		budget int64
		fits   bool
	}{
		{"no budget", 0, true},
		{"exactly enough", w, true},
		{"one byte short", w - 1, false},         // passed by the last parameter (fc.bias)
		{"one layer's worth", w / 3, false},      // passed inside the layers: the rest is extrapolated
		{"smaller than the embedding", 1, false}, // refused by the up-front check
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.budget > 0 {
				ctx = memlimit.WithBudget(ctx, tc.budget)
			}
			g, c, err := tinyEncoder(ctx, 3)
			if tc.fits {
				if err != nil || initBytes(g) != w {
					t.Fatalf("got %v, want the whole graph", err)
				}
				return
			}
			var ob *memlimit.OverBudget
			if !errors.As(err, &ob) {
				t.Fatalf("err = %v, want an OverBudget", err)
			}
			// The layers are alike, so even the extrapolated size is exact.
			if ob.Needed != w || ob.Budget != tc.budget || c.WeightBytes() != w {
				t.Fatalf("Needed %d, Budget %d, WeightBytes %d; want %d, %d, %d", ob.Needed, ob.Budget, c.WeightBytes(), w, tc.budget, w)
			}
			if c.allocated > tc.budget {
				t.Fatalf("allocated %d bytes past the budget of %d", c.allocated, tc.budget)
			}
		})
	}
}

func TestBuildStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := tinyEncoder(ctx, 2); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}
