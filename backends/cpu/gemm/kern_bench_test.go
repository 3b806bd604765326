package gemm

import (
	"fmt"
	"testing"
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
				measure(b, 2*float64(m)*float64(n)*float64(k), true, func() {
					sgemmPacked(kern, false, false, m, n, k, 1, a, k, bm, n, 0, c, n)
				})
			})
		}
	}
}

// BenchmarkBlocking sweeps the cache-blocking parameters of the best level's kernel on the
// N = 2048 shapes, where the packed B block outgrows L2 first.
func BenchmarkBlocking(b *testing.B) {
	base := asmKernels[0]
	if !base.ok() {
		b.Skip("no AVX-512")
	}
	for _, kc := range []int{192, 256, 384, 512} {
		for _, nc := range []int{512, 1024, 2048} {
			for _, s := range [][3]int{{128, 2048, 512}, {512, 2048, 512}} {
				kern := *base
				kern.kc, kern.nc = kc, nc
				b.Run(fmt.Sprintf("kc%d_nc%d/M%d_N%d_K%d", kc, nc, s[0], s[1], s[2]), func(b *testing.B) {
					m, n, k := s[0], s[1], s[2]
					a, bm, c := make([]float32, m*k), make([]float32, k*n), make([]float32, m*n)
					measure(b, 2*float64(m)*float64(n)*float64(k), true, func() {
						sgemmPacked(&kern, false, false, m, n, k, 1, a, k, bm, n, 0, c, n)
					})
				})
			}
		}
	}
}

// BenchmarkSgemmPacked measures SgemmPacked with pre-packed weights on the encoder's
// per-thread shapes (two threads split n): m tokens × n/2 columns, k = 512 or 2048.
func BenchmarkSgemmPacked(b *testing.B) {
	for _, s := range [][3]int{{128, 256, 512}, {128, 1024, 512}, {128, 256, 2048}, {512, 256, 512}, {512, 1024, 512}, {124, 256, 512}} {
		b.Run(fmt.Sprintf("M%d_N%d_K%d", s[0], s[1], s[2]), func(b *testing.B) {
			m, n, k := s[0], s[1], s[2]
			a, bm, c := make([]float32, m*k), make([]float32, k*n), make([]float32, m*n)
			for i := range a {
				a[i] = float32(i%7) * 0.25
			}
			pb := PackB(false, k, n, bm, n)
			measure(b, 2*float64(m)*float64(n)*float64(k), true, func() {
				SgemmPacked(m, n, k, 1, a, k, pb, 0, c, n)
			})
		})
	}
}
