package kernels

import (
	"fmt"
	"math"
	"testing"
	"time"
)

// BenchmarkMicroKernel measures each assembly micro-kernel alone on L1-resident panels
// (kc = 256), i.e. the ceiling the packed driver can approach.
func BenchmarkMicroKernel(b *testing.B) {
	for _, kern := range asmKernels {
		if !kern.ok() {
			continue
		}
		b.Run(kern.name, func(b *testing.B) {
			const kc = 256
			a := make([]float32, kc*kern.mr)
			bb := make([]float32, kc*kern.nr)
			c := make([]float32, kern.mr*kern.nr)
			for b.Loop() {
				kern.fn(kc, &a[0], &bb[0], &c[0], kern.nr, 1, 1)
			}
			b.ReportMetric(2*float64(kc*kern.mr*kern.nr)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// BenchmarkDriverKernels runs the packed driver with each assembly micro-kernel, to choose
// the one a level uses (plain operands, beta = 0, best-call GFLOP/s is the robust figure).
func BenchmarkDriverKernels(b *testing.B) {
	for _, kern := range asmKernels {
		if !kern.ok() {
			continue
		}
		for _, s := range benchShapes {
			b.Run(fmt.Sprintf("%s/M%d_N%d_K%d", kern.name, s[0], s[1], s[2]), func(b *testing.B) {
				m, n, k := s[0], s[1], s[2]
				a, bm, c := make([]float32, m*k), make([]float32, k*n), make([]float32, m*n)
				best := time.Duration(math.MaxInt64)
				for b.Loop() {
					t0 := time.Now()
					sgemmPacked(kern, false, false, m, n, k, 1, a, k, bm, n, 0, c, n)
					best = min(best, time.Since(t0))
				}
				flop := 2 * float64(m) * float64(n) * float64(k)
				b.ReportMetric(flop*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				b.ReportMetric(flop/best.Seconds()/1e9, "best-GFLOP/s")
			})
		}
	}
}
