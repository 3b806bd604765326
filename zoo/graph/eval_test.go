package graph_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Tensor literals for the golden cases: the shape first, then the row-major elements.
func tf(shape []int, v ...float32) *tensor.Tensor {
	return &tensor.Tensor{DType: tensor.Float32, Shape: shape, F32: append([]float32{}, v...)}
}
func ti(shape []int, v ...int64) *tensor.Tensor {
	return &tensor.Tensor{DType: tensor.Int64, Shape: shape, I64: append([]int64{}, v...)}
}
func ti32(shape []int, v ...int64) *tensor.Tensor {
	return &tensor.Tensor{DType: tensor.Int32, Shape: shape, I64: append([]int64{}, v...)}
}
func tb(shape []int, v ...bool) *tensor.Tensor {
	return &tensor.Tensor{DType: tensor.Bool, Shape: shape, Bool: append([]bool{}, v...)}
}
func sh(d ...int) []int { return append([]int{}, d...) }

// zeros is a float32 tensor of zeros.
func zeros(d ...int) *tensor.Tensor {
	t, err := tensor.New(tensor.Float32, d...)
	if err != nil {
		panic(err)
	}
	return t
}

var (
	nan  = float32(math.NaN())
	pinf = float32(math.Inf(1))
	ninf = float32(math.Inf(-1))
	T, F = true, false
)

// sameTensor compares dtype, shape and elements; floats agree to a relative 1e-6 (the golden
// values are written to 7-8 significant digits) and NaN equals NaN.
func sameTensor(got, want *tensor.Tensor) string {
	if got.DType != want.DType || !tensor.SameShape(got.Shape, want.Shape) {
		return fmt.Sprintf("got %v %s, want %v %s", got.DType, tensor.ShapeString(got.Shape), want.DType, tensor.ShapeString(want.Shape))
	}
	switch {
	case want.DType == tensor.Float64:
		for i, w := range want.F64 {
			g := got.F64[i]
			switch {
			case math.IsNaN(w) && math.IsNaN(g):
			case math.IsInf(w, 0) && g == w:
			case math.Abs(g-w) <= 1e-12*math.Max(1, math.Abs(w)):
			default:
				return fmt.Sprintf("element %d: got %v, want %v (all: %v)", i, g, w, got.F64)
			}
		}
	case want.DType.IsFloat():
		for i, w := range want.F32 {
			g := got.F32[i]
			switch {
			case math.IsNaN(float64(w)) && math.IsNaN(float64(g)):
			case math.IsInf(float64(w), 0) && g == w:
			case math.Abs(float64(g)-float64(w)) <= 1e-6*math.Max(1, math.Abs(float64(w))):
			default:
				return fmt.Sprintf("element %d: got %v, want %v (all: %v)", i, g, w, got.F32)
			}
		}
	case want.DType == tensor.Bool:
		for i, w := range want.Bool {
			if got.Bool[i] != w {
				return fmt.Sprintf("element %d: got %v, want %v (all: %v)", i, got.Bool[i], w, got.Bool)
			}
		}
	default:
		for i, w := range want.I64 {
			if got.I64[i] != w {
				return fmt.Sprintf("element %d: got %v, want %v (all: %v)", i, got.I64[i], w, got.I64)
			}
		}
	}
	return ""
}

type evalCase struct {
	name    string
	op      string
	attrs   graph.Attrs
	in      []*tensor.Tensor // nil: an omitted optional input
	want    []*tensor.Tensor
	nOut    int // outputs when want is empty (error cases); default 1
	wantErr string
}

// evalNode builds a node for c and evaluates it.
func evalNode(c evalCase) ([]*tensor.Tensor, error) {
	domain, op := graph.SplitOpKey(c.op)
	n := &graph.Node{Name: "n", Op: op, Domain: domain, Attrs: c.attrs}
	for i, t := range c.in {
		name := fmt.Sprintf("x%d", i)
		if t == nil {
			name = ""
		}
		n.Inputs = append(n.Inputs, name)
	}
	outs := max(len(c.want), c.nOut, 1)
	for i := 0; i < outs; i++ {
		n.Outputs = append(n.Outputs, fmt.Sprintf("y%d", i))
	}
	return graph.EvalNode(n, c.in)
}

func runEvalCases(t *testing.T, cases []evalCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.op+"/"+c.name, func(t *testing.T) {
			inCopy := make([]*tensor.Tensor, len(c.in))
			for i, x := range c.in {
				if x != nil {
					inCopy[i] = x.Clone()
				}
			}
			got, err := evalNode(c)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("got %v, %v; want an error mentioning %q", got, err, c.wantErr)
				}
				if !strings.Contains(err.Error(), `"n"`) || !strings.Contains(err.Error(), c.op) {
					t.Errorf("error %q does not name the node and the op", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(c.want) {
				t.Fatalf("%d outputs, want %d", len(got), len(c.want))
			}
			for i := range got {
				if c.want[i] == nil {
					continue // an output the case does not check
				}
				if d := sameTensor(got[i], c.want[i]); d != "" {
					t.Errorf("output %d: %s", i, d)
				}
			}
			for i, x := range c.in {
				if x != nil && !tensor.Equal(x, inCopy[i]) {
					t.Errorf("input %d was modified", i)
				}
			}
		})
	}
}

func elementwiseCases() []evalCase {
	e := float32(math.E)
	return []evalCase{
		{name: "float", op: "Abs", in: []*tensor.Tensor{tf(sh(3), -1.5, 0, 2)}, want: []*tensor.Tensor{tf(sh(3), 1.5, 0, 2)}},
		{name: "int32 min wraps", op: "Abs", in: []*tensor.Tensor{ti32(sh(2), math.MinInt32, -3)}, want: []*tensor.Tensor{ti32(sh(2), math.MinInt32, 3)}},
		{name: "int64", op: "Abs", in: []*tensor.Tensor{ti(sh(1), -5)}, want: []*tensor.Tensor{ti(sh(1), 5)}},
		{name: "bool rejected", op: "Abs", in: []*tensor.Tensor{tb(sh(1), T)}, wantErr: "want a number type"},
		{name: "float", op: "Neg", in: []*tensor.Tensor{tf(sh(2), 1, -2)}, want: []*tensor.Tensor{tf(sh(2), -1, 2)}},
		{name: "int64", op: "Neg", in: []*tensor.Tensor{ti(sh(), 3)}, want: []*tensor.Tensor{ti(sh(), -3)}},
		{name: "float", op: "Relu", in: []*tensor.Tensor{tf(sh(3), -1, 0.5, nan)}, want: []*tensor.Tensor{tf(sh(3), 0, 0.5, nan)}},
		{name: "int", op: "Relu", in: []*tensor.Tensor{ti(sh(2), -3, 4)}, want: []*tensor.Tensor{ti(sh(2), 0, 4)}},
		{name: "values", op: "Exp", in: []*tensor.Tensor{tf(sh(3), 0, 1, ninf)}, want: []*tensor.Tensor{tf(sh(3), 1, 2.7182817, 0)}},
		{name: "int rejected", op: "Exp", in: []*tensor.Tensor{ti(sh(1), 1)}, wantErr: "want float32"},
		{name: "values", op: "Log", in: []*tensor.Tensor{tf(sh(4), 1, e, 0, -1)}, want: []*tensor.Tensor{tf(sh(4), 0, 1, ninf, nan)}},
		{name: "values", op: "Sqrt", in: []*tensor.Tensor{tf(sh(3), 4, 2, -1)}, want: []*tensor.Tensor{tf(sh(3), 2, 1.4142135, nan)}},
		{name: "values", op: "Erf", in: []*tensor.Tensor{tf(sh(3), 0, 1, -1)}, want: []*tensor.Tensor{tf(sh(3), 0, 0.84270079, -0.84270079)}},
		{name: "values", op: "Tanh", in: []*tensor.Tensor{tf(sh(2), 0, 1)}, want: []*tensor.Tensor{tf(sh(2), 0, 0.76159416)}},
		{name: "values", op: "Sigmoid", in: []*tensor.Tensor{tf(sh(4), 0, 1, ninf, pinf)}, want: []*tensor.Tensor{tf(sh(4), 0.5, 0.73105858, 0, 1)}},
		{name: "default alpha", op: "Elu", in: []*tensor.Tensor{tf(sh(2), -1, 2)}, want: []*tensor.Tensor{tf(sh(2), -0.63212056, 2)}},
		{name: "alpha 2", op: "Elu", attrs: graph.Attrs{"alpha": graph.Float(2)}, in: []*tensor.Tensor{tf(sh(2), -1, 2)}, want: []*tensor.Tensor{tf(sh(2), -1.2642411, 2)}},
		{name: "alpha as int", op: "Elu", attrs: graph.Attrs{"alpha": graph.Int(2)}, in: []*tensor.Tensor{tf(sh(1), -1)}, wantErr: `"alpha" of Elu must be float`},
		{name: "bool", op: "Not", in: []*tensor.Tensor{tb(sh(2), T, F)}, want: []*tensor.Tensor{tb(sh(2), F, T)}},
		{name: "empty", op: "Not", in: []*tensor.Tensor{tb(sh(0, 2))}, want: []*tensor.Tensor{tb(sh(0, 2))}},

		{name: "broadcast (2,1)+(3)", op: "Add", in: []*tensor.Tensor{tf(sh(2, 1), 1, 2), tf(sh(3), 10, 20, 30)}, want: []*tensor.Tensor{tf(sh(2, 3), 11, 21, 31, 12, 22, 32)}},
		{name: "rank difference with 1-dims", op: "Add", in: []*tensor.Tensor{tf(sh(2, 1), 1, 2), tf(sh(1, 1, 3), 10, 20, 30)}, want: []*tensor.Tensor{tf(sh(1, 2, 3), 11, 21, 31, 12, 22, 32)}},
		{name: "scalar", op: "Add", in: []*tensor.Tensor{tf(sh(), 1), tf(sh(2), 1, 2)}, want: []*tensor.Tensor{tf(sh(2), 2, 3)}},
		{name: "empty", op: "Add", in: []*tensor.Tensor{tf(sh(0, 3)), tf(sh(3), 1, 2, 3)}, want: []*tensor.Tensor{tf(sh(0, 3))}},
		{name: "int32 wraps", op: "Add", in: []*tensor.Tensor{ti32(sh(1), math.MaxInt32), ti32(sh(1), 1)}, want: []*tensor.Tensor{ti32(sh(1), math.MinInt32)}},
		{name: "not broadcastable", op: "Add", in: []*tensor.Tensor{tf(sh(2), 1, 2), tf(sh(3), 1, 2, 3)}, wantErr: "broadcast"},
		{name: "mixed dtypes", op: "Add", in: []*tensor.Tensor{tf(sh(1), 1), ti(sh(1), 1)}, wantErr: "int64"},
		{name: "int64", op: "Sub", in: []*tensor.Tensor{ti(sh(2), 5, 0), ti(sh(), 7)}, want: []*tensor.Tensor{ti(sh(2), -2, -7)}},
		{name: "float", op: "Mul", in: []*tensor.Tensor{tf(sh(2), 1.5, 2), tf(sh(), 2)}, want: []*tensor.Tensor{tf(sh(2), 3, 4)}},
		{name: "float by zero", op: "Div", in: []*tensor.Tensor{tf(sh(3), 1, -1, 0), tf(sh(), 0)}, want: []*tensor.Tensor{tf(sh(3), pinf, ninf, nan)}},
		{name: "int truncates", op: "Div", in: []*tensor.Tensor{ti(sh(2), 7, -7), ti(sh(1), 2)}, want: []*tensor.Tensor{ti(sh(2), 3, -3)}},
		{name: "int by zero", op: "Div", in: []*tensor.Tensor{ti(sh(1), 7), ti(sh(1), 0)}, wantErr: "division by zero"},
		{name: "float", op: "Pow", in: []*tensor.Tensor{tf(sh(2), 2, 4), tf(sh(2), 3, 0.5)}, want: []*tensor.Tensor{tf(sh(2), 8, 2)}},
		{name: "float base int exponent", op: "Pow", in: []*tensor.Tensor{tf(sh(2), 2, 3), ti(sh(), -1)}, want: []*tensor.Tensor{tf(sh(2), 0.5, 0.33333334)}},
		{name: "int", op: "Pow", in: []*tensor.Tensor{ti(sh(3), 2, 3, -2), ti(sh(3), 10, 0, 3)}, want: []*tensor.Tensor{ti(sh(3), 1024, 1, -8)}},
		{name: "int negative exponent truncates", op: "Pow", in: []*tensor.Tensor{ti(sh(3), 2, -1, 1), ti(sh(), -3)}, want: []*tensor.Tensor{ti(sh(3), 0, -1, 1)}},
		{name: "int base float exponent", op: "Pow", in: []*tensor.Tensor{ti(sh(1), 9), tf(sh(1), 0.5)}, want: []*tensor.Tensor{ti(sh(1), 3)}},
		{name: "float", op: "Equal", in: []*tensor.Tensor{tf(sh(3), 1, 2, nan), tf(sh(3), 1, 3, nan)}, want: []*tensor.Tensor{tb(sh(3), T, F, F)}},
		{name: "bool", op: "Equal", in: []*tensor.Tensor{tb(sh(2), T, F), tb(sh(), F)}, want: []*tensor.Tensor{tb(sh(2), F, T)}},
		{name: "int", op: "Equal", in: []*tensor.Tensor{ti(sh(2), 0, 4), ti(sh(), 0)}, want: []*tensor.Tensor{tb(sh(2), T, F)}},
		{name: "mixed", op: "Equal", in: []*tensor.Tensor{ti(sh(2), 0, 4), tf(sh(), 0)}, wantErr: "float32"},
		{name: "int", op: "Greater", in: []*tensor.Tensor{ti(sh(2), 1, 5), ti(sh(1), 3)}, want: []*tensor.Tensor{tb(sh(2), F, T)}},
		{name: "float", op: "Less", in: []*tensor.Tensor{tf(sh(2, 1), 1, 5), tf(sh(2), 3, 5)}, want: []*tensor.Tensor{tb(sh(2, 2), T, T, F, F)}},
		{name: "broadcast", op: "And", in: []*tensor.Tensor{tb(sh(2, 1), T, F), tb(sh(2), T, F)}, want: []*tensor.Tensor{tb(sh(2, 2), T, F, F, F)}},
		{name: "broadcast", op: "Or", in: []*tensor.Tensor{tb(sh(2, 1), T, F), tb(sh(2), T, F)}, want: []*tensor.Tensor{tb(sh(2, 2), T, T, T, F)}},
		{name: "float rejected", op: "Or", in: []*tensor.Tensor{tf(sh(1), 1), tf(sh(1), 1)}, wantErr: "want bool"},
		{name: "variadic broadcast", op: "Max", in: []*tensor.Tensor{tf(sh(2, 1), 1, 5), tf(sh(3), 2, 3, 4), tf(sh(1), 3)}, want: []*tensor.Tensor{tf(sh(2, 3), 3, 3, 4, 5, 5, 5)}},
		{name: "NaN wins", op: "Max", in: []*tensor.Tensor{tf(sh(2), nan, 1), tf(sh(2), 0, nan)}, want: []*tensor.Tensor{tf(sh(2), nan, nan)}},
		{name: "single input", op: "Max", in: []*tensor.Tensor{ti(sh(2), 4, -1)}, want: []*tensor.Tensor{ti(sh(2), 4, -1)}},
		{name: "int", op: "Min", in: []*tensor.Tensor{ti(sh(3), 4, -1, 7), ti(sh(), 2)}, want: []*tensor.Tensor{ti(sh(3), 2, -1, 2)}},
		{name: "bool rejected", op: "Neg", in: []*tensor.Tensor{tb(sh(1), T)}, wantErr: "want a number type"},
		{name: "bool rejected", op: "Relu", in: []*tensor.Tensor{tb(sh(1), T)}, wantErr: "want a number type"},
		{name: "int rejected", op: "Log", in: []*tensor.Tensor{ti(sh(1), 1)}, wantErr: "want float32"},
		{name: "int rejected", op: "Sqrt", in: []*tensor.Tensor{ti(sh(1), 1)}, wantErr: "want float32"},
		{name: "int rejected", op: "Erf", in: []*tensor.Tensor{ti(sh(1), 1)}, wantErr: "want float32"},
		{name: "int rejected", op: "Tanh", in: []*tensor.Tensor{ti(sh(1), 1)}, wantErr: "want float32"},
		{name: "bool rejected", op: "Sigmoid", in: []*tensor.Tensor{tb(sh(1), T)}, wantErr: "want float32"},
		{name: "float rejected", op: "Not", in: []*tensor.Tensor{tf(sh(1), 1)}, wantErr: "want bool"},
		{name: "mixed dtypes", op: "Sub", in: []*tensor.Tensor{ti(sh(1), 1), ti32(sh(1), 1)}, wantErr: "int32"},
		{name: "not broadcastable", op: "Mul", in: []*tensor.Tensor{tf(sh(2, 2), 1, 2, 3, 4), tf(sh(3), 1, 2, 3)}, wantErr: "broadcast"},
		{name: "bool rejected", op: "Pow", in: []*tensor.Tensor{tb(sh(1), T), tf(sh(1), 1)}, wantErr: "want a number type"},
		{name: "bool rejected", op: "Greater", in: []*tensor.Tensor{tb(sh(1), T), tb(sh(1), T)}, wantErr: "want a number type"},
		{name: "mixed dtypes", op: "Less", in: []*tensor.Tensor{tf(sh(1), 1), ti(sh(1), 1)}, wantErr: "int64"},
		{name: "int rejected", op: "And", in: []*tensor.Tensor{ti(sh(1), 1), ti(sh(1), 1)}, wantErr: "want bool"},
		{name: "mixed dtypes", op: "Max", in: []*tensor.Tensor{tf(sh(1), 1), tf(sh(1), 1), ti(sh(1), 1)}, wantErr: "int64"},
		{name: "bool rejected", op: "Min", in: []*tensor.Tensor{tb(sh(1), T)}, wantErr: "want a number type"},
		{name: "broadcast three ways", op: "Where", in: []*tensor.Tensor{tb(sh(2, 1), T, F), tf(sh(3), 1, 2, 3), tf(sh(), 0)}, want: []*tensor.Tensor{tf(sh(2, 3), 1, 2, 3, 0, 0, 0)}},
		{name: "int", op: "Where", in: []*tensor.Tensor{tb(sh(2), F, T), ti(sh(2), 1, 2), ti(sh(2), 3, 4)}, want: []*tensor.Tensor{ti(sh(2), 3, 2)}},
		{name: "float condition", op: "Where", in: []*tensor.Tensor{tf(sh(1), 1), tf(sh(1), 1), tf(sh(1), 1)}, wantErr: "want bool"},
	}
}

func constCases() []evalCase {
	cast := func(dt tensor.DType) graph.Attrs { return graph.Attrs{"to": graph.Int(int64(dt))} }
	return []evalCase{
		{name: "float to int64 truncates", op: "Cast", attrs: cast(tensor.Int64), in: []*tensor.Tensor{tf(sh(3), 1.7, -1.7, 0)}, want: []*tensor.Tensor{ti(sh(3), 1, -1, 0)}},
		{name: "float to bool", op: "Cast", attrs: cast(tensor.Bool), in: []*tensor.Tensor{tf(sh(3), 0, -0.5, nan)}, want: []*tensor.Tensor{tb(sh(3), F, T, T)}},
		{name: "int64 to int32 wraps", op: "Cast", attrs: cast(tensor.Int32), in: []*tensor.Tensor{ti(sh(2), 1<<32+1, -1)}, want: []*tensor.Tensor{ti32(sh(2), 1, -1)}},
		{name: "bool to float", op: "Cast", attrs: cast(tensor.Float32), in: []*tensor.Tensor{tb(sh(2), T, F)}, want: []*tensor.Tensor{tf(sh(2), 1, 0)}},
		{name: "int to float", op: "Cast", attrs: cast(tensor.Float32), in: []*tensor.Tensor{ti(sh(2), -3, 1<<24)}, want: []*tensor.Tensor{tf(sh(2), -3, 16777216)}},
		{name: "int to bool", op: "Cast", attrs: cast(tensor.Bool), in: []*tensor.Tensor{ti(sh(2), 0, -2)}, want: []*tensor.Tensor{tb(sh(2), F, T)}},
		{name: "NaN to int is undefined", op: "Cast", attrs: cast(tensor.Int64), in: []*tensor.Tensor{tf(sh(1), nan)}, wantErr: "undefined"},
		{name: "out of int32 range", op: "Cast", attrs: cast(tensor.Int32), in: []*tensor.Tensor{tf(sh(1), 3e9)}, wantErr: "does not fit"},
		{name: "missing to", op: "Cast", in: []*tensor.Tensor{tf(sh(1), 1)}, wantErr: `needs the int attribute "to"`},
		{name: "copies", op: "Identity", in: []*tensor.Tensor{ti(sh(2), 1, 2)}, want: []*tensor.Tensor{ti(sh(2), 1, 2)}},
		{name: "value_ints", op: "Constant", attrs: graph.Attrs{"value_ints": graph.Ints(1, 2)}, want: []*tensor.Tensor{ti(sh(2), 1, 2)}},
		{name: "value_float", op: "Constant", attrs: graph.Attrs{"value_float": graph.Float(2.5)}, want: []*tensor.Tensor{tf(sh(), 2.5)}},
		{name: "value_int", op: "Constant", attrs: graph.Attrs{"value_int": graph.Int(-4)}, want: []*tensor.Tensor{ti(sh(), -4)}},
		{name: "value_floats", op: "Constant", attrs: graph.Attrs{"value_floats": graph.Floats(1, 2)}, want: []*tensor.Tensor{tf(sh(2), 1, 2)}},
		{name: "value tensor", op: "Constant", attrs: graph.Attrs{"value": graph.TensorAttr(tb(sh(1, 2), T, F))}, want: []*tensor.Tensor{tb(sh(1, 2), T, F)}},
		{name: "no value", op: "Constant", wantErr: "exactly one"},
		{name: "two values", op: "Constant", attrs: graph.Attrs{"value_int": graph.Int(1), "value_float": graph.Float(1)}, wantErr: "exactly one"},
		{name: "default float zeros", op: "ConstantOfShape", in: []*tensor.Tensor{ti(sh(2), 2, 1)}, want: []*tensor.Tensor{tf(sh(2, 1), 0, 0)}},
		{name: "int value", op: "ConstantOfShape", attrs: graph.Attrs{"value": graph.TensorAttr(ti(sh(1), 7))}, in: []*tensor.Tensor{ti(sh(1), 3)}, want: []*tensor.Tensor{ti(sh(3), 7, 7, 7)}},
		{name: "empty", op: "ConstantOfShape", in: []*tensor.Tensor{ti(sh(2), 0, 3)}, want: []*tensor.Tensor{tf(sh(0, 3))}},
		{name: "scalar", op: "ConstantOfShape", attrs: graph.Attrs{"value": graph.TensorAttr(tb(sh(1), T))}, in: []*tensor.Tensor{ti(sh(0))}, want: []*tensor.Tensor{tb(sh(), T)}},
		{name: "negative dim", op: "ConstantOfShape", in: []*tensor.Tensor{ti(sh(1), -1)}, wantErr: "negative"},
		{name: "all", op: "Shape", in: []*tensor.Tensor{zeros(2, 3, 4)}, want: []*tensor.Tensor{ti(sh(3), 2, 3, 4)}},
		{name: "start 1", op: "Shape", attrs: graph.Attrs{"start": graph.Int(1)}, in: []*tensor.Tensor{zeros(2, 3, 4)}, want: []*tensor.Tensor{ti(sh(2), 3, 4)}},
		{name: "start -1", op: "Shape", attrs: graph.Attrs{"start": graph.Int(-1)}, in: []*tensor.Tensor{zeros(2, 3, 4)}, want: []*tensor.Tensor{ti(sh(1), 4)}},
		{name: "end -1", op: "Shape", attrs: graph.Attrs{"end": graph.Int(-1)}, in: []*tensor.Tensor{zeros(2, 3, 4)}, want: []*tensor.Tensor{ti(sh(2), 2, 3)}},
		{name: "end before start", op: "Shape", attrs: graph.Attrs{"start": graph.Int(2), "end": graph.Int(1)}, in: []*tensor.Tensor{zeros(2, 3, 4)}, want: []*tensor.Tensor{ti(sh(0))}},
		{name: "scalar", op: "Shape", in: []*tensor.Tensor{tf(sh(), 1)}, want: []*tensor.Tensor{ti(sh(0))}},
		{name: "int up", op: "Range", in: []*tensor.Tensor{ti(sh(), 0), ti(sh(), 5), ti(sh(), 2)}, want: []*tensor.Tensor{ti(sh(3), 0, 2, 4)}},
		{name: "int down", op: "Range", in: []*tensor.Tensor{ti(sh(), 5), ti(sh(), 0), ti(sh(), -2)}, want: []*tensor.Tensor{ti(sh(3), 5, 3, 1)}},
		{name: "float", op: "Range", in: []*tensor.Tensor{tf(sh(), 0), tf(sh(), 1), tf(sh(), 0.25)}, want: []*tensor.Tensor{tf(sh(4), 0, 0.25, 0.5, 0.75)}},
		{name: "empty", op: "Range", in: []*tensor.Tensor{ti(sh(), 3), ti(sh(), 3), ti(sh(), 1)}, want: []*tensor.Tensor{ti(sh(0))}},
		{name: "wrong way is empty", op: "Range", in: []*tensor.Tensor{ti(sh(), 3), ti(sh(), 0), ti(sh(), 1)}, want: []*tensor.Tensor{ti(sh(0))}},
		{name: "zero delta", op: "Range", in: []*tensor.Tensor{ti(sh(), 0), ti(sh(), 3), ti(sh(), 0)}, wantErr: "delta is zero"},
	}
}

func layoutCases() []evalCase {
	x6 := func(d ...int) *tensor.Tensor { return tf(sh(d...), 0, 1, 2, 3, 4, 5) }
	i64s := func(v ...int64) *tensor.Tensor { return ti(sh(len(v)), v...) }
	return []evalCase{
		{name: "0 and -1", op: "Reshape", in: []*tensor.Tensor{x6(2, 3), i64s(0, -1)}, want: []*tensor.Tensor{x6(2, 3)}},
		{name: "flatten", op: "Reshape", in: []*tensor.Tensor{x6(2, 3), i64s(-1)}, want: []*tensor.Tensor{x6(6)}},
		{name: "-1 first", op: "Reshape", in: []*tensor.Tensor{x6(2, 3), i64s(-1, 2)}, want: []*tensor.Tensor{x6(3, 2)}},
		{name: "allowzero keeps 0", op: "Reshape", attrs: graph.Attrs{"allowzero": graph.Int(1)}, in: []*tensor.Tensor{tf(sh(0, 3)), i64s(3, 0)}, want: []*tensor.Tensor{tf(sh(3, 0))}},
		{name: "0 copies on empty", op: "Reshape", in: []*tensor.Tensor{tf(sh(0, 3)), i64s(0, 3, 1)}, want: []*tensor.Tensor{tf(sh(0, 3, 1))}},
		{name: "count differs", op: "Reshape", in: []*tensor.Tensor{x6(2, 3), i64s(4, 2)}, wantErr: "6 elements"},
		{name: "two -1", op: "Reshape", in: []*tensor.Tensor{x6(2, 3), i64s(-1, -1)}, wantErr: "more than one -1"},
		{name: "default reverses", op: "Transpose", in: []*tensor.Tensor{x6(2, 3)}, want: []*tensor.Tensor{tf(sh(3, 2), 0, 3, 1, 4, 2, 5)}},
		{name: "perm 2,0,1", op: "Transpose", attrs: graph.Attrs{"perm": graph.Ints(2, 0, 1)}, in: []*tensor.Tensor{x6(1, 2, 3)}, want: []*tensor.Tensor{tf(sh(3, 1, 2), 0, 3, 1, 4, 2, 5)}},
		{name: "bad perm", op: "Transpose", attrs: graph.Attrs{"perm": graph.Ints(0, 0)}, in: []*tensor.Tensor{x6(2, 3)}, wantErr: "permutation"},
		{name: "all 1-dims", op: "Squeeze", in: []*tensor.Tensor{tf(sh(1, 3, 1), 1, 2, 3)}, want: []*tensor.Tensor{tf(sh(3), 1, 2, 3)}},
		{name: "axis 0", op: "Squeeze", in: []*tensor.Tensor{tf(sh(1, 3, 1), 1, 2, 3), i64s(0)}, want: []*tensor.Tensor{tf(sh(3, 1), 1, 2, 3)}},
		{name: "axis -1", op: "Squeeze", in: []*tensor.Tensor{tf(sh(1, 3, 1), 1, 2, 3), i64s(-1)}, want: []*tensor.Tensor{tf(sh(1, 3), 1, 2, 3)}},
		{name: "empty axes squeeze nothing", op: "Squeeze", in: []*tensor.Tensor{tf(sh(1, 3, 1), 1, 2, 3), i64s()}, want: []*tensor.Tensor{tf(sh(1, 3, 1), 1, 2, 3)}},
		{name: "attribute axes", op: "Squeeze", attrs: graph.Attrs{"axes": graph.Ints(2)}, in: []*tensor.Tensor{tf(sh(1, 3, 1), 1, 2, 3)}, want: []*tensor.Tensor{tf(sh(1, 3), 1, 2, 3)}},
		{name: "to scalar", op: "Squeeze", in: []*tensor.Tensor{tf(sh(1, 1), 7)}, want: []*tensor.Tensor{tf(sh(), 7)}},
		{name: "size 3", op: "Squeeze", in: []*tensor.Tensor{tf(sh(1, 3, 1), 1, 2, 3), i64s(1)}, wantErr: "size 3"},
		{name: "both ends", op: "Unsqueeze", in: []*tensor.Tensor{tf(sh(3), 1, 2, 3), i64s(0, -1)}, want: []*tensor.Tensor{tf(sh(1, 3, 1), 1, 2, 3)}},
		{name: "scalar", op: "Unsqueeze", in: []*tensor.Tensor{tf(sh(), 7), i64s(0)}, want: []*tensor.Tensor{tf(sh(1), 7)}},
		{name: "repeated", op: "Unsqueeze", in: []*tensor.Tensor{tf(sh(3), 1, 2, 3), i64s(0, -3)}, wantErr: "repeat"},
		{name: "columns", op: "Expand", in: []*tensor.Tensor{tf(sh(2, 1), 1, 2), i64s(2, 3)}, want: []*tensor.Tensor{tf(sh(2, 3), 1, 1, 1, 2, 2, 2)}},
		{name: "shape of lower rank", op: "Expand", in: []*tensor.Tensor{tf(sh(2, 2), 1, 2, 3, 4), i64s(1)}, want: []*tensor.Tensor{tf(sh(2, 2), 1, 2, 3, 4)}},
		{name: "new leading axis", op: "Expand", in: []*tensor.Tensor{ti(sh(1, 2), 1, 2), i64s(3, 1, 1)}, want: []*tensor.Tensor{ti(sh(3, 1, 2), 1, 2, 1, 2, 1, 2)}},
		{name: "to empty", op: "Expand", in: []*tensor.Tensor{tf(sh(1), 1), i64s(0)}, want: []*tensor.Tensor{tf(sh(0))}},
		{name: "incompatible", op: "Expand", in: []*tensor.Tensor{tf(sh(2), 1, 2), i64s(3)}, wantErr: "broadcast"},
		{name: "1-D", op: "Tile", in: []*tensor.Tensor{tf(sh(2), 1, 2), i64s(3)}, want: []*tensor.Tensor{tf(sh(6), 1, 2, 1, 2, 1, 2)}},
		{name: "2-D", op: "Tile", in: []*tensor.Tensor{tb(sh(2, 1), T, F), i64s(2, 2)}, want: []*tensor.Tensor{tb(sh(4, 2), T, T, F, F, T, T, F, F)}},
		{name: "zero repeats", op: "Tile", in: []*tensor.Tensor{tf(sh(2), 1, 2), i64s(0)}, want: []*tensor.Tensor{tf(sh(0))}},
		{name: "repeats length", op: "Tile", in: []*tensor.Tensor{tf(sh(2), 1, 2), i64s(1, 2)}, wantErr: "repeats has 2 entries"},
		{name: "axis 0", op: "Concat", attrs: graph.Attrs{"axis": graph.Int(0)}, in: []*tensor.Tensor{tf(sh(1, 2), 0, 1), tf(sh(2, 2), 2, 3, 4, 5)}, want: []*tensor.Tensor{x6(3, 2)}},
		{name: "axis -1", op: "Concat", attrs: graph.Attrs{"axis": graph.Int(-1)}, in: []*tensor.Tensor{ti(sh(2, 1), 1, 2), ti(sh(2, 2), 3, 4, 5, 6)}, want: []*tensor.Tensor{ti(sh(2, 3), 1, 3, 4, 2, 5, 6)}},
		{name: "with empty", op: "Concat", attrs: graph.Attrs{"axis": graph.Int(0)}, in: []*tensor.Tensor{tf(sh(0, 2)), tf(sh(1, 2), 1, 2)}, want: []*tensor.Tensor{tf(sh(1, 2), 1, 2)}},
		{name: "off-axis mismatch", op: "Concat", attrs: graph.Attrs{"axis": graph.Int(0)}, in: []*tensor.Tensor{tf(sh(1, 2), 1, 2), tf(sh(1, 3), 1, 2, 3)}, wantErr: "differs"},
		{name: "needs axis", op: "Concat", in: []*tensor.Tensor{tf(sh(1), 1)}, wantErr: `attribute "axis"`},
		{name: "sizes", op: "Split", in: []*tensor.Tensor{x6(6), i64s(2, 4)}, want: []*tensor.Tensor{tf(sh(2), 0, 1), tf(sh(4), 2, 3, 4, 5)}},
		{name: "equal", op: "Split", in: []*tensor.Tensor{x6(6)}, want: []*tensor.Tensor{tf(sh(2), 0, 1), tf(sh(2), 2, 3), tf(sh(2), 4, 5)}},
		{name: "num_outputs uneven", op: "Split", attrs: graph.Attrs{"num_outputs": graph.Int(4)}, in: []*tensor.Tensor{x6(6)}, want: []*tensor.Tensor{tf(sh(2), 0, 1), tf(sh(2), 2, 3), tf(sh(2), 4, 5), tf(sh(0))}},
		{name: "axis 1", op: "Split", attrs: graph.Attrs{"axis": graph.Int(1)}, in: []*tensor.Tensor{x6(2, 3)}, want: []*tensor.Tensor{tf(sh(2, 1), 0, 3), tf(sh(2, 1), 1, 4), tf(sh(2, 1), 2, 5)}},
		{name: "sizes do not sum", op: "Split", in: []*tensor.Tensor{x6(6), i64s(2, 3)}, nOut: 2, wantErr: "sum to 5"},
		{name: "axis -1", op: "Split", attrs: graph.Attrs{"axis": graph.Int(-1)}, in: []*tensor.Tensor{tf(sh(2, 2), 1, 2, 3, 4)}, want: []*tensor.Tensor{tf(sh(2, 1), 1, 3), tf(sh(2, 1), 2, 4)}},
		{name: "uneven", op: "Split", in: []*tensor.Tensor{zeros(5)}, nOut: 2, wantErr: "evenly"},
		{name: "1:3", op: "Slice", in: []*tensor.Tensor{x6(6), i64s(1), i64s(3)}, want: []*tensor.Tensor{tf(sh(2), 1, 2)}},
		{name: "reverse all", op: "Slice", in: []*tensor.Tensor{x6(6), i64s(-1), i64s(math.MinInt64), i64s(0), i64s(-1)}, want: []*tensor.Tensor{tf(sh(6), 5, 4, 3, 2, 1, 0)}},
		{name: "negative step, start below -dim gives x[0]", op: "Slice", in: []*tensor.Tensor{x6(6), i64s(-8), i64s(-10), i64s(0), i64s(-1)}, want: []*tensor.Tensor{tf(sh(1), 0)}},
		{name: "step 2 to the end", op: "Slice", in: []*tensor.Tensor{x6(6), i64s(0), i64s(math.MaxInt64), nil, i64s(2)}, want: []*tensor.Tensor{tf(sh(3), 0, 2, 4)}},
		{name: "axis -1 of 2-D", op: "Slice", in: []*tensor.Tensor{x6(2, 3), i64s(1), i64s(3), i64s(-1)}, want: []*tensor.Tensor{tf(sh(2, 2), 1, 2, 4, 5)}},
		{name: "two axes, one reversed", op: "Slice", in: []*tensor.Tensor{x6(2, 3), i64s(0, 2), i64s(1, 0), i64s(0, 1), i64s(1, -1)}, want: []*tensor.Tensor{tf(sh(1, 2), 2, 1)}},
		{name: "empty range", op: "Slice", in: []*tensor.Tensor{x6(6), i64s(3), i64s(1)}, want: []*tensor.Tensor{tf(sh(0))}},
		{name: "step 0", op: "Slice", in: []*tensor.Tensor{x6(6), i64s(0), i64s(3), i64s(0), i64s(0)}, wantErr: "is 0"},
		{name: "rows", op: "Gather", in: []*tensor.Tensor{x6(3, 2), i64s(2, 0)}, want: []*tensor.Tensor{tf(sh(2, 2), 4, 5, 0, 1)}},
		{name: "scalar index, negative, axis 1", op: "Gather", attrs: graph.Attrs{"axis": graph.Int(1)}, in: []*tensor.Tensor{x6(3, 2), ti(sh(), -1)}, want: []*tensor.Tensor{tf(sh(3), 1, 3, 5)}},
		{name: "2-D indices on axis 1", op: "Gather", attrs: graph.Attrs{"axis": graph.Int(1)}, in: []*tensor.Tensor{x6(3, 2), ti(sh(2, 1), 1, 0)}, want: []*tensor.Tensor{tf(sh(3, 2, 1), 1, 0, 3, 2, 5, 4)}},
		{name: "int32 indices", op: "Gather", in: []*tensor.Tensor{ti(sh(3), 7, 8, 9), ti32(sh(2), 1, 1)}, want: []*tensor.Tensor{ti(sh(2), 8, 8)}},
		{name: "empty indices", op: "Gather", in: []*tensor.Tensor{x6(3, 2), ti(sh(0))}, want: []*tensor.Tensor{tf(sh(0, 2))}},
		{name: "out of range", op: "Gather", in: []*tensor.Tensor{x6(3, 2), i64s(3)}, wantErr: "out of range"},
	}
}

func computeCases() []evalCase {
	a23 := tf(sh(2, 3), 1, 2, 3, 4, 5, 6)
	b32 := tf(sh(3, 2), 7, 8, 9, 10, 11, 12)
	return []evalCase{
		{name: "2-D", op: "MatMul", in: []*tensor.Tensor{a23, b32}, want: []*tensor.Tensor{tf(sh(2, 2), 58, 64, 139, 154)}},
		{name: "vector dot", op: "MatMul", in: []*tensor.Tensor{tf(sh(3), 1, 2, 3), tf(sh(3), 4, 5, 6)}, want: []*tensor.Tensor{tf(sh(), 32)}},
		{name: "vector times matrix", op: "MatMul", in: []*tensor.Tensor{tf(sh(3), 1, 2, 3), b32}, want: []*tensor.Tensor{tf(sh(2), 58, 64)}},
		{name: "matrix times vector", op: "MatMul", in: []*tensor.Tensor{a23, tf(sh(3), 1, 0, 1)}, want: []*tensor.Tensor{tf(sh(2), 4, 10)}},
		{name: "batch broadcast", op: "MatMul", in: []*tensor.Tensor{tf(sh(2, 1, 2), 1, 2, 3, 4), tf(sh(2, 1), 1, 1)}, want: []*tensor.Tensor{tf(sh(2, 1, 1), 3, 7)}},
		{name: "batch both sides", op: "MatMul", in: []*tensor.Tensor{tf(sh(2, 1, 1, 1), 1, 2), tf(sh(3, 1, 1), 1, 10, 100)}, want: []*tensor.Tensor{tf(sh(2, 3, 1, 1), 1, 10, 100, 2, 20, 200)}},
		{name: "K = 0", op: "MatMul", in: []*tensor.Tensor{tf(sh(2, 0)), tf(sh(0, 3))}, want: []*tensor.Tensor{tf(sh(2, 3), 0, 0, 0, 0, 0, 0)}},
		{name: "inner mismatch", op: "MatMul", in: []*tensor.Tensor{a23, a23}, wantErr: "inner dimensions"},
		{name: "int rejected", op: "MatMul", in: []*tensor.Tensor{ti(sh(1, 1), 1), ti(sh(1, 1), 1)}, wantErr: "want float32"},
		{name: "plain", op: "Gemm", in: []*tensor.Tensor{a23, b32}, want: []*tensor.Tensor{tf(sh(2, 2), 58, 64, 139, 154)}},
		{name: "alpha beta C row", op: "Gemm", attrs: graph.Attrs{"alpha": graph.Float(2), "beta": graph.Float(0.5)}, in: []*tensor.Tensor{a23, b32, tf(sh(2), 1, 3)}, want: []*tensor.Tensor{tf(sh(2, 2), 116.5, 129.5, 278.5, 309.5)}},
		{name: "C column", op: "Gemm", in: []*tensor.Tensor{a23, b32, tf(sh(2, 1), 1, 2)}, want: []*tensor.Tensor{tf(sh(2, 2), 59, 65, 141, 156)}},
		{name: "transA transB", op: "Gemm", attrs: graph.Attrs{"transA": graph.Int(1), "transB": graph.Int(1)}, in: []*tensor.Tensor{tf(sh(3, 2), 1, 4, 2, 5, 3, 6), tf(sh(2, 3), 7, 9, 11, 8, 10, 12)}, want: []*tensor.Tensor{tf(sh(2, 2), 58, 64, 139, 154)}},
		{name: "C too big", op: "Gemm", in: []*tensor.Tensor{a23, b32, tf(sh(3), 1, 2, 3)}, wantErr: "C"},
		{name: "last axis", op: "Softmax", in: []*tensor.Tensor{tf(sh(3), 1, 2, 3)}, want: []*tensor.Tensor{tf(sh(3), 0.09003057, 0.24472847, 0.66524096)}},
		{name: "axis 0", op: "Softmax", attrs: graph.Attrs{"axis": graph.Int(0)}, in: []*tensor.Tensor{tf(sh(2, 2), 0, 1, 0, 3)}, want: []*tensor.Tensor{tf(sh(2, 2), 0.5, 0.11920292, 0.5, 0.88079708)}},
		{name: "masked", op: "Softmax", in: []*tensor.Tensor{tf(sh(2), ninf, 0)}, want: []*tensor.Tensor{tf(sh(2), 0, 1)}},
		{name: "large values", op: "Softmax", in: []*tensor.Tensor{tf(sh(2), 1000, 1000)}, want: []*tensor.Tensor{tf(sh(2), 0.5, 0.5)}},
		{name: "empty", op: "Softmax", in: []*tensor.Tensor{tf(sh(0, 3))}, want: []*tensor.Tensor{tf(sh(0, 3))}},
		{name: "axis out of range", op: "Softmax", attrs: graph.Attrs{"axis": graph.Int(1)}, in: []*tensor.Tensor{tf(sh(2), 1, 2)}, wantErr: "out of range"},
		{name: "all outputs", op: "LayerNormalization", in: []*tensor.Tensor{tf(sh(2, 2), 1, 3, 2, 2), tf(sh(2), 1, 2), tf(sh(2), 0, 1)},
			want: []*tensor.Tensor{tf(sh(2, 2), -0.999995, 2.99999, 0, 1), tf(sh(2, 1), 2, 2), tf(sh(2, 1), 0.999995, 316.22777)}},
		{name: "no bias, axis 0", op: "LayerNormalization", attrs: graph.Attrs{"axis": graph.Int(0), "epsilon": graph.Float(0)}, in: []*tensor.Tensor{tf(sh(2, 1), 1, 3), tf(sh(1), 2), nil},
			want: []*tensor.Tensor{tf(sh(2, 1), -2, 2)}},
		{name: "bad scale", op: "LayerNormalization", in: []*tensor.Tensor{tf(sh(2, 2), 1, 3, 2, 2), tf(sh(3), 1, 2, 3)}, wantErr: "scale"},
		{name: "axis keepdims", op: "ReduceSum", in: []*tensor.Tensor{a23, ti(sh(1), 1)}, want: []*tensor.Tensor{tf(sh(2, 1), 6, 15)}},
		{name: "all, no keepdims", op: "ReduceSum", attrs: graph.Attrs{"keepdims": graph.Int(0)}, in: []*tensor.Tensor{a23}, want: []*tensor.Tensor{tf(sh(), 21)}},
		{name: "empty axis sums to 0", op: "ReduceSum", in: []*tensor.Tensor{tf(sh(0, 2)), ti(sh(1), 0)}, want: []*tensor.Tensor{tf(sh(1, 2), 0, 0)}},
		{name: "noop with empty axes", op: "ReduceSum", attrs: graph.Attrs{"noop_with_empty_axes": graph.Int(1)}, in: []*tensor.Tensor{a23}, want: []*tensor.Tensor{a23}},
		{name: "int32 wraps", op: "ReduceSum", in: []*tensor.Tensor{ti32(sh(2), math.MaxInt32, 1)}, want: []*tensor.Tensor{ti32(sh(1), math.MinInt32)}},
		{name: "attribute axes", op: "ReduceMean", attrs: graph.Attrs{"axes": graph.Ints(0), "keepdims": graph.Int(0)}, in: []*tensor.Tensor{a23}, want: []*tensor.Tensor{tf(sh(3), 2.5, 3.5, 4.5)}},
		{name: "bool rejected", op: "ReduceMean", in: []*tensor.Tensor{tb(sh(1), T)}, wantErr: "want a number type"},
		{name: "axes as float", op: "ReduceSum", in: []*tensor.Tensor{a23, tf(sh(1), 1)}, wantErr: "want int64"},
		{name: "int truncates", op: "ReduceMean", in: []*tensor.Tensor{ti(sh(2, 2), 1, 2, -1, -2), ti(sh(1), -1)}, want: []*tensor.Tensor{ti(sh(2, 1), 1, -1)}},
		{name: "int last axis", op: "ReduceMax", attrs: graph.Attrs{"keepdims": graph.Int(0)}, in: []*tensor.Tensor{ti(sh(2, 3), 1, 3, 2, 6, 5, 4), ti(sh(1), -1)}, want: []*tensor.Tensor{ti(sh(2), 3, 6)}},
		{name: "NaN wins", op: "ReduceMax", in: []*tensor.Tensor{tf(sh(3), 1, nan, 2)}, want: []*tensor.Tensor{tf(sh(1), nan)}},
		{name: "empty is -Inf", op: "ReduceMax", in: []*tensor.Tensor{tf(sh(2, 0)), ti(sh(1), 1)}, want: []*tensor.Tensor{tf(sh(2, 1), ninf, ninf)}},
		{name: "bad axis", op: "ReduceMax", in: []*tensor.Tensor{a23, ti(sh(1), 2)}, wantErr: "out of range"},
	}
}

// goldenSets holds the golden evaluation cases by family. A new op's test file adds its set
// from an init function: goldenSets["MyOp"] = myOpCases.
var goldenSets = map[string]func() []evalCase{
	"elementwise": elementwiseCases,
	"const":       constCases,
	"layout":      layoutCases,
	"compute":     computeCases,
}

func TestEvalGolden(t *testing.T) {
	for name, cases := range goldenSets {
		t.Run(name, func(t *testing.T) { runEvalCases(t, cases()) })
	}
}

// Every op in the table has golden cases: at least one that evaluates and one that is
// rejected (an op that accepts every input it can be given is exempt from the second).
func TestEvalCoversEveryOp(t *testing.T) {
	ok, bad := map[string]int{}, map[string]int{}
	for _, cases := range goldenSets {
		for _, c := range cases() {
			if c.wantErr == "" {
				ok[c.op]++
			} else {
				bad[c.op]++
			}
		}
	}
	// Ops that take any input of any dtype or shape: nothing to reject.
	total := map[string]bool{"Identity": true, "Shape": true}
	for _, d := range graph.Ops() {
		if ok[d.Key()] == 0 {
			t.Errorf("op %s has no golden evaluation case", d.Key())
		}
		if bad[d.Key()] == 0 && !total[d.Key()] {
			t.Errorf("op %s has no rejected-input case", d.Key())
		}
	}
}

// EvalNode never panics and names the node and op in its errors.
func TestEvalNodeErrors(t *testing.T) {
	if _, err := graph.EvalNode(nil, nil); err == nil {
		t.Error("nil node: no error")
	}
	cases := []struct {
		name string
		n    *graph.Node
		in   []*tensor.Tensor
		want string
	}{
		{"unknown op", &graph.Node{Name: "n", Op: "Frobnicate", Outputs: []string{"y"}}, nil, "unknown op"},
		{"other domain", &graph.Node{Name: "n", Op: "Relu", Domain: "com.example", Inputs: []string{"x"}, Outputs: []string{"y"}}, []*tensor.Tensor{tf(sh(1), 1)}, `"com.example.Relu"`},
		{"arity", &graph.Node{Name: "n", Op: "Relu", Inputs: []string{"x", "z"}, Outputs: []string{"y"}}, []*tensor.Tensor{tf(sh(1), 1), tf(sh(1), 1)}, "inputs"},
		{"tensor count", &graph.Node{Name: "n", Op: "Relu", Inputs: []string{"x"}, Outputs: []string{"y"}}, nil, "0 input tensors"},
		{"nil required", &graph.Node{Name: "n", Op: "Add", Inputs: []string{"x", "z"}, Outputs: []string{"y"}}, []*tensor.Tensor{tf(sh(1), 1), nil}, "no tensor"},
		{"empty required name", &graph.Node{Name: "n", Op: "Add", Inputs: []string{"x", ""}, Outputs: []string{"y"}}, []*tensor.Tensor{tf(sh(1), 1), nil}, "required input 1"},
		{"bad tensor", &graph.Node{Name: "n", Op: "Relu", Inputs: []string{"x"}, Outputs: []string{"y"}}, []*tensor.Tensor{{DType: tensor.Float32, Shape: []int{3}, F32: []float32{1}}}, "x"},
		{"reshape target not int", &graph.Node{Name: "n", Op: "Reshape", Inputs: []string{"x", "s"}, Outputs: []string{"y"}}, []*tensor.Tensor{tf(sh(1), 1), tf(sh(1), 1)}, "int64"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := graph.EvalNode(tc.n, tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `"n"`) {
				t.Fatalf("got %v, want an error naming node \"n\" and mentioning %q", err, tc.want)
			}
		})
	}
}

// Evaluating a whole graph node by node gives every value the shape ConcreteShapes infers:
// the oracle and inference agree on a realistic mix of shape arithmetic and compute.
func TestEvalGraphAgreesWithConcreteShapes(t *testing.T) {
	b := graph.NewBuilder("t")
	x := b.Input("x", f32, batch, seq, fx(4))
	pad := b.Input("pad", tensor.Bool, batch, seq)
	n := seqLen(b, x)
	w := b.Const(mustF([]float32{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1}, 4, 4))
	h := b.MatMul(x, w)
	h = b.Reshape(h, 0, 0, 2, 2)
	h = b.Transpose(h, 0, 2, 1, 3)
	s := b.MatMul(h, b.Transpose(h, 0, 1, 3, 2))
	m := b.Unsqueeze(b.Unsqueeze(pad, 1), 1)
	s = b.Where(m, b.ConstFloat(float32(math.Inf(-1))), s)
	s = b.Softmax(s, -1)
	o := b.MatMul(s, h)
	o = b.Transpose(o, 0, 2, 1, 3)
	shp := b.Op("Concat", []string{b.Slice(b.Shape(x), b.ConstInts(0), b.ConstInts(1), b.ConstInts(0)), n, b.ConstInts(-1)}, graph.Attrs{"axis": graph.Int(0)})
	o = b.Op("Reshape", []string{o, shp}, nil)
	o = b.LayerNorm(o, b.Const(mustF([]float32{1, 1, 1, 1}, 4)), b.Const(mustF([]float32{0, 0, 0, 0}, 4)), 1e-5)
	b.Output("out", o, f32, batch, seq, fx(4))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	shapes, err := g.ConcreteShapes(map[string][]int{"x": {2, 3, 4}, "pad": {2, 3}})
	if err != nil {
		t.Fatal(err)
	}
	vals := g.InitializerMap()
	xs := make([]float32, 24)
	for i := range xs {
		xs[i] = float32(i%5) - 2
	}
	vals["x"] = mustF(xs, 2, 3, 4)
	vals["pad"], _ = tensor.FromBool([]bool{F, F, T, F, T, T}, 2, 3)
	for _, nd := range g.Nodes {
		in := make([]*tensor.Tensor, len(nd.Inputs))
		for i, name := range nd.Inputs {
			in[i] = vals[name]
		}
		outs, err := graph.EvalNode(nd, in)
		if err != nil {
			t.Fatal(err)
		}
		for i, name := range nd.Outputs {
			if !tensor.SameShape(outs[i].Shape, shapes[name]) {
				t.Errorf("%s: eval gives %s, ConcreteShapes %s", name, tensor.ShapeString(outs[i].Shape), tensor.ShapeString(shapes[name]))
			}
			vals[name] = outs[i]
		}
	}
	out := vals["out"]
	// Each row of the output is layer-normalised: mean 0 across the last axis.
	for r := 0; r < 6; r++ {
		var sum float64
		for _, v := range out.F32[r*4 : r*4+4] {
			sum += float64(v)
		}
		if math.Abs(sum) > 1e-5 {
			t.Errorf("row %d sums to %v, want 0", r, sum)
		}
	}
}
