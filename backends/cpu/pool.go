package cpu

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// maxThreads bounds the worker count a program may ask for.
const maxThreads = 256

// pool is a process-wide set of persistent worker goroutines shared by every Program.
// Work is handed out as "help" requests: the caller of parallelFor always processes chunks
// itself and helpers only steal the chunks that are left, so parallelFor never waits on a
// worker that has not started, nested calls cannot deadlock, and a busy pool degrades to
// running on the caller's goroutine.
type pool struct {
	mu      sync.Mutex
	workers int
	tasks   chan func()
}

var sharedPool = &pool{tasks: make(chan func(), 4*maxThreads)}

// ensure starts workers until at least n are running.
func (p *pool) ensure(n int) {
	if n > maxThreads {
		n = maxThreads
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.workers < n {
		p.workers++
		go func() {
			for task := range p.tasks {
				task()
			}
		}()
	}
}

// job is one parallelFor invocation.
type job struct {
	next    atomic.Int64
	chunks  int64
	n       int
	fn      func(lo, hi int)
	wg      sync.WaitGroup
	panicMu sync.Mutex
	panicV  any
}

// bounds returns the half-open element range of chunk c; chunks differ in size by at most one.
func (j *job) bounds(c int64) (int, int) {
	n, k := int64(j.n), j.chunks
	return int(c * n / k), int((c + 1) * n / k)
}

// drain processes chunks until none is left.
func (j *job) drain() {
	for {
		c := j.next.Add(1) - 1
		if c >= j.chunks {
			return
		}
		func() {
			defer j.wg.Done()
			defer func() {
				if r := recover(); r != nil {
					j.panicMu.Lock()
					if j.panicV == nil {
						j.panicV = r
					}
					j.panicMu.Unlock()
				}
			}()
			lo, hi := j.bounds(c)
			j.fn(lo, hi)
		}()
	}
}

// parallelFor calls fn on disjoint ranges that cover [0, n), using up to threads goroutines
// (the caller's included). Ranges hold at least grain elements, so tiny work runs inline.
// A panic in fn is re-raised on the caller's goroutine once every chunk has finished.
func parallelFor(threads, n, grain int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	if grain < 1 {
		grain = 1
	}
	chunks := n / grain
	if chunks > threads {
		chunks = threads
	}
	if chunks <= 1 {
		fn(0, n)
		return
	}
	runChunks(chunks, n, fn)
}

// parallelTasks runs fn(i) for every i in [0, n) on up to threads goroutines, one task at a
// time per goroutine; the task partition never depends on the thread count.
func parallelTasks(threads, n int, fn func(i int)) {
	if n <= 0 {
		return
	}
	if threads <= 1 || n == 1 {
		for i := 0; i < n; i++ {
			fn(i)
		}
		return
	}
	helpers := threads
	if helpers > n {
		helpers = n
	}
	j := &job{chunks: int64(n), n: n, fn: func(lo, hi int) {
		for i := lo; i < hi; i++ {
			fn(i)
		}
	}}
	j.wg.Add(n)
	sharedPool.ensure(helpers - 1)
	for h := 0; h < helpers-1; h++ {
		select {
		case sharedPool.tasks <- j.drain:
		default:
		}
	}
	j.drain()
	j.wg.Wait()
	if j.panicV != nil {
		panic(fmt.Sprintf("in parallel task: %v", j.panicV))
	}
}

func runChunks(chunks, n int, fn func(lo, hi int)) {
	j := &job{chunks: int64(chunks), n: n, fn: fn}
	j.wg.Add(chunks)
	sharedPool.ensure(chunks - 1)
	for h := 0; h < chunks-1; h++ {
		select {
		case sharedPool.tasks <- j.drain:
		default:
		}
	}
	j.drain()
	j.wg.Wait()
	if j.panicV != nil {
		panic(fmt.Sprintf("in parallel chunk: %v", j.panicV))
	}
}
