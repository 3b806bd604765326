package alibi

import (
	"context"
	"fmt"
	"math/rand"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/backends/cpu"
	"github.com/zoo-dev/zoo/variants/internal/paritytest"
	"github.com/zoo-dev/zoo/zoo/nn"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// The ALiBi bias is computed inside the fused attention kernel from the slopes, never
// materialised: every layer's attention fuses with it ("attention+relbias"), the steps that
// built the (h, n, n) bias are gone from the program, and the result is the unfused graph's
// within float tolerance on lengths 1, odd and beyond the kernel's key block, with padding,
// causal or not.
func TestBiasComputedInKernel(t *testing.T) {
	for _, causal := range []bool{false, true} {
		over := paritytest.With(tiny, "causal", causal)
		if _, ok := New().Describe().Param("causal"); !ok {
			over = tiny
			if causal {
				continue
			}
		}
		g := build(t, over, 3)
		fused, err := cpu.Backend{}.Compile(g, backends.Options{Threads: 2})
		if err != nil {
			t.Fatal(err)
		}
		plain, err := cpu.Backend{}.Compile(g, backends.Options{Threads: 2, NoFusion: true})
		if err != nil {
			t.Fatal(err)
		}
		fp := fused.(*cpu.Program)
		if fu := fp.Fusions(); fu["attention+relbias"] != 2 {
			t.Fatalf("causal %v: fusions %v, want 2 attention+relbias; report:\n%s", causal, fu, fp.Report())
		}
		for _, k := range fp.Kernels() {
			// (a causal model keeps its own Range for the causal mask)
			if k == "Abs" || k == "Softmax" || (k == "Range" && !causal) {
				t.Fatalf("causal %v: step %s left: %v", causal, k, fp.Kernels())
			}
		}
		r := rand.New(rand.NewSource(5))
		for _, sh := range []struct{ batch, n int }{{1, 1}, {2, 7}, {1, 600}} {
			t.Run(fmt.Sprintf("causal=%v/b=%d/n=%d", causal, sh.batch, sh.n), func(t *testing.T) {
				tok, _ := tensor.New(tensor.Int64, sh.batch, sh.n)
				for i := range tok.I64 {
					tok.I64[i] = 1 + r.Int63n(250)
				}
				pad, _ := tensor.New(tensor.Bool, sh.batch, sh.n)
				for j := sh.n / 2; j < sh.n && sh.batch > 1; j++ {
					pad.Bool[sh.n+j] = true
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
					if d := paritytest.MaxDiff(got[name], want[name], want[name].Len()); !(d <= 1e-4) {
						t.Errorf("%s: fused and unfused differ by %g", name, d)
					}
				}
			})
		}
	}
}
