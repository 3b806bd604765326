package cpu_test

import (
	"context"
	"fmt"
	"sort"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/backends/cpu"
	"github.com/zoo-dev/zoo/internal/pairtime"
	"github.com/zoo-dev/zoo/variants"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

// smallBuiltins returns the built-in variants' names, sorted, for the reduced-precision
// program tests, with their common inputs: batch 2, n 40, the second sequence 35 long.
func smallBuiltins() ([]string, map[string]*tensor.Tensor) {
	names := make([]string, 0, len(variants.Builtin()))
	for name := range variants.Builtin() {
		names = append(names, name)
	}
	sort.Strings(names)
	in := encoderInputs(2, 40)
	mask := in[variant.InputKeyPadding].Bool
	for i := 35; i < 40; i++ {
		mask[40+i] = true
	}
	return names, in
}

// smallBuiltin builds the named variant at 2 layers of width 64 (4 heads, d_ff 128), seed 3.
func smallBuiltin(t *testing.T, name string) *graph.Graph {
	t.Helper()
	v := variants.Builtin()[name]
	cfg, err := variant.Resolve(v.Describe(), map[string]any{"layers": int64(2), "d_model": int64(64), "heads": int64(4), "d_ff": int64(128)})
	if err != nil {
		t.Fatal(err)
	}
	g, err := v.Build(context.Background(), cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// benchPrecision runs g (2 threads) in fp32 and in prec, paired run by run, at each shape
// (batch, n), as sub-benchmarks prefix+"b=…/n=…", and reports both medians (prec+"-ms",
// "fp32-ms") and the median of the per-pair speed-ups of prec ("speedup").
func benchPrecision(b *testing.B, g *graph.Graph, prec, prefix string, shapes [][2]int) {
	const threads = 2
	progs := map[string]backends.Program{}
	for _, pr := range []string{"fp32", prec} {
		p, err := cpu.Backend{}.Compile(g, backends.Options{Threads: threads, Precision: pr})
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		progs[pr] = p
	}
	for _, sh := range shapes {
		in := encoderInputs(sh[0], sh[1])
		runner := func(p backends.Program) func() error {
			return func() error { _, err := p.Run(context.Background(), in); return err }
		}
		b.Run(fmt.Sprintf("%sb=%d/n=%d", prefix, sh[0], sh[1]), func(b *testing.B) {
			for _, f := range []func() error{runner(progs[prec]), runner(progs["fp32"])} {
				if err := f(); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			r, err := pairtime.Interleave(context.Background(), runner(progs[prec]), runner(progs["fp32"]), b.N, pairGap, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(pairtime.Median(r.A), prec+"-ms")
			b.ReportMetric(pairtime.Median(r.B), "fp32-ms")
			b.ReportMetric(r.Ratio, "speedup")
		})
	}
}
