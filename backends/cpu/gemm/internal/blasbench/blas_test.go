//go:build blasbench && cgo

package blasbench

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zoo-dev/zoo/backends/cpu/gemm"
	"github.com/zoo-dev/zoo/backends/cpu/internal/simd"
	"github.com/zoo-dev/zoo/internal/pairtime"
)

var shapes = [][3]int{{128, 512, 512}, {128, 2048, 512}, {512, 512, 512}, {512, 2048, 512}}

func rnd(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = rng.Float32()*2 - 1
	}
	return x
}

// TestAgreesWithOpenBLAS is a sanity check that both compute the same product.
func TestAgreesWithOpenBLAS(t *testing.T) {
	t.Logf("OpenBLAS core %s, OPENBLAS_CORETYPE=%q, zoo level %s", CoreName(), os.Getenv("OPENBLAS_CORETYPE"), simd.Current().String())
	rng := rand.New(rand.NewPCG(1, 2))
	m, n, k := 70, 90, 300
	for tr := 0; tr < 4; tr++ {
		ta, tb := tr&1 != 0, tr&2 != 0
		lda, ldb := k, n
		if ta {
			lda = m
		}
		if tb {
			ldb = k
		}
		a, b, c := rnd(rng, m*k), rnd(rng, k*n), rnd(rng, m*n)
		want := append([]float32(nil), c...)
		Sgemm(ta, tb, m, n, k, 0.5, a, lda, b, ldb, 0.25, want, n)
		gemm.Sgemm(ta, tb, m, n, k, 0.5, a, lda, b, ldb, 0.25, c, n)
		for i := range c {
			if d := math.Abs(float64(c[i] - want[i])); d > 1e-4 {
				t.Fatalf("tA=%v tB=%v: c[%d] = %g, OpenBLAS %g", ta, tb, i, c[i], want[i])
			}
		}
	}
}

// BenchmarkGemm runs OpenBLAS and every zoo level on the same shapes and threads, reporting
// GFLOP/s = 2·m·n·k per op.
func BenchmarkGemm(b *testing.B) {
	b.Logf("OpenBLAS core %s", CoreName())
	for _, threads := range []int{1, 2} {
		for _, s := range shapes {
			m, n, k := s[0], s[1], s[2]
			rng := rand.New(rand.NewPCG(1, 1))
			a, bm, c := rnd(rng, m*k), rnd(rng, k*n), make([]float32, m*n)
			flop := 2 * float64(m) * float64(n) * float64(k)
			// loop runs f under the benchmark and reports the mean rate, the rate of the best single
			// call, and (single-threaded) the rate over this thread's CPU time; the last two are
			// robust to other processes sharing the cores.
			loop := func(b *testing.B, f func()) {
				serial := threads == 1
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
			name := fmt.Sprintf("T%d/M%d_N%d_K%d", threads, m, n, k)
			b.Run("openblas/"+name, func(b *testing.B) {
				SetThreads(threads)
				loop(b, func() { Sgemm(false, false, m, n, k, 1, a, k, bm, n, 0, c, n) })
			})
			for _, lv := range levelNames() {
				if lv == "generic" {
					continue
				}
				b.Run(lv+"/"+name, func(b *testing.B) {
					prev := simd.Current().String()
					if err := simd.Set(lv); err != nil {
						b.Fatal(err)
					}
					defer simd.Set(prev)
					loop(b, func() { gemm.SgemmParallel(threads, false, false, m, n, k, 1, a, k, bm, n, 0, c, n) })
				})
			}
		}
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

// BenchmarkGemmPaired compares each zoo level with OpenBLAS on the same shapes by
// interleaving them: every pair times a batch of calls of each, alternating which goes
// first, and the reported ratio is the median over pairs of OpenBLAS time / zoo time (above
// 1: zoo is faster). On a shared VM whose speed drifts by tens of per cent between the
// phases of BenchmarkGemm, only a ratio measured this way compares like with like.
// b.N is the number of pairs; -benchtime 30x is a good choice.
func BenchmarkGemmPaired(b *testing.B) {
	b.Logf("OpenBLAS core %s", CoreName())
	for _, threads := range []int{1, 2} {
		for _, s := range shapes {
			m, n, k := s[0], s[1], s[2]
			rng := rand.New(rand.NewPCG(1, 1))
			a, bm := rnd(rng, m*k), rnd(rng, k*n)
			c1, c2 := make([]float32, m*n), make([]float32, m*n)
			flop := 2 * float64(m) * float64(n) * float64(k)
			// Each timed run lasts about 5 ms at 100 GFLOP/s, long against timer and
			// scheduling noise, short against the VM's drift.
			calls := max(1, int(5e8/flop))
			for _, lv := range levelNames() {
				if lv == "generic" {
					continue
				}
				b.Run(fmt.Sprintf("%s/T%d/M%d_N%d_K%d", lv, threads, m, n, k), func(b *testing.B) {
					prev := simd.Current().String()
					if err := simd.Set(lv); err != nil {
						b.Fatal(err)
					}
					defer simd.Set(prev)
					SetThreads(threads)
					if threads == 1 {
						runtime.LockOSThread()
						defer runtime.UnlockOSThread()
					}
					zoo := func() error {
						for range calls {
							gemm.SgemmParallel(threads, false, false, m, n, k, 1, a, k, bm, n, 0, c1, n)
						}
						return nil
					}
					blas := func() error {
						for range calls {
							Sgemm(false, false, m, n, k, 1, a, k, bm, n, 0, c2, n)
						}
						return nil
					}
					_, _ = zoo(), blas() // warm caches, pools and OpenBLAS's threads
					b.ResetTimer()
					r, err := pairtime.Interleave(context.Background(), zoo, blas, b.N, 3*time.Millisecond, nil)
					if err != nil {
						b.Fatal(err)
					}
					gflops := func(ms float64) float64 { return flop * float64(calls) / ms / 1e6 }
					b.ReportMetric(gflops(pairtime.Median(r.A)), "zoo-GFLOP/s")
					b.ReportMetric(gflops(pairtime.Median(r.B)), "blas-GFLOP/s")
					b.ReportMetric(r.Ratio, "blas/zoo")
					wins := 0
					for i := range r.A {
						if r.A[i] < r.B[i] {
							wins++
						}
					}
					b.ReportMetric(float64(wins)/float64(len(r.A)), "zoo-win-frac")
				})
			}
		}
	}
}
