package cpu

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// TestWhereReplaceRuns checks the key-padding Where of fused attention as it runs (the runs
// of replaced keys planReplace lists, filled a block of keys at a time) against the
// condition read key by key: both kinds ('w' keeps where the condition holds, 'W' where it
// does not), conditions with no run, one run at either end, many short runs and every key
// replaced, and blocks of keys that start and end inside runs, between them and at the ends.
func TestWhereReplaceRuns(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	const nk, c = 700, -7.5
	conds := map[string]func(j int) bool{
		"none":  func(int) bool { return true },
		"tail":  func(j int) bool { return j < nk-83 },
		"head":  func(j int) bool { return j >= 40 },
		"all":   func(int) bool { return false },
		"runs":  func(j int) bool { return (j/7)%3 != 0 },
		"alt":   func(j int) bool { return j%2 == 0 },
		"rand":  func(int) bool { return r.Intn(3) > 0 },
		"edges": func(j int) bool { return j != 0 && j != 511 && j != 512 && j != nk-1 },
	}
	for name, holds := range conds {
		for _, kind := range []byte{'w', 'W'} {
			t.Run(fmt.Sprintf("%s/%c", name, kind), func(t *testing.T) {
				mask, _ := tensor.New(tensor.Bool, 2, nk)
				for b := range 2 {
					for j := range nk {
						mask.Bool[b*nk+j] = holds(j) == (b == 0) // batch 1 the other way round
					}
				}
				bo := bcastOperand{t: mask, base: []int{0, nk}, cs: 1}
				bo.planReplace(kind, c, nk)
				ops := []scoreOp{{kind: kind, c: c}}
				for b := range 2 {
					for _, blk := range [][2]int{{0, nk}, {0, 512}, {512, nk}, {3, 9}, {40, 41}, {500, 620}, {nk - 1, nk}, {10, 10}} {
						k0, k1 := blk[0], blk[1]
						row := make([]float32, k1-k0)
						for j := range row {
							row[j] = float32(k0 + j)
						}
						applyScoreOps(row, ops, []bcastOperand{bo}, b, 0, k0)
						for j, v := range row {
							want := float32(k0 + j)
							if mask.Bool[b*nk+k0+j] != (kind == 'w') {
								want = c
							}
							if v != want {
								t.Fatalf("batch %d, keys [%d, %d): key %d is %v, want %v", b, k0, k1, k0+j, v, want)
							}
						}
					}
				}
			})
		}
	}
}
