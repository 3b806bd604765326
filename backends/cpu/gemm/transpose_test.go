package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestTranspose holds Transpose, at every kernel level, to its definition (dst[j·ldd+i] =
// src[i·lds+j]): shapes below, at and past the vector code's 16×16 blocks and the Go
// twin's 8×8 ones in both directions, strides equal to the width, odd and power-of-two
// plus padding; every value of dst outside the transpose (its padding and a guard past
// the end) must survive. The values are random bit patterns, NaNs included, which must
// move unchanged.
func TestTranspose(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	sizes := []int{1, 7, 8, 15, 16, 17, 33, 48, 100}
	for _, lv := range levelNames() {
		withLevel(t, lv, func() {
			for _, rows := range sizes {
				for _, cols := range sizes {
					for _, pad := range []int{0, 3, 528 - 512} {
						lds, ldd := cols+pad, rows+2*pad+1
						src := make([]float32, rows*lds)
						for i := range src {
							src[i] = math.Float32frombits(rng.Uint32())
						}
						got := make([]float32, cols*ldd+5)
						for i := range got {
							got[i] = guard
						}
						want := append([]float32(nil), got...)
						for i := 0; i < rows; i++ {
							for j := 0; j < cols; j++ {
								want[j*ldd+i] = src[i*lds+j]
							}
						}
						Transpose(got, src, rows, cols, lds, ldd)
						bitwise(t, fmt.Sprintf("%s %d×%d lds=%d ldd=%d", lv, rows, cols, lds, ldd), got, want)
					}
				}
			}
		})
	}
}

// BenchmarkTranspose transposes the value rows of the performer's base attention at batch
// 8 (8 × 512 keys of 8 heads × 64 channels, in blocks of 256 keys as linearAttention
// does) into rows padded to 528, by Transpose and by transposeGo, in ns per value.
//
//	go test ./backends/cpu/gemm -run '^$' -bench Transpose
func BenchmarkTranspose(b *testing.B) {
	const batch, n, w, ldt = 8, 512, 512, 528
	src := make([]float32, batch*n*w)
	for i := range src {
		src[i] = float32(i)
	}
	dst := make([]float32, batch*w*ldt)
	for _, c := range []struct {
		name string
		f    func(dst, src []float32, rows, cols, lds, ldd int)
	}{{"Transpose", Transpose}, {"transposeGo", transposeGo}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				for x := 0; x < batch; x++ {
					for c0 := 0; c0 < n; c0 += 256 {
						c.f(dst[x*w*ldt+c0:], src[x*n*w+c0*w:], 256, w, w, ldt)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(src)), "ns/value")
		})
	}
}
