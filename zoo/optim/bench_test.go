package optim

import "testing"

// BenchmarkStep times one clip-and-AdamW step over 4M parameters (about the size of a
// 4-layer d_model 256 encoder), serially and on four goroutines.
func BenchmarkStep(b *testing.B) {
	const n = 1 << 22
	l, err := NewLayout([]string{"w"}, [][]int{{n}})
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		par  ParallelFor
	}{{"serial", nil}, {"4goroutines", threadsFor(4)}} {
		b.Run(bc.name, func(b *testing.B) {
			params, grads := make([]float32, n), make([]float32, n)
			for i := range grads {
				grads[i] = float32(i%7) - 3
			}
			opt, err := New(DefaultHyper(), l, bc.par)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(4 * 4 * n) // params, grads and two moments
			for b.Loop() {
				norm := ClipGradNorm(grads, 1e9, bc.par)
				if err := opt.Step(params, grads, 1e-4); err != nil || norm == 0 {
					b.Fatal(err)
				}
			}
		})
	}
}
