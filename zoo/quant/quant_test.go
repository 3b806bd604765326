package quant_test

import (
	"context"
	"math"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/quant"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

func TestWeights(t *testing.T) {
	// 2×3, column 1 all zeros; per column: max 4, 0 → scale 1, 254 → 2.
	w := []float32{4, 0, -254, -2, 0, 1}
	cases := []struct {
		name       string
		perChannel bool
		q          []int8
		scales     []float32
	}{
		{"per channel", true, []int8{127, 0, -127, -64, 0, 0}, []float32{4.0 / 127, 1, 2}},
		// per tensor: scale 2; -2/2 = -1, 1/2 = 0.5 rounds to even 0, 4/2 = 2.
		{"per tensor", false, []int8{2, 0, -127, -1, 0, 0}, []float32{2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q, s, err := quant.Weights(w, 2, 3, c.perChannel)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(q, c.q) || !slices.Equal(s, c.scales) {
				t.Errorf("got %v scales %v, want %v scales %v", q, s, c.q, c.scales)
			}
		})
	}
	if _, _, err := quant.Weights([]float32{1, float32(math.NaN())}, 1, 2, true); err == nil || !strings.Contains(err.Error(), "(0, 1)") {
		t.Errorf("NaN weight: %v, want an error naming (0, 1)", err)
	}
	if _, _, err := quant.Weights([]float32{1, 2, 3}, 2, 2, true); err == nil {
		t.Error("3 values for 2×2: no error")
	}
}

func TestRoundIsHalfEvenAndClamped(t *testing.T) {
	for _, c := range []struct {
		v, s float32
		want int8
	}{{0.5, 1, 0}, {1.5, 1, 2}, {-2.5, 1, -2}, {300, 1, 127}, {-300, 1, -127}, {-127.5, 1, -127}} {
		if got := quant.Round(c.v, c.s); got != c.want {
			t.Errorf("Round(%v, %v) = %d, want %d", c.v, c.s, got, c.want)
		}
	}
}

// encoderish builds x (batch, seq, 8) → three projections of x (Q, K, V as zoo writes them:
// MatMul by a Transpose of an (out, in) weight, Add bias), Q·Kᵀ (two run-time operands, left
// float), a product by V's, and a Gemm of a 2-D reshape with transB, and the output.
func encoderish(t *testing.T) *graph.Graph {
	t.Helper()
	rng := rand.New(rand.NewSource(7))
	randT := func(shape ...int) *tensor.Tensor {
		n := 1
		for _, d := range shape {
			n *= d
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return &tensor.Tensor{DType: tensor.Float32, Shape: shape, F32: v}
	}
	b := graph.NewBuilder("encoderish")
	x := b.Input("x", tensor.Float32, graph.Sym("batch"), graph.Fixed(5), graph.Fixed(8))
	proj := func(name string) string {
		w := b.Param(name+".weight", randT(8, 8))
		bias := b.Param(name+".bias", randT(8))
		return b.Op("Add", []string{b.MatMul(x, b.Op("Transpose", []string{w}, nil)), bias}, nil)
	}
	q, k, v := proj("q"), proj("k"), proj("v")
	s := b.MatMul(q, b.Op("Transpose", []string{k}, graph.Attrs{"perm": graph.Ints(0, 2, 1)}))
	h := b.MatMul(b.Op("Softmax", []string{s}, nil), v)
	flat := b.Op("Reshape", []string{h, b.ConstInts(-1, 8)}, nil)
	y := b.Op("Gemm", []string{flat, b.Param("out.weight", randT(4, 8)), b.Param("out.bias", randT(4))}, graph.Attrs{"transB": graph.Int(1)})
	b.Output("y", y, tensor.Float32, graph.Sym("rows"), graph.Fixed(4))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestDynamicForm(t *testing.T) {
	g := encoderish(t)
	nodes := len(g.Nodes)
	for _, perTensor := range []bool{false, true} {
		q, st, err := quant.Dynamic(g, quant.Options{PerTensor: perTensor})
		if err != nil {
			t.Fatal(err)
		}
		if err := q.Validate(); err != nil {
			t.Fatalf("quantized graph: %v", err)
		}
		if st.Layers != 4 || st.Weights != 4 || st.FloatBytes != 4*(3*64+32) {
			t.Errorf("stats %+v, want 4 layers and 4 weights of %d float bytes", st, 4*(3*64+32))
		}
		count := map[string]int{}
		for _, n := range q.Nodes {
			count[n.Op]++
		}
		// One DynamicQuantizeLinear for x (shared by Q, K, V) and one for the Gemm's input;
		// Q·Kᵀ and the product by V stay MatMul; no weight Transpose is left.
		if count["DynamicQuantizeLinear"] != 2 || count["MatMulInteger"] != 4 || count["MatMul"] != 2 || count["Transpose"] != 1 || count["Gemm"] != 0 {
			t.Errorf("per tensor %v: ops %v", perTensor, count)
		}
		for _, name := range []string{"q.weight", "out.weight"} {
			if q.Initializer(name) != nil {
				t.Errorf("the float weight %s is still there", name)
			}
			w := q.Initializer(name + "_quantized")
			s, z := q.Initializer(name+"_scale"), q.Initializer(name+"_zero_point")
			if w == nil || s == nil || z == nil || w.DType != tensor.Int8 || z.DType != tensor.Int8 {
				t.Fatalf("%s: quantized %v scale %v zero point %v", name, w, s, z)
			}
			if want := []int{8, 8}; name == "out.weight" {
				want = []int{8, 4} // (k, n): Gemm's transB is folded into the quantized weight
				if !slices.Equal(w.Shape, want) {
					t.Errorf("%s_quantized has shape %v, want %v", name, w.Shape, want)
				}
			}
			if perTensor != (s.Len() == 1) || s.Len() != z.Len() {
				t.Errorf("per tensor %v: %s has %d scales and %d zero points", perTensor, name, s.Len(), z.Len())
			}
		}
		if q.Meta[quant.MetaKey] == "" {
			t.Errorf("no %s metadata", quant.MetaKey)
		}
		// The values: within what int8 rounding allows of the float graph.
		x := &tensor.Tensor{DType: tensor.Float32, Shape: []int{2, 5, 8}, F32: make([]float32, 80)}
		for i := range x.F32 {
			x.F32[i] = float32(math.Sin(float64(i)))
		}
		want, err := g.Eval(context.Background(), map[string]*tensor.Tensor{"x": x})
		if err != nil {
			t.Fatal(err)
		}
		got, err := q.Eval(context.Background(), map[string]*tensor.Tensor{"x": x})
		if err != nil {
			t.Fatal(err)
		}
		var num, dw, dg float64
		for i, w := range want["y"].F32 {
			gv := float64(got["y"].F32[i])
			num += gv * float64(w)
			dw += float64(w) * float64(w)
			dg += gv * gv
		}
		if cos := num / math.Sqrt(dw*dg); cos < 0.999 {
			t.Errorf("per tensor %v: cosine to the float graph %.6f, want ≥ 0.999", perTensor, cos)
		}
	}
	if g.Initializer("q.weight") == nil || len(g.Nodes) != nodes {
		t.Errorf("Dynamic changed its input graph (%d nodes)", len(g.Nodes))
	}
}

func TestDynamicRefusesAGraphWithoutLinearLayers(t *testing.T) {
	b := graph.NewBuilder("nolinear")
	x := b.Input("x", tensor.Float32, graph.Fixed(2), graph.Fixed(2))
	b.Output("y", b.MatMul(x, x), tensor.Float32, graph.Fixed(2), graph.Fixed(2))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := quant.Dynamic(g, quant.Options{}); err == nil || !strings.Contains(err.Error(), "no linear layer") {
		t.Errorf("got %v, want an error saying there is no linear layer", err)
	}
}
