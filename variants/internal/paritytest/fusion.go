package paritytest

import (
	"context"
	"fmt"
	"math/rand"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/backends/cpu"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/nn"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// FusedMatchesUnfused compiles the encoder g on the CPU backend with and without fusion,
// runs both on random tokens of each (batch, n) in shapes (the second sequence of a batch
// padded after its first half) and fails unless hidden and logits agree within tol. It
// returns the fused program for the caller's checks of what fused.
func FusedMatchesUnfused(t *testing.T, g *graph.Graph, shapes [][2]int, tol float64) *cpu.Program {
	t.Helper()
	fused, err := cpu.Backend{}.Compile(g, backends.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := cpu.Backend{}.Compile(g, backends.Options{Threads: 2, NoFusion: true})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewSource(5))
	for _, sh := range shapes {
		batch, n := sh[0], sh[1]
		t.Run(fmt.Sprintf("b=%d/n=%d", batch, n), func(t *testing.T) {
			tok, _ := tensor.New(tensor.Int64, batch, n)
			for i := range tok.I64 {
				tok.I64[i] = 1 + r.Int63n(250)
			}
			pad, _ := tensor.New(tensor.Bool, batch, n)
			for j := n / 2; j < n && batch > 1; j++ {
				pad.Bool[n+j] = j > 0
			}
			in := map[string]*tensor.Tensor{nn.InputTokens: tok, nn.InputKeyPadding: pad}
			got, err := fused.Run(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			want, err := plain.Run(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{nn.OutputHidden, nn.OutputLogits} {
				if g := got[name]; g == nil || !tensor.SameShape(g.Shape, want[name].Shape) {
					t.Fatalf("%s: fused %v, unfused shape %v", name, g, want[name].Shape)
				}
				if d := MaxDiff(got[name], want[name], want[name].Len()); !(d <= tol) {
					t.Errorf("%s: fused and unfused differ by %g", name, d)
				}
			}
		})
	}
	return fused.(*cpu.Program)
}
