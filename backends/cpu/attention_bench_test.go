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
// softmax, ·V) of the base encoder's shape, 8 heads of 64, on 2 threads, and reports its
// GFLOP/s (the two products' 4·h·n²·64 FLOPs), to compare the kernel against the linear
// layers' rate.
//
//	go test ./backends/cpu -run '^$' -bench Attention
func BenchmarkAttention(b *testing.B) {
	const heads, dk = 8, 64
	g := attnGraph(b, dk, "b11n", true)
	p, err := cpu.Backend{}.Compile(g, backends.Options{Threads: 2})
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewSource(1))
	for _, n := range []int{128, 512, 2048} {
		mask, _ := tensor.New(tensor.Bool, 1, 1, 1, n)
		for j := range mask.Bool {
			mask.Bool[j] = j < n-n/8 // Where keeps the score where the mask holds
		}
		in := map[string]*tensor.Tensor{"q": randT(r, 1, heads, n, dk), "k": randT(r, 1, heads, n, dk), "v": randT(r, 1, heads, n, dk), "mask": mask}
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := p.Run(context.Background(), in); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(4*float64(heads*n*n*dk)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
