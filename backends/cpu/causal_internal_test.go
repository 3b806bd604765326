package cpu

import (
	"fmt"
	"math"
	"math/rand"
	"testing"
)

// causalRef is the pure-Go twin of the in-kernel causal mask: the graph's element (i, j)
// of the scores after the mask, s + c ('c') or c ('C') where key j > i + diag, s elsewhere.
func causalRef(s float32, kind byte, c float32, diag, i, j int) float32 {
	if j <= i+diag {
		return s
	}
	if kind == 'C' {
		return c
	}
	return s + c
}

// TestCausalKernel checks applyCausal, block row by block row (rows of keys k0… as the kernel
// passes them, whole and cut at the causal width), against causalRef bit for bit on lengths
// 1, odd and not a multiple of the key block, for both kinds and diagonals −1, 0 and 2.
func TestCausalKernel(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	for _, n := range []int{1, 7, 513, 1031} {
		for _, kind := range []byte{'c', 'C'} {
			for _, diag := range []int{-1, 0, 2} {
				t.Run(fmt.Sprintf("n%d_%c_diag%d", n, kind, diag), func(t *testing.T) {
					cm := &causalMask{diag: diag}
					c := float32(-1e9)
					row := make([]float32, attnKBlock)
					src := make([]float32, attnKBlock)
					for i := 0; i < n; i++ {
						for k0 := 0; k0 < n; k0 += attnKBlock {
							cols := min(attnKBlock, n-k0)
							for _, w := range []int{cols, min(cols, max(1, i+1-k0))} {
								for j := range src[:w] {
									src[j] = float32(r.NormFloat64())
								}
								copy(row, src[:w])
								applyCausal(row[:w], kind, c, cm, i, k0)
								for j := 0; j < w; j++ {
									if want := causalRef(src[j], kind, c, diag, i, k0+j); row[j] != want {
										t.Fatalf("(%d, %d): %g, want %g", i, k0+j, row[j], want)
									}
								}
							}
						}
					}
				})
			}
		}
	}
}

// TestCausalSkip checks when the kernel may leave out the masked keys: only after a −∞ mask
// with a diagonal ≥ 0 that no later op can make finite again.
func TestCausalSkip(t *testing.T) {
	inf := float32(math.Inf(-1))
	cm0, cm2, neg := &causalMask{diag: 0}, &causalMask{diag: 2}, &causalMask{diag: -1}
	for _, c := range []struct {
		name string
		ops  []scoreOp
		diag int
		ok   bool
	}{
		{"none", []scoreOp{{kind: '*', c: 0.125}, {kind: '+'}}, 0, false},
		{"scale-then-mask", []scoreOp{{kind: '*', c: 0.125}, {kind: '+'}, {kind: 'c', c: inf, cm: cm0}}, 0, true},
		{"masked-fill", []scoreOp{{kind: 'C', c: inf, cm: cm2}, {kind: 'r'}, {kind: '/', c: 8}}, 2, true},
		{"two-masks-smallest-diagonal", []scoreOp{{kind: 'c', c: inf, cm: cm2}, {kind: 'c', c: inf, cm: cm0}}, 0, true},
		{"finite-mask", []scoreOp{{kind: 'c', c: -1e9, cm: cm0}}, 0, false},
		{"diagonal-masked", []scoreOp{{kind: 'c', c: inf, cm: neg}}, 0, false},
		{"finite-fill-after", []scoreOp{{kind: 'c', c: inf, cm: cm0}, {kind: 'C', c: -1e4, cm: cm0}}, 0, false},
		{"tensor-scaling-after", []scoreOp{{kind: 'c', c: inf, cm: cm0}, {kind: 'x'}}, 0, false},
		{"negative-scale-after", []scoreOp{{kind: 'c', c: inf, cm: cm0}, {kind: '*', c: -1}}, 0, false},
		{"where-after", []scoreOp{{kind: 'c', c: inf, cm: cm0}, {kind: 'W', c: 0}}, 0, false},
	} {
		if d, ok := causalSkip(c.ops); ok != c.ok || (ok && d != c.diag) {
			t.Errorf("%s: causalSkip = %d, %v, want %d, %v", c.name, d, ok, c.diag, c.ok)
		}
	}
}
