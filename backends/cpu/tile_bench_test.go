package cpu

import (
	"fmt"
	"testing"

	"github.com/zoo-dev/zoo/backends/cpu/gemm"
	"github.com/zoo-dev/zoo/backends/cpu/internal/workpool"
)

// BenchmarkLinearTiles compares linearCuts' guided tiles with one fixed half per thread for
// the fused linear GEMM (2 threads, pre-packed weights, the encoder's shapes). The guided
// cut only wins when the two cores run at different speeds, which on a shared VM comes and
// goes: compare with -count and look at the spread, not one run.
//
//	go test ./backends/cpu -run '^$' -bench LinearTiles -count 5
func BenchmarkLinearTiles(b *testing.B) {
	for _, sh := range [][3]int{{128, 512, 512}, {128, 2048, 512}, {128, 512, 2048}, {512, 512, 512}, {1024, 512, 512}} {
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
		pw := gemm.PackB(false, k, n, w, n)
		byCols, guided := linearCuts(m, n, k, 2)
		l := m
		if byCols {
			l = n
		}
		halves := []int{0, l / 2, l}
		for _, v := range []struct {
			name string
			cuts []int
		}{{"guided", guided}, {"halves", halves}} {
			b.Run(fmt.Sprintf("%dx%dx%d/%s", m, n, k, v.name), func(b *testing.B) {
				for b.Loop() {
					workpool.Tasks(2, len(v.cuts)-1, func(t int) {
						lo, hi := v.cuts[t], v.cuts[t+1]
						if byCols {
							gemm.SgemmPackedCols(m, lo, hi, 1, x, k, pw, 0, c, n)
						} else {
							gemm.SgemmPacked(hi-lo, n, k, 1, x[lo*k:], k, pw, 0, c[lo*n:], n)
						}
					})
				}
				b.ReportMetric(2*float64(m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
