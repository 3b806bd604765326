package cpu

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// BenchmarkAttentionTraining runs the training attention's forward (with log-sum-exps) and
// FlashAttention-2 backward kernels at the base encoder's shape, batch 8 × 8 heads of 64,
// Q, K, V and dO read through head splits and the gradients written through head merges, a
// key-padding bias, 2 threads, and reports GFLOP/s over the products each does (forward 2,
// backward 5 of 2·n²·64 FLOPs per head, the backward recomputing the scores).
//
//	go test ./backends/cpu -run '^$' -bench AttentionTraining
func BenchmarkAttentionTraining(b *testing.B) {
	const batch, heads, dk = 8, 8, 64
	split := []int{0, 2, 1, 3}
	r := rand.New(rand.NewSource(1))
	for _, n := range []int{128, 512} {
		q, k, v, do := randF32(r, batch, n, heads, dk), randF32(r, batch, n, heads, dk), randF32(r, batch, n, heads, dk), randF32(r, batch, n, heads, dk)
		bias, _ := tensor.New(tensor.Float32, batch, 1, 1, n)
		ops := []scoreOp{{kind: '*', c: 0.125}, {kind: '+', input: 3}}
		e := &exec{threads: 2}
		in := []*tensor.Tensor{q, k, v, bias}
		hb := []int{batch, heads}
		flops := 2 * float64(batch*heads*n*n*dk)
		b.Run(fmt.Sprintf("forward/n=%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, _, ok, err := attentionRun(e, in, ops, [3][]int{split, ktPerm(split, 4), split}, [3]*window{}, split, -1, true); !ok || err != nil {
					b.Fatal(ok, err)
				}
			}
			b.ReportMetric(2*flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
		o, lse, _, _ := attentionRun(e, in, ops, [3][]int{split, ktPerm(split, 4), split}, [3]*window{}, split, -1, true)
		a := &attnGradIn{lse: lse.F32, ops: []scoreOp{{kind: '*', c: 0.125}, {kind: '+', input: 0}}, g: 0.125}
		a.q, _ = viewOf(q, split, hb)
		a.k, _ = viewOf(k, split, hb)
		a.v, _ = viewOf(v, split, hb)
		a.o, _ = viewOf(o, split, hb)
		a.do, _ = viewOf(do, split, hb)
		a.operands, _ = planScoreOperands(a.ops, []*tensor.Tensor{bias}, hb, n, n)
		var views [3]matView
		for j := range views {
			_, views[j], _, _ = allocView(e, hb, n, dk, split)
		}
		b.Run(fmt.Sprintf("backward/n=%d", n), func(b *testing.B) {
			for b.Loop() {
				attentionBackward(e, a, views[0], views[1], views[2])
			}
			b.ReportMetric(5*flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
