package cpu

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/zoo-dev/zoo/zoo/tensor"
)

// TestArithRows checks that Add, Sub, Mul and Div with their rows in package vec (arithRow)
// give every bit the per-element loop gives, on broadcasts that make each kind of row (both
// operands whole rows, a row and one value either way round, strided ones the loop keeps),
// with signed zeros, infinities, NaN and subnormals among the values.
func TestArithRows(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 1e-40, -3e-39, 1, -2.5}
	fill := func(shape ...int) *tensor.Tensor {
		x, _ := tensor.New(tensor.Float32, shape...)
		for i := range x.F32 {
			if r.Intn(4) == 0 {
				x.F32[i] = special[r.Intn(len(special))]
			} else {
				x.F32[i] = float32(r.NormFloat64() * 3)
			}
		}
		return x
	}
	shapes := [][2][]int{
		{{4, 37}, {4, 37}}, {{4, 37}, {37}}, {{4, 37}, {4, 1}}, {{4, 1}, {4, 37}}, {{1, 37}, {4, 1}},
		{{3, 1, 19}, {1, 5, 1}}, {{}, {4, 37}}, {{4, 37}, {}}, {{2, 3, 64, 64}, {64, 64}}, {{2, 3, 64, 64}, {2, 3, 1, 1}},
		{{5, 3}, {3, 5, 1}},
	}
	ops := map[byte]func(a, b float32) float32{
		'+': func(a, b float32) float32 { return a + b }, '-': func(a, b float32) float32 { return a - b },
		'*': func(a, b float32) float32 { return a * b }, '/': func(a, b float32) float32 { return a / b },
	}
	// NaNs with payloads of their own, so that a result taking the other operand's NaN, or
	// its sign flipped, shows
	nans := func(x *tensor.Tensor, bits uint32) *tensor.Tensor {
		y := &tensor.Tensor{DType: tensor.Float32, Shape: x.Shape, F32: append([]float32(nil), x.F32...)}
		for i := range y.F32 {
			if i%3 != 1 {
				y.F32[i] = math.Float32frombits(bits + uint32(i%2)<<31)
			}
		}
		return y
	}
	e := &exec{threads: 2}
	for _, sh := range shapes {
		a, b := fill(sh[0]...), fill(sh[1]...)
		for kind, f := range ops {
			for _, in := range [][2]*tensor.Tensor{{a, b}, {nans(a, 0x7fc00001), nans(b, 0x7fc00002)}} {
				a, b := in[0], in[1]
				t.Run(fmt.Sprintf("%v%c%v", sh[0], kind, sh[1]), func(t *testing.T) {
					got, err := arith(e, a, b, kind, f, nil)
					if err != nil {
						t.Fatal(err)
					}
					want, err := arith(e, a, b, 0, f, nil)
					if err != nil {
						t.Fatal(err)
					}
					for i, v := range want.F32 {
						if g := got.F32[i]; math.Float32bits(g) != math.Float32bits(v) {
							t.Fatalf("element %d: %v (%#x) in rows, %v (%#x) element by element", i, g, math.Float32bits(g), v, math.Float32bits(v))
						}
					}
				})
			}
		}
	}
}
