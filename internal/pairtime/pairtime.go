// Package pairtime times two implementations of the same work against each other on a
// shared machine, whose load drifts between two back-to-back series by more than the
// difference being measured: it alternates them run by run and takes the ratio per pair.
package pairtime

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"time"
)

// Settle collects garbage, to be called outside the timed region before each timed run.
// A run that returns fresh tensors allocates the same tens of megabytes each time; without a
// collection in between, the runs of one GC cycle take those bytes from heap pages nothing has
// touched since the OS got them (or since debug.FreeOSMemory gave them back), and each 4 KiB
// page costs a fault. A long-running process (a server) recycles pages it already touched, so
// a settled heap is what it sees: vanilla base, batch 8, n 512 at int8 measured 12-15 % faster
// settled, with 3,000 faults fewer per run. The collection itself is cheap for these heaps
// (mostly pointer-free tensors) and would otherwise fall into one run in several. One
// collection, not two: pages freed two cycles back are what the background scavenger
// returns to the OS, and a second collection per run had it return ~8 MB that the next
// run faulted in again (1,300 faults per run of that model).
func Settle() { runtime.GC() }

// Result holds the timed runs of Interleave.
type Result struct {
	A, B  []float64 // wall time of each timed run in ms, in order
	Ratio float64   // median over the pairs of B time / A time (above 1: A is faster)
}

// Interleave runs a and b reps times each, alternating which goes first, sleeping gap before
// every timed run so that neither pays for worker threads the other leaves spinning, and
// settling the heap (Settle) before each. When
// around is set it is called just before and just after each timed run of a, outside the
// timed region (to read allocation counters, say). It returns the first error of a or b,
// or ctx's, and an error when reps is not positive.
func Interleave(ctx context.Context, a, b func() error, reps int, gap time.Duration, around func(after bool)) (Result, error) {
	if reps < 1 {
		return Result{}, errors.New("pairtime: reps must be at least 1")
	}
	timed := func(f func() error) (float64, error) {
		Settle()
		time.Sleep(gap)
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		t0 := time.Now()
		err := f()
		return float64(time.Since(t0).Nanoseconds()) / 1e6, err
	}
	runA := func() (float64, error) {
		if around != nil {
			around(false)
			defer around(true)
		}
		return timed(a)
	}
	var r Result
	ratios := make([]float64, 0, reps)
	for i := 0; i < reps; i++ {
		var ta, tb float64
		var err error
		if i%2 == 1 {
			if tb, err = timed(b); err != nil {
				return r, err
			}
		}
		if ta, err = runA(); err != nil {
			return r, err
		}
		if i%2 == 0 {
			if tb, err = timed(b); err != nil {
				return r, err
			}
		}
		r.A, r.B = append(r.A, ta), append(r.B, tb)
		ratios = append(ratios, tb/ta)
	}
	r.Ratio = Median(ratios)
	return r, nil
}

// Median returns the median of xs without changing it, or 0 for an empty slice.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
