package cpu

import "github.com/zoo-dev/zoo/backends/cpu/internal/workpool"

// ParallelFor returns a data-parallel loop on the worker pool that CPU programs use, with up
// to threads goroutines (0 or less: DefaultThreads), for host-side work beside a program —
// the training loop's optimizer step — so that it never starts a second pool. The returned
// function calls fn on disjoint ranges covering [0, n), each at least grain long.
func ParallelFor(threads int) func(n, grain int, fn func(lo, hi int)) {
	if threads <= 0 {
		threads = DefaultThreads()
	}
	threads = min(threads, workpool.MaxThreads)
	return func(n, grain int, fn func(lo, hi int)) { workpool.For(threads, n, grain, fn) }
}
