package cpu

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// closeTo reports the largest difference between got and want relative to want's largest
// magnitude or 1, whichever is larger (a gradient that is 0 in exact arithmetic, as dQ of a
// single key, is then compared absolutely), and whether NaNs sit in the same places.
func closeTo(got, want []float32) (float64, bool) {
	scale, d := 1.0, 0.0
	for i := range want {
		x, y := float64(got[i]), float64(want[i])
		if math.IsNaN(x) || math.IsNaN(y) {
			if math.IsNaN(x) != math.IsNaN(y) {
				return math.Inf(1), false
			}
			continue
		}
		scale = math.Max(scale, math.Abs(y))
		d = math.Max(d, math.Abs(x-y))
	}
	return d / scale, true
}

// The fused training attention's kernels against their pure-Go twins: the forward with its
// log-sum-exps (attentionRun) and the FlashAttention-2 backward (attentionBackward), on
// sequence lengths of one, odd ones and ones that do not fill the 64-query and 512-key
// tiles, with Q, K, V and dO read through head-split transposes and the gradients written
// through head merges, a scale, and no mask, a key-padding mask (keys at −∞, one matrix
// with a single live key) or a causal mask.
func TestAttentionGradKernels(t *testing.T) {
	inf := float32(math.Inf(-1))
	split := []int{0, 2, 1, 3} // (B, n, h, d) stored, (B, h, n, d) logical
	for _, c := range []struct {
		b, h, nq, nk, dk, dv int
		mask                 string
		perm                 bool
	}{
		{1, 1, 1, 1, 4, 4, "", false},
		{2, 3, 7, 7, 5, 3, "pad", true},
		{1, 2, 65, 65, 8, 8, "causal", true},
		{2, 1, 130, 515, 16, 8, "pad", false},
		{1, 2, 3, 600, 4, 4, "causal", false},
		{2, 2, 64, 512, 8, 8, "", true},
	} {
		t.Run(fmt.Sprintf("%dx%dx%dx%d_%s_perm%v", c.b, c.h, c.nq, c.nk, c.mask, c.perm), func(t *testing.T) {
			r := rand.New(rand.NewSource(int64(c.nq*1000 + c.nk)))
			batch := []int{c.b, c.h}
			mk := func(n, d int) (*tensor.Tensor, []int) {
				if c.perm {
					return randF32(r, c.b, n, c.h, d), split
				}
				return randF32(r, c.b, c.h, n, d), nil
			}
			q, qp := mk(c.nq, c.dk)
			k, kp := mk(c.nk, c.dk)
			v, vp := mk(c.nk, c.dv)
			do, dop := mk(c.nq, c.dv)
			ops := []scoreOp{{kind: '*', c: 0.35}}
			in := []*tensor.Tensor{q, k, v}
			var bias *tensor.Tensor
			switch c.mask {
			case "pad": // (B, 1, 1, nk): the last matrix keeps only key 0
				bias, _ = tensor.New(tensor.Float32, c.b, 1, 1, c.nk)
				for j := 0; j < c.nk; j++ {
					if j > c.nk/2 || (j > 0 && c.b > 1) {
						bias.F32[(c.b-1)*c.nk+j] = inf
					}
				}
			case "causal": // (1, 1, nq, nk): key j after query i is masked
				bias, _ = tensor.New(tensor.Float32, 1, 1, c.nq, c.nk)
				for i := 0; i < c.nq; i++ {
					for j := i + 1; j < c.nk; j++ {
						bias.F32[i*c.nk+j] = inf
					}
				}
			}
			if bias != nil {
				ops = append(ops, scoreOp{kind: '+', input: 0})
				in = append(in, bias)
			}
			e := &exec{threads: 2}
			// The kernel reads operands after Q, Kᵀ and V.
			kops := append([]scoreOp(nil), ops...)
			for j := range kops {
				if isOperandKind(kops[j].kind) {
					kops[j].input += 3
				}
			}
			var mergeO []int
			if c.perm {
				mergeO = split
			}
			o, lse, ok, err := attentionRun(e, in, kops, [3][]int{qp, ktPerm(kp, 4), vp}, [3]*window{}, mergeO, -1, true)
			if err != nil || !ok {
				t.Fatalf("attentionRun: ok %v, err %v", ok, err)
			}
			qv, _ := viewOf(q, qp, batch)
			kv, _ := viewOf(k, kp, batch)
			vv, _ := viewOf(v, vp, batch)
			ov, _ := viewOf(o, inverse(mergeO), batch)
			dov, _ := viewOf(do, dop, batch)
			operands, ok := planScoreOperands(ops, in[3:], batch, c.nq, c.nk)
			if !ok {
				t.Fatal("operands do not plan")
			}
			wantO, wantOV, _, _ := allocView(e, batch, c.nq, c.dv, mergeO)
			wantLSE := make([]float32, c.b*c.h*c.nq)
			attentionForwardRef(qv, kv, vv, ops, operands, wantOV, wantLSE)
			if d, ok := closeTo(o.F32, wantO.F32); !ok || d > 1e-5 {
				t.Errorf("O: relative difference %g from the twin (NaNs agree: %v)", d, ok)
			}
			if d, ok := closeTo(lse.F32, wantLSE); !ok || d > 1e-5 {
				t.Errorf("lse: relative difference %g from the twin (NaNs agree: %v)", d, ok)
			}
			a := &attnGradIn{q: qv, k: kv, v: vv, o: ov, do: dov, lse: lse.F32, ops: ops, operands: operands, g: 0.35}
			var got, want [3]*tensor.Tensor
			var gv, wv [3]matView
			dims := [3][2]int{{c.nq, c.dk}, {c.nk, c.dk}, {c.nk, c.dv}}
			for j := range got {
				var perm []int
				if c.perm {
					perm = split
				}
				got[j], gv[j], _, _ = allocView(e, batch, dims[j][0], dims[j][1], perm)
				for i := range got[j].F32 {
					got[j].F32[i] = float32(math.NaN()) // the kernel must overwrite every element
				}
				want[j], wv[j], _, _ = allocView(e, batch, dims[j][0], dims[j][1], perm)
			}
			attentionBackward(e, a, gv[0], gv[1], gv[2])
			attentionBackwardRef(a, wv[0], wv[1], wv[2])
			for j, name := range []string{"dQ", "dK", "dV"} {
				if d, ok := closeTo(got[j].F32, want[j].F32); !ok || d > 2e-5 {
					t.Errorf("%s: relative difference %g from the twin (NaNs agree: %v)", name, d, ok)
				}
			}
		})
	}
}
