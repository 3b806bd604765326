package optim

// ParallelFor calls fn on disjoint ranges covering [0, n), each at least grain long, possibly
// concurrently, and returns when all are done. The CPU backend's worker pool provides one
// (cpu.ParallelFor); nil means Serial.
type ParallelFor func(n, grain int, fn func(lo, hi int))

// Serial runs fn(0, n) on the caller's goroutine.
func Serial(n, _ int, fn func(lo, hi int)) {
	if n > 0 {
		fn(0, n)
	}
}

// grain is the smallest range worth a goroutine for the element-wise kernels: a few
// microseconds of work.
const grain = 1 << 13

// block is the fixed partition of reductions: partial sums are taken per block of this
// many elements and added in block order, so a norm is the same on one thread or sixteen.
const block = 1 << 12

func (p ParallelFor) run(n, g int, fn func(lo, hi int)) {
	if p == nil {
		Serial(n, g, fn)
		return
	}
	p(n, g, fn)
}
