package bench

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/zoo-dev/zoo/internal/pairtime"
)

// Timed is the result of TimeRuns.
type Timed struct {
	MS          []float64 // wall time of each timed run, in ms
	PeakRSS     *int64    // peak RSS growth over all runs (nil: not measurable; see MemoryDoc)
	AllocPerRun int64     // Go heap bytes allocated per timed run
}

// TimeRuns runs fn warmup times untimed and reps times timed, settling the heap before each
// timed run (pairtime.Settle, outside the timed region). It returns the first error of fn or
// ctx, and an error when reps is not positive.
func TimeRuns(ctx context.Context, fn func() error, reps, warmup int) (Timed, error) {
	if reps < 1 {
		return Timed{}, fmt.Errorf("bench: reps must be at least 1, got %d", reps)
	}
	base, rssOK := rssBegin()
	for i := 0; i < warmup; i++ {
		if err := ctx.Err(); err != nil {
			return Timed{}, err
		}
		if err := fn(); err != nil {
			return Timed{}, err
		}
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	samples := make([]float64, 0, reps)
	for i := 0; i < reps; i++ {
		if err := ctx.Err(); err != nil {
			return Timed{}, err
		}
		pairtime.Settle()
		t0 := time.Now()
		if err := fn(); err != nil {
			return Timed{}, err
		}
		samples = append(samples, float64(time.Since(t0).Nanoseconds())/1e6)
	}
	runtime.ReadMemStats(&after)
	return Timed{MS: samples, PeakRSS: rssGrowth(base, rssOK), AllocPerRun: int64(after.TotalAlloc-before.TotalAlloc) / int64(reps)}, nil
}

// Paired is the result of TimePaired.
type Paired struct {
	Zoo, Ref       []float64 // ms per timed run
	ZooRSS, RefRSS *int64    // peak RSS growth over each one's own warm-up (nil: not measurable)
	ZooAlloc       int64     // Go heap allocated per timed zoo run
	Ratio          float64   // median over the pairs of ref time / zoo time
}

// pairGap is the idle time before each timed run of TimePaired: both runtimes keep worker
// threads spinning for a moment after a run (zoo's for 2 ms), and the other runtime's next
// run must not pay for it.
const pairGap = 5 * time.Millisecond

// TimePaired times zoo against a reference runtime on a shared machine, whose load drifts
// between two consecutive series by more than the difference being measured: it warms up
// each alone (max(warmup, 1) runs, measuring each one's peak RSS growth there), then runs
// reps timed pairs, alternating which goes first, and takes the ratio from each pair.
// Errors of ref are prefixed "onnxruntime: ".
func TimePaired(ctx context.Context, zoo, ref func() error, reps, warmup int) (Paired, error) {
	var r Paired
	refRun := func() error {
		if err := ref(); err != nil {
			return fmt.Errorf("onnxruntime: %w", err)
		}
		return nil
	}
	// Each warms up alone, as an untimed series of its own, which also gives its peak RSS.
	zw, err := TimeRuns(ctx, zoo, max(warmup, 1), 0)
	if err != nil {
		return r, err
	}
	rw, err := TimeRuns(ctx, refRun, max(warmup, 1), 0)
	if err != nil {
		return r, err
	}
	r.ZooRSS, r.RefRSS = zw.PeakRSS, rw.PeakRSS
	var before, after runtime.MemStats
	var allocs uint64
	res, err := pairtime.Interleave(ctx, zoo, refRun, reps, pairGap, func(done bool) {
		if !done {
			runtime.ReadMemStats(&before)
			return
		}
		runtime.ReadMemStats(&after)
		allocs += after.TotalAlloc - before.TotalAlloc
	})
	if err != nil {
		return r, err
	}
	r.Zoo, r.Ref, r.Ratio = res.A, res.B, res.Ratio
	r.ZooAlloc = int64(allocs) / int64(reps)
	return r, nil
}
