package cpu

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// relBiasRef is the pure-Go twin of the in-kernel relative bias: the graph's computation of
// element (b, i, j), slope[b's head] · float32(|sign·(j − i)|) (or without the Abs), done
// element by element as Sub, Abs, Cast and Mul do it.
func relBiasRef(slopes []float32, heads, b, i, j int, abs bool, sign int) float32 {
	d := int64(sign) * (int64(j) - int64(i))
	if abs && d < 0 {
		d = -d
	}
	return float32(d) * slopes[b%heads]
}

// TestRelBiasKernel checks the tabulated bias the fused kernel adds, block row by block row
// (applyScoreOps on rows of keys k0…), against relBiasRef bit for bit, on sizes 1, odd and
// not a multiple of the key block, with and without Abs, in both signs, for batch × heads
// matrices; and that a length other than the matrix's is refused.
func TestRelBiasKernel(t *testing.T) {
	r := rand.New(rand.NewSource(9))
	for _, c := range []struct{ batch, heads, n int }{{1, 1, 1}, {2, 3, 7}, {1, 2, 513}, {1, 1, 1031}} {
		for _, abs := range []bool{true, false} {
			for _, sign := range []int{1, -1} {
				t.Run(fmt.Sprintf("b%d_h%d_n%d_abs%v_sign%d", c.batch, c.heads, c.n, abs, sign), func(t *testing.T) {
					sl := make([]float32, c.heads)
					for i := range sl {
						sl[i] = -float32(r.Float64())
					}
					slopes, _ := tensor.FromFloat32(sl, c.heads, 1, 1)
					rb := &relBias{slopes: slopes, abs: abs, sign: sign}
					n, _ := tensor.FromInt64([]int64{int64(c.n)})
					batch := []int{c.batch, c.heads}
					bo, ok := planRelBias(rb, n, batch, c.n, c.n)
					if !ok {
						t.Fatal("planRelBias refused the graph's own length")
					}
					ops := []scoreOp{{kind: 'r', input: 0, rb: rb}}
					row := make([]float32, attnKBlock)
					for b := 0; b < c.batch*c.heads; b++ {
						for i := 0; i < c.n; i++ {
							for k0 := 0; k0 < c.n; k0 += attnKBlock {
								cols := min(attnKBlock, c.n-k0)
								clear(row)
								applyScoreOps(row[:cols], ops, []bcastOperand{bo}, b, i, k0)
								for j := 0; j < cols; j++ {
									if want := relBiasRef(sl, c.heads, b, i, k0+j, abs, sign); row[j] != want {
										t.Fatalf("matrix %d (%d, %d): %g, want %g", b, i, k0+j, row[j], want)
									}
								}
							}
						}
					}
					other, _ := tensor.FromInt64([]int64{int64(c.n + 1)})
					if _, ok := planRelBias(rb, other, batch, c.n, c.n); ok {
						t.Fatal("planRelBias took a bias built for another length")
					}
				})
			}
		}
	}
}

// TestBucketBiasKernel checks T5's bucketed form the same way: the tabulated bias of each
// head equals emb[lut[clamp(sign·(j − i), ±D) + D], h], element by element, on sizes 1, odd,
// below and beyond D and the key block.
func TestBucketBiasKernel(t *testing.T) {
	r := rand.New(rand.NewSource(11))
	const heads, buckets, D = 3, 6, 9
	emb := randF32(r, buckets, heads)
	lut := make([]int64, 2*D+1)
	for i := range lut {
		lut[i] = r.Int63n(buckets)
	}
	idx, _ := tensor.FromFloat32([]float32{0, 1, 2}, 1, heads, 1, 1)
	for _, n := range []int{1, 5, 20, 515} {
		for _, sign := range []int{1, -1} {
			rb := &relBias{slopes: idx, sign: sign, emb: emb, lut: lut, maxDist: D}
			nt, _ := tensor.FromInt64([]int64{int64(n)})
			bo, ok := planRelBias(rb, nt, []int{2, heads}, n, n)
			if !ok {
				t.Fatalf("n %d: refused", n)
			}
			ops := []scoreOp{{kind: 'r', input: 0, rb: rb}}
			row := make([]float32, attnKBlock)
			for b := 0; b < 2*heads; b++ {
				for i := 0; i < n; i++ {
					for k0 := 0; k0 < n; k0 += attnKBlock {
						cols := min(attnKBlock, n-k0)
						clear(row)
						applyScoreOps(row[:cols], ops, []bcastOperand{bo}, b, i, k0)
						for j := 0; j < cols; j++ {
							rel := min(max(sign*(k0+j-i), -D), D)
							if want := emb.F32[int(lut[rel+D])*heads+b%heads]; row[j] != want {
								t.Fatalf("n %d sign %d matrix %d (%d, %d): %g, want %g", n, sign, b, i, k0+j, row[j], want)
							}
						}
					}
				}
			}
		}
	}
}

func randF32(r *rand.Rand, shape ...int) *tensor.Tensor {
	x, _ := tensor.New(tensor.Float32, shape...)
	for i := range x.F32 {
		x.F32[i] = float32(r.NormFloat64())
	}
	return x
}
