package graph_test

import (
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

func init() {
	goldenSets["reduce"] = reduceCases
	goldenSets["index"] = indexCases
}

// reduceCases: numpy's answers (np.min, np.prod, np.linalg.norm, np.argmax, ...) on the same
// inputs, and ONNX's documented examples for TopK and LogSoftmax.
func reduceCases() []evalCase {
	x := tf(sh(2, 3), 1, -2, 3, -4, 5, -6)
	keep0 := graph.Attrs{"axes": graph.Ints(1), "keepdims": graph.Int(0)}
	return []evalCase{
		{name: "min", op: "ReduceMin", attrs: keep0, in: []*tensor.Tensor{x}, want: []*tensor.Tensor{tf(sh(2), -2, -6)}},
		{name: "min all keepdims", op: "ReduceMin", in: []*tensor.Tensor{x}, want: []*tensor.Tensor{tf(sh(1, 1), -6)}},
		{name: "min axes input", op: "ReduceMin", in: []*tensor.Tensor{x, ti(sh(1), 0)}, want: []*tensor.Tensor{tf(sh(1, 3), -4, -2, -6)}},
		{name: "min int", op: "ReduceMin", attrs: keep0, in: []*tensor.Tensor{ti(sh(2, 2), 3, 1, -5, 2)}, want: []*tensor.Tensor{ti(sh(2), 1, -5)}},
		{name: "prod", op: "ReduceProd", attrs: keep0, in: []*tensor.Tensor{x}, want: []*tensor.Tensor{tf(sh(2), -6, 120)}},
		{name: "l1", op: "ReduceL1", attrs: keep0, in: []*tensor.Tensor{x}, want: []*tensor.Tensor{tf(sh(2), 6, 15)}},
		{name: "l2", op: "ReduceL2", attrs: keep0, in: []*tensor.Tensor{tf(sh(2, 2), 3, 4, 6, 8)}, want: []*tensor.Tensor{tf(sh(2), 5, 10)}},
		{name: "sum square", op: "ReduceSumSquare", attrs: keep0, in: []*tensor.Tensor{x}, want: []*tensor.Tensor{tf(sh(2), 14, 77)}},
		{name: "log sum", op: "ReduceLogSum", attrs: keep0, in: []*tensor.Tensor{tf(sh(2, 2), 1, 1.7182817, 2, 5.389056)}, want: []*tensor.Tensor{tf(sh(2), 1, 2)}},
		{name: "log sum exp", op: "ReduceLogSumExp", attrs: keep0, in: []*tensor.Tensor{tf(sh(2, 2), 0, 0, 1000, 1000)}, want: []*tensor.Tensor{tf(sh(2), 0.6931472, 1000.6931)}},
		{name: "log sum exp float64", op: "ReduceLogSumExp", attrs: keep0, in: []*tensor.Tensor{td(sh(1, 2), 1e-20, 0)}, want: []*tensor.Tensor{td(sh(1), 0.69314718055994531)}},
		{name: "noop", op: "ReduceProd", attrs: graph.Attrs{"noop_with_empty_axes": graph.Int(1)}, in: []*tensor.Tensor{x}, want: []*tensor.Tensor{x}},
		{name: "argmax", op: "ArgMax", attrs: graph.Attrs{"axis": graph.Int(1)}, in: []*tensor.Tensor{tf(sh(2, 3), 1, 3, 3, 5, 4, 5)}, want: []*tensor.Tensor{ti(sh(2, 1), 1, 0)}},
		{name: "argmax last index", op: "ArgMax", attrs: graph.Attrs{"axis": graph.Int(1), "keepdims": graph.Int(0), "select_last_index": graph.Int(1)},
			in: []*tensor.Tensor{tf(sh(2, 3), 1, 3, 3, 5, 4, 5)}, want: []*tensor.Tensor{ti(sh(2), 2, 2)}},
		{name: "argmin", op: "ArgMin", attrs: graph.Attrs{"keepdims": graph.Int(0)}, in: []*tensor.Tensor{ti(sh(2, 2), 3, 1, -5, 2)}, want: []*tensor.Tensor{ti(sh(2), 1, 0)}},
		{name: "log softmax", op: "LogSoftmax", in: []*tensor.Tensor{tf(sh(1, 3), -1, 0, 1)}, want: []*tensor.Tensor{tf(sh(1, 3), -2.407606, -1.4076059, -0.40760595)}},
		{name: "hardmax", op: "Hardmax", in: []*tensor.Tensor{tf(sh(2, 3), 3, 0, 3, 1, 2, 0)}, want: []*tensor.Tensor{tf(sh(2, 3), 1, 0, 0, 0, 1, 0)}},
		{name: "topk", op: "TopK", in: []*tensor.Tensor{tf(sh(2, 4), 0, 1, 2, 3, 4, 7, 6, 7), ti(sh(1), 3)}, want: []*tensor.Tensor{tf(sh(2, 3), 3, 2, 1, 7, 7, 6), ti(sh(2, 3), 3, 2, 1, 1, 3, 2)}},
		{name: "topk smallest axis 0", op: "TopK", attrs: graph.Attrs{"axis": graph.Int(0), "largest": graph.Int(0)}, in: []*tensor.Tensor{ti(sh(3, 1), 5, -1, 2), ti(sh(1), 2)},
			want: []*tensor.Tensor{ti(sh(2, 1), -1, 2), ti(sh(2, 1), 1, 2)}},

		{name: "l2 of ints", op: "ReduceL2", in: []*tensor.Tensor{ti(sh(1), 1)}, wantErr: "float"},
		{name: "min of bools", op: "ReduceMin", in: []*tensor.Tensor{tb(sh(1), T)}, wantErr: "dtype"},
		{name: "prod axis out of range", op: "ReduceProd", attrs: graph.Attrs{"axes": graph.Ints(2)}, in: []*tensor.Tensor{x}, wantErr: "axis"},
		{name: "l1 of bools", op: "ReduceL1", in: []*tensor.Tensor{tb(sh(1), T)}, wantErr: "dtype"},
		{name: "sum square of bools", op: "ReduceSumSquare", in: []*tensor.Tensor{tb(sh(1), T)}, wantErr: "dtype"},
		{name: "log sum of ints", op: "ReduceLogSum", in: []*tensor.Tensor{ti(sh(1), 1)}, wantErr: "float"},
		{name: "log sum exp of ints", op: "ReduceLogSumExp", in: []*tensor.Tensor{ti(sh(1), 1)}, wantErr: "float"},
		{name: "argmax axis out of range", op: "ArgMax", attrs: graph.Attrs{"axis": graph.Int(2)}, in: []*tensor.Tensor{x}, wantErr: "axis"},
		{name: "argmin of bools", op: "ArgMin", in: []*tensor.Tensor{tb(sh(1), T)}, wantErr: "dtype"},
		{name: "log softmax of ints", op: "LogSoftmax", in: []*tensor.Tensor{ti(sh(1), 1)}, wantErr: "dtype"},
		{name: "hardmax axis out of range", op: "Hardmax", attrs: graph.Attrs{"axis": graph.Int(3)}, in: []*tensor.Tensor{x}, wantErr: "axis"},
		{name: "topk k too large", op: "TopK", in: []*tensor.Tensor{x, ti(sh(1), 4)}, nOut: 2, wantErr: "outside"},
	}
}

// indexCases: ONNX's documented examples (GatherElements, GatherND, ScatterElements, OneHot,
// NonZero, Compress, EyeLike) and numpy's answers.
func indexCases() []evalCase {
	return []evalCase{
		{name: "gather elements axis 1", op: "GatherElements", attrs: graph.Attrs{"axis": graph.Int(1)},
			in: []*tensor.Tensor{tf(sh(2, 2), 1, 2, 3, 4), ti(sh(2, 2), 0, 0, 1, 0)}, want: []*tensor.Tensor{tf(sh(2, 2), 1, 1, 4, 3)}},
		{name: "gather elements negative", op: "GatherElements",
			in: []*tensor.Tensor{tf(sh(3, 3), 1, 2, 3, 4, 5, 6, 7, 8, 9), ti(sh(2, 3), -1, -2, 0, -2, 0, 0)}, want: []*tensor.Tensor{tf(sh(2, 3), 7, 5, 3, 4, 2, 3)}},
		{name: "gather nd", op: "GatherND", in: []*tensor.Tensor{ti(sh(2, 2), 0, 1, 2, 3), ti(sh(2, 2), 0, 0, 1, 1)}, want: []*tensor.Tensor{ti(sh(2), 0, 3)}},
		{name: "gather nd slices", op: "GatherND", in: []*tensor.Tensor{ti(sh(2, 2), 0, 1, 2, 3), ti(sh(2, 1), 1, 0)}, want: []*tensor.Tensor{ti(sh(2, 2), 2, 3, 0, 1)}},
		{name: "gather nd batch", op: "GatherND", attrs: graph.Attrs{"batch_dims": graph.Int(1)},
			in: []*tensor.Tensor{ti(sh(2, 2, 2), 0, 1, 2, 3, 4, 5, 6, 7), ti(sh(2, 1), 1, 0)}, want: []*tensor.Tensor{ti(sh(2, 2), 2, 3, 4, 5)}},
		{name: "scatter elements", op: "ScatterElements", attrs: graph.Attrs{"axis": graph.Int(1)},
			in: []*tensor.Tensor{tf(sh(1, 5), 1, 2, 3, 4, 5), ti(sh(1, 2), 1, 3), tf(sh(1, 2), 1.1, 2.1)}, want: []*tensor.Tensor{tf(sh(1, 5), 1, 1.1, 3, 2.1, 5)}},
		{name: "scatter elements add duplicates", op: "ScatterElements", attrs: graph.Attrs{"axis": graph.Int(1), "reduction": graph.String("add")},
			in: []*tensor.Tensor{tf(sh(1, 5), 1, 2, 3, 4, 5), ti(sh(1, 2), 1, 1), tf(sh(1, 2), 1.1, 2.1)}, want: []*tensor.Tensor{tf(sh(1, 5), 1, 5.2, 3, 4, 5)}},
		{name: "one hot", op: "OneHot", in: []*tensor.Tensor{ti(sh(3), 1, -1, 5), ti(sh(), 3), tf(sh(2), 0, 9)}, want: []*tensor.Tensor{tf(sh(3, 3), 0, 9, 0, 0, 0, 9, 0, 0, 0)}},
		{name: "one hot axis 0 float indices", op: "OneHot", attrs: graph.Attrs{"axis": graph.Int(0)},
			in: []*tensor.Tensor{tf(sh(2), 0, 1.9), tf(sh(1), 2), ti(sh(2), -1, 1)}, want: []*tensor.Tensor{ti(sh(2, 2), 1, -1, -1, 1)}},
		{name: "nonzero", op: "NonZero", in: []*tensor.Tensor{tf(sh(2, 2), 1, 0, 1, 1)}, want: []*tensor.Tensor{ti(sh(2, 3), 0, 1, 1, 0, 0, 1)}},
		{name: "compress axis", op: "Compress", attrs: graph.Attrs{"axis": graph.Int(0)},
			in: []*tensor.Tensor{tf(sh(3, 2), 1, 2, 3, 4, 5, 6), tb(sh(3), F, T, T)}, want: []*tensor.Tensor{tf(sh(2, 2), 3, 4, 5, 6)}},
		{name: "compress flat", op: "Compress", in: []*tensor.Tensor{tf(sh(2, 2), 1, 2, 3, 4), tb(sh(3), F, T, T)}, want: []*tensor.Tensor{tf(sh(2), 2, 3)}},
		{name: "size", op: "Size", in: []*tensor.Tensor{tf(sh(2, 3), 1, 2, 3, 4, 5, 6)}, want: []*tensor.Tensor{ti(sh(), 6)}},
		{name: "eye like k", op: "EyeLike", attrs: graph.Attrs{"k": graph.Int(1)}, in: []*tensor.Tensor{ti(sh(2, 3), 0, 0, 0, 0, 0, 0)}, want: []*tensor.Tensor{ti(sh(2, 3), 0, 1, 0, 0, 0, 1)}},
		{name: "eye like float64", op: "EyeLike", attrs: graph.Attrs{"dtype": graph.Int(int64(tensor.Float64))}, in: []*tensor.Tensor{tf(sh(2, 2), 0, 0, 0, 0)}, want: []*tensor.Tensor{td(sh(2, 2), 1, 0, 0, 1)}},
		{name: "cast like", op: "CastLike", in: []*tensor.Tensor{tf(sh(2), 1.9, -1.9), ti32(sh(1), 0)}, want: []*tensor.Tensor{ti32(sh(2), 1, -1)}},
		{name: "cast like float64", op: "CastLike", in: []*tensor.Tensor{tf(sh(1), 0.1), td(sh(1), 0)}, want: []*tensor.Tensor{td(sh(1), float64(float32(0.1)))}},

		{name: "gather elements out of range", op: "GatherElements", in: []*tensor.Tensor{tf(sh(2), 1, 2), ti(sh(1), 2)}, wantErr: "out of range"},
		{name: "gather nd float indices", op: "GatherND", in: []*tensor.Tensor{tf(sh(2), 1, 2), tf(sh(1, 1), 0)}, wantErr: "int64"},
		{name: "scatter elements reduction", op: "ScatterElements", attrs: graph.Attrs{"reduction": graph.String("avg")},
			in: []*tensor.Tensor{tf(sh(2), 1, 2), ti(sh(1), 0), tf(sh(1), 1)}, wantErr: "reduction"},
		{name: "one hot values shape", op: "OneHot", in: []*tensor.Tensor{ti(sh(1), 0), ti(sh(), 2), tf(sh(3), 0, 1, 2)}, wantErr: "values"},
		{name: "compress int condition", op: "Compress", in: []*tensor.Tensor{tf(sh(2), 1, 2), ti(sh(2), 0, 1)}, wantErr: "bool"},
		{name: "eye like rank 3", op: "EyeLike", in: []*tensor.Tensor{tf(sh(1, 1, 1), 0)}, wantErr: "rank"},
		{name: "nonzero of", op: "NonZero", in: []*tensor.Tensor{{DType: tensor.Float32, Shape: sh(2), F32: []float32{1}}}, wantErr: "holds"},
		{name: "size of", op: "Size", in: []*tensor.Tensor{{DType: tensor.Float32, Shape: sh(2), F32: []float32{1}}}, wantErr: "holds"},
		{name: "cast like to a string-typed", op: "CastLike", in: []*tensor.Tensor{tf(sh(1), 1), {DType: 8, Shape: sh(1)}}, wantErr: "dtype"},
	}
}

func init() { goldenSets["instancenorm"] = instanceNormCases }

// instanceNormCases: numpy's answers on the same inputs.
func instanceNormCases() []evalCase {
	x := tf(sh(1, 2, 3), 1, 2, 3, 4, 4, 4)
	return []evalCase{
		{name: "two channels", op: "InstanceNormalization", in: []*tensor.Tensor{x, tf(sh(2), 2, 1), tf(sh(2), 0, 5)},
			want: []*tensor.Tensor{tf(sh(1, 2, 3), -2.4494715, 0, 2.4494715, 5, 5, 5)}},
		{name: "global max pool", op: "GlobalMaxPool", in: []*tensor.Tensor{tf(sh(1, 2, 2), 1, 3, -1, -2)}, want: []*tensor.Tensor{tf(sh(1, 2, 1), 3, -1)}},
		{name: "scale of the wrong size", op: "InstanceNormalization", in: []*tensor.Tensor{x, tf(sh(3), 1, 1, 1), tf(sh(2), 0, 0)}, wantErr: "channels"},
		{name: "rank 2", op: "GlobalMaxPool", in: []*tensor.Tensor{tf(sh(1, 2), 1, 2)}, wantErr: "spatial"},
	}
}

func init() { goldenSets["dropout"] = dropoutCases }

func dropoutCases() []evalCase {
	x := tf(sh(3), 1, 2, 3)
	return []evalCase{
		{name: "inference", op: "Dropout", in: []*tensor.Tensor{x, tf(sh(), 0.5), tb(sh(), F)}, want: []*tensor.Tensor{x, tb(sh(3), T, T, T)}},
		{name: "training, ratio 0", op: "Dropout", in: []*tensor.Tensor{x, tf(sh(), 0), tb(sh(), T)}, want: []*tensor.Tensor{x, tb(sh(3), T, T, T)}},
		{name: "no mode given", op: "Dropout", in: []*tensor.Tensor{x}, want: []*tensor.Tensor{x}},
		{name: "training", op: "Dropout", in: []*tensor.Tensor{x, tf(sh(), 0.1), tb(sh(), T)}, nOut: 2, wantErr: "at random"},
		{name: "int mode", op: "Dropout", in: []*tensor.Tensor{x, tf(sh(), 0.1), ti(sh(), 1)}, wantErr: "bool"},
	}
}

func init() { goldenSets["loss"] = lossCases }

// lossCases: torch.nn.functional.nll_loss and cross_entropy's definitions on small inputs.
func lossCases() []evalCase {
	logp := tf(sh(2, 3), -1, -2, -3, -0.5, -1.5, -2.5)
	return []evalCase{
		{name: "mean", op: "NegativeLogLikelihoodLoss", in: []*tensor.Tensor{logp, ti(sh(2), 2, 0)}, want: []*tensor.Tensor{tf(sh(), 1.75)}},
		{name: "sum weighted", op: "NegativeLogLikelihoodLoss", attrs: graph.Attrs{"reduction": graph.String("sum")},
			in: []*tensor.Tensor{logp, ti(sh(2), 2, 0), tf(sh(3), 2, 1, 0.5)}, want: []*tensor.Tensor{tf(sh(), 2.5)}},
		{name: "mean weighted ignoring", op: "NegativeLogLikelihoodLoss", attrs: graph.Attrs{"ignore_index": graph.Int(0)},
			in: []*tensor.Tensor{logp, ti(sh(2), 2, 0), tf(sh(3), 2, 1, 0.5)}, want: []*tensor.Tensor{tf(sh(), 3)}},
		{name: "none over d1", op: "NegativeLogLikelihoodLoss", attrs: graph.Attrs{"reduction": graph.String("none")},
			in: []*tensor.Tensor{tf(sh(1, 2, 2), -1, -2, -3, -4), ti(sh(1, 2), 1, 0)}, want: []*tensor.Tensor{tf(sh(1, 2), 3, 2)}},
		{name: "cross entropy", op: "SoftmaxCrossEntropyLoss", in: []*tensor.Tensor{tf(sh(1, 2), 0, 0), ti(sh(1), 1)},
			want: []*tensor.Tensor{tf(sh(), 0.6931472), tf(sh(1, 2), -0.6931472, -0.6931472)}},
		{name: "target out of range", op: "NegativeLogLikelihoodLoss", in: []*tensor.Tensor{logp, ti(sh(2), 3, 0)}, wantErr: "outside"},
		{name: "float target", op: "SoftmaxCrossEntropyLoss", in: []*tensor.Tensor{logp, tf(sh(2), 1, 0)}, nOut: 2, wantErr: "int64"},
	}
}
