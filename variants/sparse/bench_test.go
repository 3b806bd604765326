package sparse_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/variants/sparse"
	"github.com/zoo-dev/zoo/zoo/nn"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// BenchmarkEncoder runs the base sparse encoder (6 layers, d 512, 8 heads, blocks of 64,
// window 1) at batch 1 on the CPU backend with 2 threads and reports tokens/s; with
// -cpuprofile it shows where the fused block-sparse attention spends its time.
func BenchmarkEncoder(b *testing.B) {
	desc := sparse.New().Describe()
	cfg, err := variant.Resolve(desc, map[string]any{"max_len": int64(8192)})
	if err != nil {
		b.Fatal(err)
	}
	g, err := sparse.New().Build(context.Background(), cfg, 0)
	if err != nil {
		b.Fatal(err)
	}
	cpu, _ := backends.Lookup("cpu")
	prog, err := cpu.Compile(g, backends.Options{Threads: 2})
	if err != nil {
		b.Fatal(err)
	}
	defer prog.Close()
	for _, n := range []int{512, 2048} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			ids := make([]int64, n)
			for i := range ids {
				ids[i] = int64('a'+i%26) + 1
			}
			tokens, _ := tensor.FromInt64(ids, 1, n)
			mask, _ := tensor.FromBool(make([]bool, n), 1, n)
			in := map[string]*tensor.Tensor{nn.InputTokens: tokens, nn.InputKeyPadding: mask}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := prog.Run(context.Background(), in); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}
