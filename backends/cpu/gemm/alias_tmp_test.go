package gemm

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/zoo-dev/zoo/internal/pairtime"
)

func BenchmarkAliasTmp(b *testing.B) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for _, s := range [][3]int{{4096, 3072, 768}, {4096, 768, 768}, {4096, 768, 3072}} {
		m, n, k := s[0], s[1], s[2]
		rng := rand.New(rand.NewPCG(1, 1))
		a := make([]float32, m*k)
		for i := range a {
			a[i] = float32(rng.NormFloat64())
		}
		w := make([]float32, k*n)
		for i := range w {
			w[i] = float32(rng.NormFloat64() * 0.05)
		}
		pi := PackBInt8(false, k, n, w, n)
		c0 := make([]float32, m*n)
		b.Run(fmt.Sprintf("N%d_K%d", n, k), func(b *testing.B) {
			f0 := func() error { SgemmPackedCols(m, 0, n, 1, a, k, pi, 0, c0, n); return nil }
			r, _ := pairtime.Interleave(context.Background(), f0, f0, b.N, 2*time.Millisecond, nil)
			b.ReportMetric(pairtime.Median(append(r.A, r.B...)), "ms")
		})
	}
}
