// Package workpool runs data-parallel loops on a process-wide set of persistent worker
// goroutines that spin briefly between tasks. The CPU backend's operators and the SGEMM
// kernels share it, so a forward pass never has two pools competing for the cores.
package workpool

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// MaxThreads bounds the worker count a caller may ask for.
const MaxThreads = 256

// pool is a process-wide set of persistent worker goroutines shared by every Program.
// Work is handed out as "help" requests: the caller of For always processes chunks
// itself and helpers only steal the chunks that are left, so For never waits on a
// worker that has not started, nested calls cannot deadlock, and a busy pool degrades to
// running on the caller's goroutine.
type pool struct {
	mu      sync.Mutex
	workers int
	tasks   chan func()
}

var sharedPool = &pool{tasks: make(chan func(), 4*MaxThreads)}

// spinFor is how long an idle side keeps polling before it blocks: a worker that has just
// finished a task, waiting for the next, and a caller whose own chunks are done, waiting
// for the helpers'. Blocking means a futex wake-up later, and on a small VM that costs
// 50-90 µs (the halted vCPU is woken by an inter-processor interrupt through the
// hypervisor; worse, the Go scheduler may queue the woken goroutine behind a running one
// on the waker's P). An encoder forward pass hands out a parallel step every few hundred
// microseconds, so a parking worker starts every step late and the caller, which never
// waits for a helper to start, ends up doing most of the work alone. Spinning through the
// gaps keeps every participant on its core for the whole pass, at the price of at most this
// much CPU time per worker after the last step (ONNX Runtime's thread pool does the same).
const spinFor = 2 * time.Millisecond

// yieldEvery is how often (in polls) a spinning goroutine checks the clock and yields its P,
// so that it never starves goroutines the scheduler queued behind it.
const yieldEvery = 256

// ensure starts workers until at least n are running.
func (p *pool) ensure(n int) {
	if n > MaxThreads {
		n = MaxThreads
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.workers < n {
		p.workers++
		go p.work()
	}
}

// work runs tasks forever: it blocks for one, then, after each, polls without blocking for
// up to spinFor before blocking again.
func (p *pool) work() {
	for task := range p.tasks {
		task()
		deadline := time.Now().Add(spinFor)
		for polls := 1; ; polls++ {
			select {
			case task = <-p.tasks:
				task()
				deadline = time.Now().Add(spinFor)
				continue
			default:
			}
			if polls%yieldEvery == 0 {
				if time.Now().After(deadline) {
					break
				}
				runtime.Gosched()
			}
		}
	}
}

// job is one For or Tasks invocation.
type job struct {
	next    atomic.Int64
	done    atomic.Int64 // chunks finished
	chunks  int64
	n       int
	fn      func(lo, hi int)
	wg      sync.WaitGroup // released by the last chunk; the caller blocks on it only after spinning
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
		j.runChunk(c)
	}
}

// runChunk runs chunk c, recording a panic instead of letting it escape the goroutine.
func (j *job) runChunk(c int64) {
	defer func() {
		if j.done.Add(1) == j.chunks {
			j.wg.Done()
		}
	}()
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
}

// run hands the job to up to helpers pool workers, processes chunks itself until none is
// left, and returns once every chunk has finished (spinning for spinFor first, for the same
// reason the workers do), re-raising a chunk's panic on the caller's goroutine.
func (j *job) run(helpers int, what string) {
	j.wg.Add(1)
	sharedPool.ensure(helpers)
	for h := 0; h < helpers; h++ {
		select {
		case sharedPool.tasks <- j.drain:
		default:
		}
	}
	j.drain()
	deadline := time.Now().Add(spinFor)
	for polls := 1; j.done.Load() < j.chunks; polls++ {
		if polls%yieldEvery == 0 {
			if time.Now().After(deadline) {
				j.wg.Wait()
				break
			}
			runtime.Gosched()
		}
	}
	if j.panicV != nil {
		panic(fmt.Sprintf("in parallel %s: %v", what, j.panicV))
	}
}

// For calls fn on disjoint ranges that cover [0, n), using up to threads goroutines
// (the caller's included). Ranges hold at least grain elements, so tiny work runs inline.
// A panic in fn is re-raised on the caller's goroutine once every chunk has finished.
func For(threads, n, grain int, fn func(lo, hi int)) {
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

// Tasks runs fn(i) for every i in [0, n) on up to threads goroutines, one task at a
// time per goroutine; the task partition never depends on the thread count.
func Tasks(threads, n int, fn func(i int)) {
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
	j.run(helpers-1, "task")
}

func runChunks(chunks, n int, fn func(lo, hi int)) {
	j := &job{chunks: int64(chunks), n: n, fn: fn}
	j.run(chunks-1, "chunk")
}
