package graph_test

import (
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

func init() { goldenSets["math"] = mathCases }

func tu(dt tensor.DType, shape []int, v ...int64) *tensor.Tensor {
	return &tensor.Tensor{DType: dt, Shape: shape, I64: append([]int64{}, v...)}
}
func td(shape []int, v ...float64) *tensor.Tensor {
	return &tensor.Tensor{DType: tensor.Float64, Shape: shape, F64: append([]float64{}, v...)}
}

// mathCases: the values are numpy's (np.ceil, np.sin, ..., np.mod, np.fmod) for the same
// float32 inputs, and ONNX's documented examples for the activations.
func mathCases() []evalCase {
	x := tf(sh(5), -1.5, -0.5, 0.5, 1.5, 2.5)
	badInt := ti(sh(1), 1)
	return []evalCase{
		{name: "ceil", op: "Ceil", in: []*tensor.Tensor{x}, want: []*tensor.Tensor{tf(sh(5), -1, -0, 1, 2, 3)}},
		{name: "floor", op: "Floor", in: []*tensor.Tensor{x}, want: []*tensor.Tensor{tf(sh(5), -2, -1, 0, 1, 2)}},
		{name: "round halves to even", op: "Round", in: []*tensor.Tensor{x}, want: []*tensor.Tensor{tf(sh(5), -2, -0, 0, 2, 2)}},
		{name: "sign", op: "Sign", in: []*tensor.Tensor{tf(sh(4), -2, 0, 3, nan)}, want: []*tensor.Tensor{tf(sh(4), -1, 0, 1, nan)}},
		{name: "sign int", op: "Sign", in: []*tensor.Tensor{ti(sh(3), -7, 0, 9)}, want: []*tensor.Tensor{ti(sh(3), -1, 0, 1)}},
		{name: "sin", op: "Sin", in: []*tensor.Tensor{tf(sh(3), 0, 1.5707964, -1)}, want: []*tensor.Tensor{tf(sh(3), 0, 1, -0.84147096)}},
		{name: "cos", op: "Cos", in: []*tensor.Tensor{tf(sh(3), 0, 3.1415927, 1)}, want: []*tensor.Tensor{tf(sh(3), 1, -1, 0.5403023)}},
		{name: "tan", op: "Tan", in: []*tensor.Tensor{tf(sh(2), 0, 0.7853982)}, want: []*tensor.Tensor{tf(sh(2), 0, 1)}},
		{name: "asin", op: "Asin", in: []*tensor.Tensor{tf(sh(3), 0, 1, 2)}, want: []*tensor.Tensor{tf(sh(3), 0, 1.5707964, nan)}},
		{name: "acos", op: "Acos", in: []*tensor.Tensor{tf(sh(2), 1, -1)}, want: []*tensor.Tensor{tf(sh(2), 0, 3.1415927)}},
		{name: "atan", op: "Atan", in: []*tensor.Tensor{tf(sh(2), 0, 1)}, want: []*tensor.Tensor{tf(sh(2), 0, 0.7853982)}},
		{name: "sinh", op: "Sinh", in: []*tensor.Tensor{tf(sh(2), 0, 1)}, want: []*tensor.Tensor{tf(sh(2), 0, 1.1752012)}},
		{name: "cosh", op: "Cosh", in: []*tensor.Tensor{tf(sh(2), 0, 1)}, want: []*tensor.Tensor{tf(sh(2), 1, 1.5430806)}},
		{name: "asinh", op: "Asinh", in: []*tensor.Tensor{tf(sh(2), 0, 1)}, want: []*tensor.Tensor{tf(sh(2), 0, 0.8813736)}},
		{name: "acosh", op: "Acosh", in: []*tensor.Tensor{tf(sh(3), 1, 2, 0)}, want: []*tensor.Tensor{tf(sh(3), 0, 1.316958, nan)}},
		{name: "atanh", op: "Atanh", in: []*tensor.Tensor{tf(sh(3), 0, 0.5, 1)}, want: []*tensor.Tensor{tf(sh(3), 0, 0.54930615, pinf)}},
		{name: "softplus", op: "Softplus", in: []*tensor.Tensor{tf(sh(4), -1, 0, 1, 100)}, want: []*tensor.Tensor{tf(sh(4), 0.31326166, 0.6931472, 1.3132616, 100)}},
		{name: "softsign", op: "Softsign", in: []*tensor.Tensor{tf(sh(3), -1, 0, 3)}, want: []*tensor.Tensor{tf(sh(3), -0.5, 0, 0.75)}},
		{name: "leaky relu", op: "LeakyRelu", attrs: graph.Attrs{"alpha": graph.Float(0.1)}, in: []*tensor.Tensor{tf(sh(3), -1, 0, 1)}, want: []*tensor.Tensor{tf(sh(3), -0.1, 0, 1)}},
		{name: "leaky relu default", op: "LeakyRelu", in: []*tensor.Tensor{tf(sh(2), -1, 2)}, want: []*tensor.Tensor{tf(sh(2), -0.01, 2)}},
		{name: "thresholded relu", op: "ThresholdedRelu", attrs: graph.Attrs{"alpha": graph.Float(2)}, in: []*tensor.Tensor{tf(sh(4), -1, 0, 2, 2.2)}, want: []*tensor.Tensor{tf(sh(4), 0, 0, 0, 2.2)}},
		{name: "celu", op: "Celu", attrs: graph.Attrs{"alpha": graph.Float(2)}, in: []*tensor.Tensor{tf(sh(3), -1, 0, 1)}, want: []*tensor.Tensor{tf(sh(3), -0.7869387, 0, 1)}},
		{name: "selu", op: "Selu", attrs: graph.Attrs{"alpha": graph.Float(2), "gamma": graph.Float(3)}, in: []*tensor.Tensor{tf(sh(3), -1, 0, 1)}, want: []*tensor.Tensor{tf(sh(3), -3.7927232, 0, 3)}},
		{name: "hard swish", op: "HardSwish", in: []*tensor.Tensor{tf(sh(4), -4, -1, 1, 4)}, want: []*tensor.Tensor{tf(sh(4), 0, -0.33333334, 0.6666667, 4)}},
		{name: "shrink", op: "Shrink", attrs: graph.Attrs{"lambd": graph.Float(1.5), "bias": graph.Float(1.5)}, in: []*tensor.Tensor{tf(sh(5), -2, -1, 0, 1, 2)}, want: []*tensor.Tensor{tf(sh(5), -0.5, 0, 0, 0, 0.5)}},
		{name: "isnan", op: "IsNaN", in: []*tensor.Tensor{tf(sh(3), 1, nan, pinf)}, want: []*tensor.Tensor{tb(sh(3), F, T, F)}},
		{name: "isinf", op: "IsInf", in: []*tensor.Tensor{tf(sh(4), 1, nan, pinf, ninf)}, want: []*tensor.Tensor{tb(sh(4), F, F, T, T)}},
		{name: "isinf negative only", op: "IsInf", attrs: graph.Attrs{"detect_positive": graph.Int(0)}, in: []*tensor.Tensor{tf(sh(2), pinf, ninf)}, want: []*tensor.Tensor{tb(sh(2), F, T)}},
		{name: "mod int sign of divisor", op: "Mod", in: []*tensor.Tensor{ti(sh(4), -4, 7, 5, -3), ti(sh(4), 3, -3, 2, -2)}, want: []*tensor.Tensor{ti(sh(4), 2, -2, 1, -1)}},
		{name: "fmod int sign of dividend", op: "Mod", attrs: graph.Attrs{"fmod": graph.Int(1)}, in: []*tensor.Tensor{ti(sh(2), -4, 7), ti(sh(2), 3, -3)}, want: []*tensor.Tensor{ti(sh(2), -1, 1)}},
		{name: "fmod float", op: "Mod", attrs: graph.Attrs{"fmod": graph.Int(1)}, in: []*tensor.Tensor{tf(sh(2), -4.5, 7.5), tf(sh(1), 2)}, want: []*tensor.Tensor{tf(sh(2), -0.5, 1.5)}},
		{name: "xor", op: "Xor", in: []*tensor.Tensor{tb(sh(4), F, F, T, T), tb(sh(4), F, T, F, T)}, want: []*tensor.Tensor{tb(sh(4), F, T, T, F)}},
		{name: "bitshift left", op: "BitShift", attrs: graph.Attrs{"direction": graph.String("LEFT")}, in: []*tensor.Tensor{tu(tensor.Uint8, sh(3), 16, 4, 1), tu(tensor.Uint8, sh(3), 1, 2, 3)}, want: []*tensor.Tensor{tu(tensor.Uint8, sh(3), 32, 16, 8)}},
		{name: "bitshift left wraps", op: "BitShift", attrs: graph.Attrs{"direction": graph.String("LEFT")}, in: []*tensor.Tensor{tu(tensor.Uint8, sh(1), 200), tu(tensor.Uint8, sh(1), 1)}, want: []*tensor.Tensor{tu(tensor.Uint8, sh(1), 144)}},
		{name: "bitshift right", op: "BitShift", attrs: graph.Attrs{"direction": graph.String("RIGHT")}, in: []*tensor.Tensor{tu(tensor.Uint32, sh(3), 16, 4, 1), tu(tensor.Uint32, sh(1), 2)}, want: []*tensor.Tensor{tu(tensor.Uint32, sh(3), 4, 1, 0)}},
		{name: "greater or equal", op: "GreaterOrEqual", in: []*tensor.Tensor{tf(sh(3), 1, 2, nan), tf(sh(3), 2, 2, 1)}, want: []*tensor.Tensor{tb(sh(3), F, T, F)}},
		{name: "less or equal", op: "LessOrEqual", in: []*tensor.Tensor{ti(sh(3), 1, 2, 3), ti(sh(1), 2)}, want: []*tensor.Tensor{tb(sh(3), T, T, F)}},
		{name: "prelu", op: "PRelu", in: []*tensor.Tensor{tf(sh(2, 2), -1, 1, -2, 2), tf(sh(2), 0.5, 0.25)}, want: []*tensor.Tensor{tf(sh(2, 2), -0.5, 1, -1, 2)}},
		{name: "sum", op: "Sum", in: []*tensor.Tensor{tf(sh(2), 1, 2), tf(sh(1), 10), tf(sh(2), 100, 200)}, want: []*tensor.Tensor{tf(sh(2), 111, 212)}},
		{name: "sum one input", op: "Sum", in: []*tensor.Tensor{tf(sh(2), 1, 2)}, want: []*tensor.Tensor{tf(sh(2), 1, 2)}},
		{name: "mean", op: "Mean", in: []*tensor.Tensor{tf(sh(2), 1, 2), tf(sh(2), 3, 6)}, want: []*tensor.Tensor{tf(sh(2), 2, 4)}},

		{name: "ceil of int", op: "Ceil", in: []*tensor.Tensor{badInt}, wantErr: "dtype"},
		{name: "floor of int", op: "Floor", in: []*tensor.Tensor{badInt}, wantErr: "dtype"},
		{name: "round of int", op: "Round", in: []*tensor.Tensor{badInt}, wantErr: "dtype"},
		{name: "sign of bool", op: "Sign", in: []*tensor.Tensor{tb(sh(1), T)}, wantErr: "dtype"},
		{name: "sin of int", op: "Sin", in: []*tensor.Tensor{badInt}, wantErr: "dtype"},
		{name: "cos of int", op: "Cos", in: []*tensor.Tensor{badInt}, wantErr: "dtype"},
		{name: "tan of int", op: "Tan", in: []*tensor.Tensor{badInt}, wantErr: "dtype"},
		{name: "asin of int", op: "Asin", in: []*tensor.Tensor{badInt}, wantErr: "dtype"},
		{name: "acos of int", op: "Acos", in: []*tensor.Tensor{badInt}, wantErr: "dtype"},
		{name: "atan of int", op: "Atan", in: []*tensor.Tensor{badInt}, wantErr: "dtype"},
		{name: "sinh of int", op: "Sinh", in: []*tensor.Tensor{badInt}, wantErr: "dtype"},
		{name: "cosh of int", op: "Cosh", in: []*tensor.Tensor{badInt}, wantErr: "dtype"},
		{name: "asinh of int", op: "Asinh", in: []*tensor.Tensor{badInt}, wantErr: "dtype"},
		{name: "acosh of int", op: "Acosh", in: []*tensor.Tensor{badInt}, wantErr: "dtype"},
		{name: "atanh of int", op: "Atanh", in: []*tensor.Tensor{badInt}, wantErr: "dtype"},
		{name: "softplus of int", op: "Softplus", in: []*tensor.Tensor{badInt}, wantErr: "dtype"},
		{name: "softsign of int", op: "Softsign", in: []*tensor.Tensor{badInt}, wantErr: "dtype"},
		{name: "leaky relu of int", op: "LeakyRelu", in: []*tensor.Tensor{badInt}, wantErr: "dtype"},
		{name: "thresholded relu of int", op: "ThresholdedRelu", in: []*tensor.Tensor{badInt}, wantErr: "dtype"},
		{name: "celu of int", op: "Celu", in: []*tensor.Tensor{badInt}, wantErr: "dtype"},
		{name: "selu of int", op: "Selu", in: []*tensor.Tensor{badInt}, wantErr: "dtype"},
		{name: "hard swish of int", op: "HardSwish", in: []*tensor.Tensor{badInt}, wantErr: "dtype"},
		{name: "shrink of bool", op: "Shrink", in: []*tensor.Tensor{tb(sh(1), T)}, wantErr: "dtype"},
		{name: "isnan of int", op: "IsNaN", in: []*tensor.Tensor{badInt}, wantErr: "dtype"},
		{name: "isinf of int", op: "IsInf", in: []*tensor.Tensor{badInt}, wantErr: "dtype"},
		{name: "mod of floats without fmod", op: "Mod", in: []*tensor.Tensor{tf(sh(1), 1), tf(sh(1), 2)}, wantErr: "fmod"},
		{name: "integer mod by zero", op: "Mod", in: []*tensor.Tensor{ti(sh(1), 1), ti(sh(1), 0)}, wantErr: "zero"},
		{name: "xor of ints", op: "Xor", in: []*tensor.Tensor{badInt, badInt}, wantErr: "dtype"},
		{name: "bitshift of int64", op: "BitShift", attrs: graph.Attrs{"direction": graph.String("LEFT")}, in: []*tensor.Tensor{badInt, badInt}, wantErr: "unsigned"},
		{name: "bitshift up", op: "BitShift", attrs: graph.Attrs{"direction": graph.String("UP")}, in: []*tensor.Tensor{tu(tensor.Uint8, sh(1), 1), tu(tensor.Uint8, sh(1), 1)}, wantErr: "LEFT or RIGHT"},
		{name: "greater or equal of mixed types", op: "GreaterOrEqual", in: []*tensor.Tensor{tf(sh(1), 1), badInt}, wantErr: "dtype"},
		{name: "less or equal of bools", op: "LessOrEqual", in: []*tensor.Tensor{tb(sh(1), T), tb(sh(1), F)}, wantErr: "dtype"},
		{name: "prelu slope wider than x", op: "PRelu", in: []*tensor.Tensor{tf(sh(2), 1, 2), tf(sh(2, 2), 1, 2, 3, 4)}, wantErr: "slope"},
		{name: "sum of ints", op: "Sum", in: []*tensor.Tensor{badInt, badInt}, wantErr: "dtype"},
		{name: "mean of mismatched shapes", op: "Mean", in: []*tensor.Tensor{tf(sh(2), 1, 2), tf(sh(3), 1, 2, 3)}, wantErr: "broadcast"},
		{name: "float64 where the op does not take it", op: "Sin", in: []*tensor.Tensor{td(sh(1), 1)}, wantErr: "does not take"},
	}
}
