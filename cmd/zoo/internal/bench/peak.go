package bench

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/zoo-dev/zoo/backends"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// PeakDoc says how the SGEMM peak is measured (printed in the help).
const PeakDoc = "The SGEMM peak is measured per backend before the rows and again after each row, and the best reading\n" +
	"kept: a 1024×1024×1024 MatMul graph (4096 on accelerators) compiled by that backend with the same\n" +
	"threads and --precision (a bf16 run's peak is that of its bf16 products), best of 5 runs after a warm-up."

// MeasurePeak times a large square SGEMM (a MatMul graph with a constant right operand, as
// in the models' projections) through backend b with bb.Threads workers at bb.Precision (""
// is the backend's default), so that a row's % of peak compares like with like, and records the
// best of 5 runs after one warm-up in bb's Peak fields. It returns the first error of the
// compile, a run or ctx, naming the backend.
func MeasurePeak(ctx context.Context, b backends.Backend, bb *Backend) error {
	size := 1024
	if b.Name() != "cpu" {
		size = 4096 // accelerators need a larger product to approach their peak
	}
	bld := graph.NewBuilder("sgemm_peak")
	a := bld.Input("a", tensor.Float32, graph.Fixed(int64(size)), graph.Fixed(int64(size)))
	w, err := tensor.New(tensor.Float32, size, size)
	if err != nil {
		return fmt.Errorf("sgemm peak: %w", err)
	}
	x, err := tensor.New(tensor.Float32, size, size)
	if err != nil {
		return fmt.Errorf("sgemm peak: %w", err)
	}
	for i := range w.F32 {
		w.F32[i] = float32(i%17)/17 - 0.5
		x.F32[i] = float32(i%13)/13 - 0.5
	}
	y := bld.MatMul(a, bld.Param("b", w))
	bld.Output(y, y, tensor.Float32, graph.Fixed(int64(size)), graph.Fixed(int64(size)))
	g, err := bld.Build()
	if err != nil {
		return fmt.Errorf("sgemm peak graph: %w", err)
	}
	p, err := b.Compile(g, backends.Options{Threads: bb.Threads, Precision: bb.Precision})
	if err != nil {
		return fmt.Errorf("sgemm peak: compile on %s: %w", b.Name(), err)
	}
	defer p.Close()
	feed := map[string]*tensor.Tensor{a: x}
	best := math.Inf(1)
	for i := 0; i < 6; i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		t0 := time.Now()
		if _, err := p.Run(ctx, feed); err != nil {
			return fmt.Errorf("sgemm peak: run on %s: %w", b.Name(), err)
		}
		if d := float64(time.Since(t0).Nanoseconds()) / 1e6; i > 0 && d < best {
			best = d
		}
	}
	bb.PeakSize, bb.PeakMS = size, best
	bb.PeakGFLOPS = 2 * math.Pow(float64(size), 3) / (best / 1000) / 1e9
	return nil
}
