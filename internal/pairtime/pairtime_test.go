package pairtime

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"
)

func TestInterleave(t *testing.T) {
	var order []string
	arounds := 0
	slow := func() error { order = append(order, "a"); time.Sleep(4 * time.Millisecond); return nil }
	fast := func() error { order = append(order, "b"); time.Sleep(1 * time.Millisecond); return nil }
	r, err := Interleave(context.Background(), slow, fast, 4, 0, func(bool) { arounds++ })
	if err != nil {
		t.Fatal(err)
	}
	if got := string([]byte{order[0][0], order[1][0], order[2][0], order[3][0]}); got != "abba" {
		t.Errorf("order %v, want a b b a …", order)
	}
	if len(r.A) != 4 || len(r.B) != 4 || arounds != 8 {
		t.Errorf("%d A runs, %d B runs, %d around calls; want 4, 4, 8", len(r.A), len(r.B), arounds)
	}
	// The ratio is what the timed runs say, whatever the machine's load made of the sleeps:
	// the median of the pairs' B/A.
	var ratios []float64
	for i := range r.A {
		ratios = append(ratios, r.B[i]/r.A[i])
	}
	if want := Median(ratios); r.Ratio != want || r.Ratio <= 0 {
		t.Errorf("ratio %g, want the median of the pairs' B/A, %g", r.Ratio, want)
	}
}

// Every timed run, of either side, starts on a collected heap.
func TestInterleaveSettles(t *testing.T) {
	var last uint32
	unsettled := 0
	run := func() error {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		if ms.NumGC == last {
			unsettled++
		}
		last = ms.NumGC
		return nil
	}
	if _, err := Interleave(context.Background(), run, run, 3, 0, nil); err != nil {
		t.Fatal(err)
	}
	if unsettled != 0 {
		t.Errorf("%d of 6 timed runs found no collection since the one before", unsettled)
	}
}

func TestInterleaveErrors(t *testing.T) {
	boom := errors.New("boom")
	ok := func() error { return nil }
	if _, err := Interleave(context.Background(), ok, func() error { return boom }, 3, 0, nil); !errors.Is(err, boom) {
		t.Errorf("b's error: got %v", err)
	}
	if _, err := Interleave(context.Background(), ok, ok, 0, 0, nil); err == nil {
		t.Error("reps 0 accepted")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Interleave(ctx, ok, ok, 2, 0, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: got %v", err)
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}} {
		in := append([]float64(nil), c.xs...)
		if got := Median(c.xs); got != c.want {
			t.Errorf("Median(%v) = %g, want %g", c.xs, got, c.want)
		}
		for i := range in {
			if in[i] != c.xs[i] {
				t.Errorf("Median reordered its input: %v", c.xs)
			}
		}
	}
}
