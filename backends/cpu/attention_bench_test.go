package cpu_test

import (
	"context"
	"fmt"
	"math/rand"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/backends/cpu"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// BenchmarkAttention runs one fused attention block (Q·Kᵀ/√64, a key-padding Where mask,
// softmax, ·V) of 64-wide heads on 2 threads, in fp32 and int8-attention, and reports its
// GFLOP/s (the two products' 4·b·h·n²·64 FLOPs), to compare the kernel against the linear
// layers' rate. b=8 h=12 n=512 is one layer of the base encoder at batch 8.
//
//	go test ./backends/cpu -run '^$' -bench Attention
func BenchmarkAttention(b *testing.B) {
	const dk = 64
	g := attnGraph(b, dk, "b11n", true)
	r := rand.New(rand.NewSource(1))
	for _, precision := range []string{"fp32", "int8-attention"} {
		p, err := cpu.Backend{}.Compile(g, backends.Options{Threads: 2, Precision: precision})
		if err != nil {
			b.Fatal(err)
		}
		for _, sh := range []struct{ batch, heads, n int }{{1, 8, 128}, {1, 8, 512}, {1, 8, 2048}, {8, 12, 512}} {
			mask, _ := tensor.New(tensor.Bool, sh.batch, 1, 1, sh.n)
			for j := range mask.Bool {
				mask.Bool[j] = j%sh.n < sh.n-sh.n/8 // Where keeps the score where the mask holds
			}
			in := map[string]*tensor.Tensor{"q": randT(r, sh.batch, sh.heads, sh.n, dk), "k": randT(r, sh.batch, sh.heads, sh.n, dk), "v": randT(r, sh.batch, sh.heads, sh.n, dk), "mask": mask}
			b.Run(fmt.Sprintf("%s/b=%d/h=%d/n=%d", precision, sh.batch, sh.heads, sh.n), func(b *testing.B) {
				for b.Loop() {
					if _, err := p.Run(context.Background(), in); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(4*float64(sh.batch*sh.heads*sh.n*sh.n*dk)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
