package cpu_test

import (
	"context"
	"math/rand"
	"testing"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// BenchmarkLayoutOps runs the copies a graph makes when a fusion does not absorb them (a
// head split and merge of base width at b8 n512, sparse's window padding of K) on 2 threads,
// beside a plain copy of the same bytes on 2 threads: the ratio of their GB/s is the figure
// to read on a shared machine.
//
//	go test ./backends/cpu -run '^$' -bench LayoutOps
func BenchmarkLayoutOps(b *testing.B) {
	r := rand.New(rand.NewSource(1))
	x := randT(r, 8, 512, 12, 64)
	for _, c := range []struct {
		name  string
		build func(gb *graph.Builder, x string) string
	}{
		{"split", func(gb *graph.Builder, x string) string { return gb.Transpose(x, 0, 2, 1, 3) }},
		{"concat", func(gb *graph.Builder, x string) string {
			z := gb.Op("ConstantOfShape", []string{gb.ConstInts(8, 512, 2, 64)}, nil)
			return gb.Op("Concat", []string{z, x, z}, graph.Attrs{"axis": graph.Int(2)})
		}},
	} {
		gb := graph.NewBuilder("g")
		in := gb.Input("x", tensor.Float32, graph.Fixed(8), graph.Fixed(512), graph.Fixed(12), graph.Fixed(64))
		// a small part of the result is the output, so the copy lands in the program's
		// reused buffers as it does inside a model
		y := gb.Slice(c.build(gb, in), gb.ConstInts(0), gb.ConstInts(1), gb.ConstInts(0))
		gb.Output("y", y, tensor.Float32)
		g, err := gb.Build()
		if err != nil {
			b.Fatal(err)
		}
		p := compileProgram(b, g, backends.Options{Threads: 2})
		feed := map[string]*tensor.Tensor{"x": x}
		b.Run(c.name, func(b *testing.B) {
			var bytes int
			for b.Loop() {
				out, err := p.Run(context.Background(), feed)
				if err != nil {
					b.Fatal(err)
				}
				bytes = 4 * (len(x.F32) + 8*len(out["y"].F32))
			}
			b.ReportMetric(float64(bytes)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
	}
	b.Run("copy", func(b *testing.B) {
		dst := make([]float32, len(x.F32))
		for b.Loop() {
			done := make(chan bool)
			h := len(dst) / 2
			go func() { copy(dst[:h], x.F32[:h]); done <- true }()
			copy(dst[h:], x.F32[h:])
			<-done
		}
		b.ReportMetric(8*float64(len(dst))*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
	})
}
