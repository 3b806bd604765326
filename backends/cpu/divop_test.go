package cpu

import (
	"math"
	"math/rand"
	"testing"
)

// TestDivOp checks that a score division becomes a multiplication exactly when the divisor
// is a power of two with a normal reciprocal, and that the two then agree bit for bit on
// random, tiny (subnormal-producing), huge and special values.
func TestDivOp(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	xs := []float32{0, float32(math.Copysign(0, -1)), 1, -1, math.MaxFloat32, -math.MaxFloat32,
		math.SmallestNonzeroFloat32, 1.17549435e-38, 3e-39, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
	for range 4000 {
		xs = append(xs, float32(r.NormFloat64()*math.Pow(2, float64(r.Intn(280)-140))))
	}
	for _, c := range []struct {
		div  float32
		mult bool
	}{{8, true}, {4, true}, {1, true}, {0.5, true}, {0x1p100, true}, {0x1p-100, true}, {0x1p126, false},
		{0x1p-127, false}, {3, false}, {float32(math.Sqrt(32)), false}, {-8, false}, {0, false}, {float32(math.Inf(1)), false}} {
		op := divOp(c.div)
		if (op.kind == '*') != c.mult {
			t.Fatalf("divOp(%g) = %c %g, want a multiplication: %v", c.div, op.kind, op.c, c.mult)
		}
		if !c.mult {
			if op.kind != '/' || op.c != c.div {
				t.Fatalf("divOp(%g) = %c %g, want the division kept", c.div, op.kind, op.c)
			}
			continue
		}
		for _, x := range xs {
			got, want := x*op.c, x/c.div
			if math.Float32bits(got) != math.Float32bits(want) && !(got != got && want != want) {
				t.Fatalf("%g/%g = %g, but ·%g gives %g", x, c.div, want, op.c, got)
			}
		}
	}
}
