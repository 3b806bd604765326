package workpool

import (
	"strings"
	"sync/atomic"
	"testing"
)

// TestForCoversOnce checks that For hands out disjoint ranges covering [0, n) exactly once,
// for thread counts below, at and above the number of chunks, and grains that force inline
// runs.
func TestForCoversOnce(t *testing.T) {
	for _, c := range []struct{ threads, n, grain int }{{1, 10, 1}, {2, 1, 1}, {2, 1000, 1}, {3, 7, 2}, {8, 5, 1}, {4, 100, 1000}, {2, 0, 1}} {
		hits := make([]atomic.Int32, c.n)
		For(c.threads, c.n, c.grain, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				hits[i].Add(1)
			}
		})
		for i := range hits {
			if h := hits[i].Load(); h != 1 {
				t.Fatalf("%+v: element %d run %d times", c, i, h)
			}
		}
	}
}

// TestTasksRunOnce checks Tasks, including nested calls from inside a task, which must not
// deadlock when every worker is busy.
func TestTasksRunOnce(t *testing.T) {
	var outer, inner atomic.Int32
	Tasks(4, 16, func(int) {
		outer.Add(1)
		Tasks(4, 8, func(int) { inner.Add(1) })
	})
	if outer.Load() != 16 || inner.Load() != 16*8 {
		t.Fatalf("outer %d (want 16), inner %d (want 128)", outer.Load(), inner.Load())
	}
}

// TestPanicReraised checks that a panic in a chunk reaches the caller as one panic, after
// every chunk has finished.
func TestPanicReraised(t *testing.T) {
	var done atomic.Int32
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(r.(string), "boom") {
			t.Fatalf("recovered %v, want the chunk's panic", r)
		}
		if done.Load() != 7 {
			t.Fatalf("%d of 7 other tasks finished before the panic was re-raised", done.Load())
		}
	}()
	Tasks(2, 8, func(i int) {
		if i == 3 {
			panic("boom")
		}
		done.Add(1)
	})
}
