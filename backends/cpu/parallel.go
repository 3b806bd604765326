package cpu

import "github.com/zoo-dev/zoo/backends/cpu/internal/workpool"

// maxThreads bounds the worker count a program may ask for.
const maxThreads = workpool.MaxThreads

// parallelFor calls fn on disjoint ranges that cover [0, n) on up to threads goroutines;
// see workpool.For.
func parallelFor(threads, n, grain int, fn func(lo, hi int)) { workpool.For(threads, n, grain, fn) }

// parallelTasks runs fn(i) for every i in [0, n) on up to threads goroutines; see
// workpool.Tasks.
func parallelTasks(threads, n int, fn func(i int)) { workpool.Tasks(threads, n, fn) }
