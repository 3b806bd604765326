package cpu

import (
	"fmt"
	"testing"

	"github.com/zoo-dev/zoo/backends/cpu/kernels"
)

// BenchmarkLinearTiles compares tile shapes for the fused linear GEMM (2 threads).
func BenchmarkLinearTiles(b *testing.B) {
	for _, sh := range [][3]int{{128, 512, 512}, {128, 2048, 512}, {128, 512, 2048}, {512, 512, 512}, {1024, 2048, 512}} {
		m, n, k := sh[0], sh[1], sh[2]
		x := make([]float32, m*k)
		w := make([]float32, k*n)
		c := make([]float32, m*n)
		for i := range x {
			x[i] = float32(i%7) - 3
		}
		for i := range w {
			w[i] = float32(i%5) - 2
		}
		rb0, cb0 := linearTiles(m, n, k, 2)
		for _, t := range [][2]int{{rb0, cb0}, {m, n / 2}, {m, n / 4}, {m, n / 8}, {48, n}, {min(m, 96), n}, {min(m, 240), min(n, 256)}, {min(m, 192), min(n, 512)}} {
			rb, cb := t[0], t[1]
			b.Run(fmt.Sprintf("%dx%dx%d/tile%dx%d", m, n, k, rb, cb), func(b *testing.B) {
				rt, ct := (m+rb-1)/rb, (n+cb-1)/cb
				for i := 0; i < b.N; i++ {
					parallelTasks(2, rt*ct, func(t int) {
						r0, c0 := (t/ct)*rb, (t%ct)*cb
						rows, cols := min(rb, m-r0), min(cb, n-c0)
						kernels.Sgemm(false, false, rows, cols, k, 1, x[r0*k:], k, w[c0:], n, 0, c[r0*n+c0:], n)
					})
				}
				b.ReportMetric(2*float64(m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
