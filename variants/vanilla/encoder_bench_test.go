package vanilla_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/variants/vanilla"
	"github.com/zoo-dev/zoo/zoo/nn"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// BenchmarkEncoder runs the seed's base encoder (6 layers, d 512, 8 heads, d_ff 2048) at
// batch 1 on the CPU backend and reports tokens/s. Compare with PyTorch on the same machine:
// /usr/bin/python3 variants/vanilla/testdata/gen_fixtures.py --bench
func BenchmarkEncoder(b *testing.B) {
	cfg, err := variant.Resolve(vanilla.New().Describe())
	if err != nil {
		b.Fatal(err)
	}
	g, err := vanilla.New().Build(context.Background(), cfg, 0)
	if err != nil {
		b.Fatal(err)
	}
	cpu, _ := backends.Lookup("cpu")
	prog, err := cpu.Compile(g, backends.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer prog.Close()
	for _, n := range []int{128, 512} {
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
