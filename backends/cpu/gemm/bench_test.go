package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// benchShapes are the Transformer encoder shapes (tokens × hidden × {hidden, 4·hidden}).
var benchShapes = [][3]int{{128, 512, 512}, {128, 2048, 512}, {512, 512, 512}, {512, 2048, 512}}

// BenchmarkSgemm reports single-goroutine GFLOP/s (2·m·n·k per op) for every level this
// machine has, plain row-major operands, beta = 0.
//
//	go test -run '^$' -bench Sgemm ./backends/cpu/gemm/
func BenchmarkSgemm(b *testing.B) {
	for _, name := range levelNames() {
		for _, s := range benchShapes {
			b.Run(fmt.Sprintf("%s/M%d_N%d_K%d", name, s[0], s[1], s[2]), func(b *testing.B) {
				benchGemm(b, name, s[0], s[1], s[2], false, 1)
			})
		}
	}
}

// BenchmarkSgemmTransB is the same with B stored n×k (the Linear-layer and Q·Kᵀ layout).
func BenchmarkSgemmTransB(b *testing.B) {
	for _, s := range benchShapes {
		b.Run(fmt.Sprintf("%s/M%d_N%d_K%d", levelNames()[0], s[0], s[1], s[2]), func(b *testing.B) {
			benchGemm(b, levelNames()[0], s[0], s[1], s[2], true, 1)
		})
	}
}

// BenchmarkSgemmParallel2 measures SgemmParallel with two goroutines on the best level.
func BenchmarkSgemmParallel2(b *testing.B) {
	for _, s := range benchShapes {
		b.Run(fmt.Sprintf("%s/M%d_N%d_K%d", levelNames()[0], s[0], s[1], s[2]), func(b *testing.B) {
			benchGemm(b, levelNames()[0], s[0], s[1], s[2], false, 2)
		})
	}
}

func benchGemm(b *testing.B, level string, m, n, k int, transB bool, threads int) {
	withLevel(b, level, func() {
		rng := rand.New(rand.NewPCG(1, 1))
		rnd := func(n int) []float32 {
			x := make([]float32, n)
			for i := range x {
				x[i] = rng.Float32()*2 - 1
			}
			return x
		}
		a, bm, c := rnd(m*k), rnd(k*n), make([]float32, m*n)
		ldb := n
		if transB {
			ldb = k
		}
		flop := 2 * float64(m) * float64(n) * float64(k)
		measure(b, flop, threads == 1, func() {
			SgemmParallel(threads, false, transB, m, n, k, 1, a, k, bm, ldb, 0, c, n)
		})
	})
}

// measure runs f in the benchmark loop and reports three rates for flop operations per call:
// the mean over wall time (GFLOP/s); the best single call (best-GFLOP/s), which survives
// other processes taking the cores between calls; and, when serial (f runs on this goroutine
// only), flop over the thread's CPU time (cpu-GFLOP/s), which survives them taking the core
// during calls too (the goroutine is locked to its thread so the clock is its own).
func measure(b *testing.B, flop float64, serial bool, f func()) {
	if serial {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	best := time.Duration(math.MaxInt64)
	cpu0 := threadCPU()
	for b.Loop() {
		t0 := time.Now()
		f()
		best = min(best, time.Since(t0))
	}
	cpu := threadCPU() - cpu0
	b.ReportMetric(flop*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	b.ReportMetric(flop/best.Seconds()/1e9, "best-GFLOP/s")
	if serial && cpu > 0 {
		b.ReportMetric(flop*float64(b.N)/cpu.Seconds()/1e9, "cpu-GFLOP/s")
	}
}

// threadCPU is the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID), or 0 if unavailable.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}
