package onnx

import (
	"fmt"
	"strconv"

	"github.com/zoo-dev/zoo/onnx/onnxpb"
	"github.com/zoo-dev/zoo/zoo/graph"
	"github.com/zoo-dev/zoo/zoo/tensor"
)

// Version adapters for import. A file at ai.onnx opset 1 to MaxOpset (before 7, with the
// operators of sameBefore7 only) is brought into the one form graph's op table holds before anything else reads its nodes, following the rules of
// ONNX's own version converter (onnx/version_converter/adapters) for the operators zoo runs:
//
//   - Slice-1..9: starts, ends and axes attributes become inputs (slice_9_10).
//   - Squeeze-1..12, Unsqueeze-1..12: the axes attribute becomes an input
//     (axes_attribute_to_input, 12→13).
//   - Split-2..12: the split attribute becomes an input (split_12_13). From 18, Split
//     without split takes num_outputs, which the table reads as it is.
//   - ReduceSum-1..12: the axes attribute becomes an input (axes_attribute_to_input, 12→13).
//     ReduceMean-18+, ReduceMax-18+ and the other reductions at 18+ (ReduceMin, ReduceProd,
//     ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum, ReduceLogSumExp): a constant axes
//     input becomes the attribute (axes_input_to_attribute, 18→17), the form the table's
//     builders and backends keep; an axes input computed at run time stays an input, which the
//     table also reads.
//   - Softmax-1..12 (and LogSoftmax and Hardmax before 13) coerces its input to 2-D at axis
//     (default 1) and normalises each row (softmax_12_13): where axis is the last axis it is Softmax-13 over that axis; otherwise
//     the node becomes Reshape(x, [0]·axis ++ [-1]) → Softmax(-1) → Reshape(·, Shape(x)).
//   - Flatten (1, 9, 11, 13; not in the table) becomes Reshape, with Transposes for an axis
//     above 1, and for a negative axis (counted from the end) a Reshape to the product of the
//     leading dimensions computed from Shape (all rank-free).
//   - Clip-6's min and max attributes become the optional inputs of Clip-11 on (clip).
//   - Pad-2's pads and value attributes become the inputs of Pad-11 (pad_10_11).
//   - Upsample-7 (scales attribute), Upsample-9 and Resize-10 (scales input) become Resize-11
//     with an empty roi, coordinate_transformation_mode asymmetric and nearest_mode floor:
//     their definition (x_in = x_out / scale, nearest rounding down), which ONNX Runtime
//     follows. ONNX 1.12's converter keeps Resize-11's defaults (half_pixel) instead, which
//     changes the numbers, so these cases are checked against numpy and ONNX Runtime only.
//   - BatchNormalization-7's spatial attribute: 1 is the table's (opset-9) form, 0 is written
//     as x·a + b (batchNorm).
//   - Dropout-7..22 in inference (no training_mode, or a constant false, or a constant true
//     with a constant ratio of 0) is the identity; its mask output, if used, is all true
//     (ConstantOfShape). A training_mode given at run time keeps the op table's Dropout, which
//     refuses training mode with a ratio above 0 then; a constant one with another ratio is
//     refused here.
//
// Every other operator of the table kept its meaning from opset 7 on (later versions only
// added element types, or optional inputs with the old behaviour as default: Gemm-11's optional
// C, Reshape-14's allowzero 0, Cast-19's saturate for float8, Shape-15's start and end).

// reduceOps are the reductions whose axes became an input at opset 18.
var reduceOps = map[string]bool{"ReduceMean": true, "ReduceMax": true, "ReduceMin": true, "ReduceProd": true, "ReduceL1": true,
	"ReduceL2": true, "ReduceSumSquare": true, "ReduceLogSum": true, "ReduceLogSumExp": true}

// MinImportOpset is the oldest ai.onnx opset Import reads (MinOpset is the oldest Export
// writes). Below opset 7 it reads only the operators listed in sameBefore7.
const MinImportOpset = 1

// sameBefore7 are the operators a file at opsets 1 to 6 may use: each means there what the
// op table's form means (their versions before 7 differ only by the legacy consumed_inputs
// attribute, which is dropped, or by what the adapters below rewrite anyway: Softmax's 2-D
// coercion, Squeeze's and Slice's attributes, Clip's bounds, Flatten, Reciprocal; Concat
// before 4, whose axis defaults to 1; Sum, Max, Min and Mean before 8, which only lacked
// broadcasting). Any other operator in such a file is refused by name: Add, Mul and the other
// arithmetic broadcast by the broadcast and axis attributes then, Reshape took its shape as an
// attribute, Cast its type as a string, Dropout and BatchNormalization were in training mode
// unless is_test, and so on.
var sameBefore7 = map[string]bool{
	"Abs": true, "Neg": true, "Exp": true, "Log": true, "Sqrt": true, "Sigmoid": true, "Tanh": true, "Relu": true,
	"Ceil": true, "Floor": true, "Reciprocal": true, "Elu": true, "HardSigmoid": true, "Selu": true, "LeakyRelu": true,
	"Softplus": true, "Softsign": true, "Not": true, "Identity": true, "Constant": true, "Shape": true, "Size": true,
	"Transpose": true, "MatMul": true, "Softmax": true, "LogSoftmax": true, "Hardmax": true,
	"InstanceNormalization": true, "GlobalAveragePool": true, "GlobalMaxPool": true, "Flatten": true,
	"Squeeze": true, "Unsqueeze": true, "Slice": true, "Gather": true, "Concat": true, "Clip": true,
	"Sum": true, "Max": true, "Min": true, "Mean": true, "ArgMax": true, "ArgMin": true,
	"ReduceMax": true, "ReduceMin": true, "ReduceMean": true, "ReduceSum": true, "ReduceProd": true, "ReduceL1": true,
	"ReduceL2": true, "ReduceSumSquare": true, "ReduceLogSum": true, "ReduceLogSumExp": true,
}

// legacy brings a node of a file before opset 7 to its opset-7 form, or refuses it.
func (u *upgrader) legacy(np *onnxpb.NodeProto) error {
	op := np.GetOpType()
	if !sameBefore7[op] {
		return fmt.Errorf("%s is not read before opset 7 (its meaning changed at 7 or later; zoo reads only ops that kept theirs from files that old); re-export with opset_version=17", op)
	}
	attrs := np.Attribute[:0]
	for _, a := range np.GetAttribute() {
		if a.GetName() != "consumed_inputs" {
			attrs = append(attrs, a)
		}
	}
	np.Attribute = attrs
	if op == "Concat" && u.opset < 4 && findAttr(np, "axis") == nil {
		np.Attribute = append(np.Attribute, &onnxpb.AttributeProto{Name: "axis", Type: onnxpb.AttributeProto_INT, I: 1})
	}
	return nil
}

// constPrefixAdapter names the initializers that the adapters create (builder constants, so
// that ParamCount and StateDict leave them out).
const constPrefixAdapter = "const::opset/"

// upgrader rewrites one graph's nodes in place.
type upgrader struct {
	g     *onnxpb.GraphProto
	opset int
	// inits and consts index the initializers and Constant outputs by name.
	inits  map[string]*onnxpb.TensorProto
	consts map[string]*onnxpb.NodeProto
	uses   map[string]int
	// folded marks the values some of whose uses the adapters removed.
	folded map[string]bool
	names  map[string]bool
	n      int
	// coerced holds the Softmax-1..12 nodes by their output, with their axis.
	coerced map[string]int64
}

// upgradeNodes applies the adapters to gp (a model at ai.onnx opset) and returns the
// Softmax nodes whose coerced axis fixCoercedSoftmax must resolve once ranks are known.
func upgradeNodes(gp *onnxpb.GraphProto, opset int) (map[string]int64, error) {
	u := &upgrader{g: gp, opset: opset, inits: map[string]*onnxpb.TensorProto{}, consts: map[string]*onnxpb.NodeProto{},
		uses: map[string]int{}, folded: map[string]bool{}, names: map[string]bool{}, coerced: map[string]int64{}}
	for _, tp := range gp.GetInitializer() {
		u.inits[tp.GetName()] = tp
		u.names[tp.GetName()] = true
	}
	for _, vi := range gp.GetInput() {
		u.names[vi.GetName()] = true
	}
	for _, np := range gp.GetNode() {
		if np.GetOpType() == "Constant" && isONNXDomain(np.GetDomain()) && len(np.GetOutput()) == 1 {
			u.consts[np.GetOutput()[0]] = np
		}
		for _, in := range np.GetInput() {
			u.uses[in]++
		}
		for _, o := range np.GetOutput() {
			u.names[o] = true
		}
	}
	for _, o := range gp.GetOutput() {
		u.uses[o.GetName()]++
	}
	var out []*onnxpb.NodeProto
	for i, np := range gp.GetNode() {
		if !isONNXDomain(np.GetDomain()) {
			out = append(out, np)
			continue
		}
		nodes, err := u.upgrade(np)
		if err != nil {
			return nil, fmt.Errorf("%s at opset %d: %w", nodeWhere(i, np), opset, err)
		}
		out = append(out, nodes...)
	}
	gp.Node = u.dropDead(out)
	return u.coerced, nil
}

func isONNXDomain(d string) bool { return d == "" || d == "ai.onnx" }

// upgrade returns the nodes that replace np.
func (u *upgrader) upgrade(np *onnxpb.NodeProto) ([]*onnxpb.NodeProto, error) {
	if u.opset < 7 {
		if err := u.legacy(np); err != nil {
			return nil, err
		}
	}
	switch op := np.GetOpType(); {
	case op == "Slice" && u.opset < 10:
		starts, ok1 := takeInts(np, "starts")
		ends, ok2 := takeInts(np, "ends")
		if !ok1 || !ok2 || len(np.GetInput()) != 1 {
			return nil, fmt.Errorf("Slice-1 needs one input and the starts and ends attributes")
		}
		in := []string{np.GetInput()[0], u.constInts(np, "starts", starts), u.constInts(np, "ends", ends)}
		if axes, ok := takeInts(np, "axes"); ok {
			in = append(in, u.constInts(np, "axes", axes))
		}
		np.Input = in
	case (op == "Squeeze" || op == "Unsqueeze") && u.opset < 13,
		op == "ReduceSum" && u.opset < 13:
		if axes, ok := takeInts(np, "axes"); ok {
			if len(np.GetInput()) != 1 {
				return nil, fmt.Errorf("%s has both an axes attribute and %d inputs", op, len(np.GetInput()))
			}
			np.Input = append(np.Input, u.constInts(np, "axes", axes))
		} else if op == "Unsqueeze" {
			return nil, fmt.Errorf("Unsqueeze needs the axes attribute before opset 13")
		}
	case op == "Split" && u.opset < 13:
		if split, ok := takeInts(np, "split"); ok {
			if len(np.GetInput()) != 1 {
				return nil, fmt.Errorf("Split has both a split attribute and %d inputs", len(np.GetInput()))
			}
			np.Input = append(np.Input, u.constInts(np, "split", split))
		}
	case reduceOps[op] && u.opset >= 18:
		if len(np.GetInput()) < 2 {
			break
		}
		if np.GetInput()[1] == "" {
			np.Input = np.Input[:1]
			break
		}
		if axes, ok := u.constValue(np.GetInput()[1]); ok {
			u.unuse(np.GetInput()[1])
			np.Input = np.Input[:1]
			if len(axes) > 0 {
				np.Attribute = append(np.Attribute, &onnxpb.AttributeProto{Name: "axes", Type: onnxpb.AttributeProto_INTS, Ints: axes})
			}
		}
	case (op == "Softmax" || op == "LogSoftmax" || op == "Hardmax") && u.opset < 13:
		axis := int64(1)
		if a := findAttr(np, "axis"); a != nil {
			axis = a.GetI()
		}
		if len(np.GetOutput()) == 1 {
			u.coerced[np.GetOutput()[0]] = axis
		}
	case op == "Dropout":
		return u.dropout(np)
	case op == "Flatten":
		return u.flatten(np)
	case op == "Clip":
		return u.clip(np)
	case op == "Pad" && u.opset < 11:
		return u.pad(np)
	case op == "Upsample", op == "Resize" && u.opset < 11:
		return u.upsample(np)
	case op == "BatchNormalization":
		return u.batchNorm(np)
	case op == "Einsum":
		return u.einsum(np)
	case op == "Reciprocal":
		return u.reciprocal(np)
	}
	return []*onnxpb.NodeProto{np}, nil
}

// dropout turns an inference-mode Dropout into Identity (and a true mask).
func (u *upgrader) dropout(np *onnxpb.NodeProto) ([]*onnxpb.NodeProto, error) {
	in := np.GetInput()
	if len(in) == 0 || in[0] == "" {
		return nil, fmt.Errorf("Dropout has no data input")
	}
	if a := findAttr(np, "is_test"); a != nil && a.GetI() == 0 {
		return nil, fmt.Errorf("Dropout in training mode (is_test 0) is not supported")
	}
	if len(in) > 2 && in[2] != "" {
		mode, ok := u.constValue(in[2])
		if !ok {
			// Decided at run time: the op table's Dropout, the identity unless in training
			// mode with a ratio above 0, which it refuses then.
			return []*onnxpb.NodeProto{np}, nil
		}
		if len(mode) != 1 || mode[0] != 0 {
			if ratio, ok := u.constFloat(in, 1); !ok || ratio != 0 {
				return nil, fmt.Errorf("Dropout's training_mode %q is true with a ratio that is not a constant 0: it drops at random, and zoo runs inference", in[2])
			}
		}
	}
	for _, x := range in[1:] {
		if x != "" {
			u.unuse(x)
		}
	}
	id := &onnxpb.NodeProto{Name: np.GetName(), OpType: "Identity", Input: []string{in[0]}, Output: []string{np.GetOutput()[0]}}
	nodes := []*onnxpb.NodeProto{id}
	if len(np.GetOutput()) > 1 && np.GetOutput()[1] != "" && u.uses[np.GetOutput()[1]] > 0 {
		shape := u.fresh(np, "mask_shape")
		nodes = append(nodes,
			&onnxpb.NodeProto{Name: shape, OpType: "Shape", Input: []string{in[0]}, Output: []string{shape}},
			&onnxpb.NodeProto{Name: np.GetName() + "/mask", OpType: "ConstantOfShape", Input: []string{shape}, Output: []string{np.GetOutput()[1]},
				Attribute: []*onnxpb.AttributeProto{{Name: "value", Type: onnxpb.AttributeProto_TENSOR,
					T: &onnxpb.TensorProto{Dims: []int64{1}, DataType: int32(tensor.Bool), RawData: []byte{1}}}}})
	}
	return nodes, nil
}

// flatten writes Flatten (which the table does not hold) with Reshape, rank-free: axis 0 and
// 1 are one Reshape; a larger axis a merges the trailing axes first, brings that axis to the
// front, merges the leading ones and transposes back.
func (u *upgrader) flatten(np *onnxpb.NodeProto) ([]*onnxpb.NodeProto, error) {
	axis := int64(1)
	if a := findAttr(np, "axis"); a != nil {
		axis = a.GetI()
	}
	if len(np.GetInput()) != 1 || len(np.GetOutput()) != 1 {
		return nil, fmt.Errorf("Flatten needs one input and one output")
	}
	x, y := np.GetInput()[0], np.GetOutput()[0]
	reshape := func(name, in, out string, dims []int64) *onnxpb.NodeProto {
		return &onnxpb.NodeProto{Name: name, OpType: "Reshape", Input: []string{in, u.constInts(np, "shape", dims)}, Output: []string{out}}
	}
	switch {
	case axis < 0:
		// Counted from the end, without knowing the rank: the leading dimensions' product is
		// computed from the input's shape (ReduceProd of an empty slice is 1).
		shape, head, prod, dims := u.fresh(np, "shape"), u.fresh(np, "head"), u.fresh(np, "rows"), u.fresh(np, "dims")
		ints := func(name string, v int64) *onnxpb.AttributeProto {
			return &onnxpb.AttributeProto{Name: name, Type: onnxpb.AttributeProto_INTS, Ints: []int64{v}}
		}
		return []*onnxpb.NodeProto{
			{Name: shape, OpType: "Shape", Input: []string{x}, Output: []string{shape}},
			{Name: head, OpType: "Slice", Input: []string{shape, u.constInts(np, "start", []int64{0}), u.constInts(np, "end", []int64{axis})}, Output: []string{head}},
			{Name: prod, OpType: "ReduceProd", Input: []string{head}, Output: []string{prod}, Attribute: []*onnxpb.AttributeProto{ints("axes", 0)}},
			{Name: dims, OpType: "Concat", Input: []string{prod, u.constInts(np, "cols", []int64{-1})}, Output: []string{dims}, Attribute: []*onnxpb.AttributeProto{{Name: "axis", Type: onnxpb.AttributeProto_INT, I: 0}}},
			{Name: np.GetName(), OpType: "Reshape", Input: []string{x, dims}, Output: []string{y}},
		}, nil
	case axis == 0:
		return []*onnxpb.NodeProto{reshape(np.GetName(), x, y, []int64{1, -1})}, nil
	case axis == 1:
		return []*onnxpb.NodeProto{reshape(np.GetName(), x, y, []int64{0, -1})}, nil
	}
	dims := make([]int64, axis+1)
	dims[axis] = -1
	perm := []int64{axis}
	for i := int64(0); i < axis; i++ {
		perm = append(perm, i)
	}
	tail, front, merged := u.fresh(np, "tail"), u.fresh(np, "front"), u.fresh(np, "merged")
	return []*onnxpb.NodeProto{
		reshape(tail, x, tail, dims),
		{Name: front, OpType: "Transpose", Input: []string{tail}, Output: []string{front}, Attribute: []*onnxpb.AttributeProto{{Name: "perm", Type: onnxpb.AttributeProto_INTS, Ints: perm}}},
		reshape(merged, front, merged, []int64{0, -1}),
		{Name: np.GetName(), OpType: "Transpose", Input: []string{merged}, Output: []string{y}, Attribute: []*onnxpb.AttributeProto{{Name: "perm", Type: onnxpb.AttributeProto_INTS, Ints: []int64{1, 0}}}},
	}, nil
}

// clip brings Clip-6's min and max attributes to the inputs of the table's Clip (opset 11 on:
// optional scalar inputs, "" for an absent bound).
func (u *upgrader) clip(np *onnxpb.NodeProto) ([]*onnxpb.NodeProto, error) {
	if u.opset >= 11 {
		return []*onnxpb.NodeProto{np}, nil
	}
	if len(np.GetInput()) != 1 {
		return nil, fmt.Errorf("Clip-6 takes one input, has %d", len(np.GetInput()))
	}
	bound := func(name string) string {
		a := findAttr(np, name)
		if a == nil {
			return ""
		}
		n := u.fresh(np, name)
		tp := &onnxpb.TensorProto{Name: n, DataType: int32(tensor.Float32), RawData: bytesOf([]float32{a.GetF()})}
		u.g.Initializer = append(u.g.Initializer, tp)
		u.inits[n] = tp
		u.uses[n]++
		return n
	}
	lo, hi := bound("min"), bound("max")
	var attrs []*onnxpb.AttributeProto
	for _, a := range np.GetAttribute() {
		if a.GetName() != "min" && a.GetName() != "max" {
			attrs = append(attrs, a)
		}
	}
	np.Attribute = attrs
	np.Input = append(np.Input, lo, hi)
	return []*onnxpb.NodeProto{np}, nil
}

// pad brings Pad-2 (pads and value attributes) to Pad-11's inputs. A value of 0, the
// default, needs no input (Pad-11 pads with zeros of any dtype); another value is a float32
// scalar, the dtype of the float data Pad-2 pads.
func (u *upgrader) pad(np *onnxpb.NodeProto) ([]*onnxpb.NodeProto, error) {
	if len(np.GetInput()) != 1 {
		return nil, fmt.Errorf("Pad-2 takes one input, has %d", len(np.GetInput()))
	}
	pads, ok := takeInts(np, "pads")
	if !ok {
		return nil, fmt.Errorf("Pad-2 needs the pads attribute")
	}
	np.Input = append(np.Input, u.constInts(np, "pads", pads))
	var attrs []*onnxpb.AttributeProto
	for _, a := range np.GetAttribute() {
		if a.GetName() != "value" {
			attrs = append(attrs, a)
			continue
		}
		if a.GetF() != 0 {
			n := u.fresh(np, "value")
			tp := &onnxpb.TensorProto{Name: n, DataType: int32(tensor.Float32), RawData: bytesOf([]float32{a.GetF()})}
			u.g.Initializer = append(u.g.Initializer, tp)
			u.inits[n] = tp
			u.uses[n]++
			np.Input = append(np.Input, n)
		}
	}
	np.Attribute = attrs
	return []*onnxpb.NodeProto{np}, nil
}

// upsample rewrites Upsample-7/9 and Resize-10 as Resize-11 (see the list above).
func (u *upgrader) upsample(np *onnxpb.NodeProto) ([]*onnxpb.NodeProto, error) {
	in := np.GetInput()
	var scales string
	switch {
	case np.GetOpType() == "Upsample" && len(in) == 1:
		a := findAttr(np, "scales")
		if a == nil {
			return nil, fmt.Errorf("Upsample-7 needs the scales attribute")
		}
		scales = u.fresh(np, "scales")
		tp := &onnxpb.TensorProto{Name: scales, Dims: []int64{int64(len(a.GetFloats()))}, DataType: int32(tensor.Float32), RawData: bytesOf(a.GetFloats())}
		u.g.Initializer = append(u.g.Initializer, tp)
		u.inits[scales] = tp
		u.uses[scales]++
	case len(in) == 2:
		scales = in[1]
	default:
		return nil, fmt.Errorf("%s takes X and scales, has %d inputs", np.GetOpType(), len(in))
	}
	mode := "nearest"
	if a := findAttr(np, "mode"); a != nil {
		mode = string(a.GetS())
	}
	if mode == "bilinear" { // Upsample-7's other spelling of linear
		mode = "linear"
	}
	np.OpType = "Resize"
	np.Input = []string{in[0], "", scales}
	str := func(name, v string) *onnxpb.AttributeProto {
		return &onnxpb.AttributeProto{Name: name, Type: onnxpb.AttributeProto_STRING, S: []byte(v)}
	}
	np.Attribute = []*onnxpb.AttributeProto{str("mode", mode), str("coordinate_transformation_mode", "asymmetric"), str("nearest_mode", "floor")}
	return []*onnxpb.NodeProto{np}, nil
}

// batchNorm brings BatchNormalization-7 to the table's form (opset 9: per channel on axis 1):
// spatial 1 (the default) is that form once the attribute is dropped; spatial 0, whose
// statistics have x's trailing shape (C, D1, …), is written as x·a + b with a = scale /
// sqrt(var + epsilon) and b = B − mean·a, which broadcast as they are. Opset 9 and later
// are the table's form already.
func (u *upgrader) batchNorm(np *onnxpb.NodeProto) ([]*onnxpb.NodeProto, error) {
	if u.opset >= 9 {
		return []*onnxpb.NodeProto{np}, nil
	}
	spatial := true
	var attrs []*onnxpb.AttributeProto
	for _, a := range np.GetAttribute() {
		switch a.GetName() {
		case "spatial":
			spatial = a.GetI() != 0
		default:
			attrs = append(attrs, a)
		}
	}
	if spatial {
		np.Attribute = attrs
		return []*onnxpb.NodeProto{np}, nil
	}
	return u.batchNormSpatial0(np)
}

// batchNormSpatial0 writes BatchNormalization-7 with spatial 0 as x·a + b. Training mode (the
// running statistics as used outputs) is refused.
func (u *upgrader) batchNormSpatial0(np *onnxpb.NodeProto) ([]*onnxpb.NodeProto, error) {
	in := np.GetInput()
	if len(in) != 5 {
		return nil, fmt.Errorf("BatchNormalization needs 5 inputs, has %d", len(in))
	}
	for _, o := range np.GetOutput()[1:] {
		if o != "" && u.uses[o] > 0 {
			return nil, fmt.Errorf("BatchNormalization's running statistics (output %q) exist only in training mode", o)
		}
	}
	eps := float32(1e-5)
	if a := findAttr(np, "epsilon"); a != nil {
		eps = a.GetF()
	}
	x, scale, bias, mean, variance := in[0], in[1], in[2], in[3], in[4]
	var nodes []*onnxpb.NodeProto
	node := func(what, op string, attrs []*onnxpb.AttributeProto, ins ...string) string {
		out := u.fresh(np, what)
		nodes = append(nodes, &onnxpb.NodeProto{Name: out, OpType: op, Input: ins, Output: []string{out}, Attribute: attrs})
		return out
	}
	epsName := u.fresh(np, "epsilon")
	u.g.Initializer = append(u.g.Initializer, &onnxpb.TensorProto{Name: epsName, DataType: int32(tensor.Float32), RawData: bytesOf([]float32{eps})})
	a := node("a", "Div", nil, scale, node("std", "Sqrt", nil, node("var_eps", "Add", nil, variance, epsName)))
	b := node("b", "Sub", nil, bias, node("mean_a", "Mul", nil, mean, a))
	nodes = append(nodes,
		&onnxpb.NodeProto{Name: np.GetName() + "/scale", OpType: "Mul", Input: []string{x, a}, Output: []string{u.fresh(np, "xa")}})
	nodes = append(nodes,
		&onnxpb.NodeProto{Name: np.GetName(), OpType: "Add", Input: []string{nodes[len(nodes)-1].Output[0], b}, Output: []string{np.GetOutput()[0]}})
	return nodes, nil
}

// fresh returns a value name derived from np's that no value of the graph has.
func (u *upgrader) fresh(np *onnxpb.NodeProto, what string) string {
	base := np.GetName()
	if base == "" && len(np.GetOutput()) > 0 {
		base = np.GetOutput()[0]
	}
	for {
		name := constPrefixAdapter + base + "/" + what
		if u.n > 0 {
			name += "." + strconv.Itoa(u.n)
		}
		u.n++
		if !u.names[name] {
			u.names[name] = true
			return name
		}
	}
}

// constInts adds a 1-D int64 initializer holding v and returns its name.
func (u *upgrader) constInts(np *onnxpb.NodeProto, what string, v []int64) string {
	name := u.fresh(np, what)
	tp := &onnxpb.TensorProto{Name: name, Dims: []int64{int64(len(v))}, DataType: int32(tensor.Int64), RawData: bytesOf(v)}
	u.g.Initializer = append(u.g.Initializer, tp)
	u.inits[name] = tp
	u.uses[name]++
	return name
}

// constFloat returns the value of input i of a node when it is a constant float scalar (an
// initializer or a Constant's output).
func (u *upgrader) constFloat(in []string, i int) (float64, bool) {
	if i >= len(in) || in[i] == "" {
		return 0.5, true // Dropout's default ratio
	}
	var tp *onnxpb.TensorProto
	if t, ok := u.inits[in[i]]; ok {
		tp = t
	} else if c, ok := u.consts[in[i]]; ok {
		if a := findAttr(c, "value"); a != nil {
			tp = a.GetT()
		}
	}
	if tp == nil {
		return 0, false
	}
	t, err := decodeTensor(tp)
	if err != nil || t.Len() != 1 || !t.DType.IsFloat() {
		return 0, false
	}
	return float64(t.F32[0]), true
}

// constValue returns the integer values of a constant (an initializer that is not also a
// graph input, or a Constant node's output).
func (u *upgrader) constValue(name string) ([]int64, bool) {
	var tp *onnxpb.TensorProto
	if t, ok := u.inits[name]; ok {
		for _, vi := range u.g.GetInput() {
			if vi.GetName() == name {
				return nil, false // an overridable default, not a constant
			}
		}
		tp = t
	} else if c, ok := u.consts[name]; ok {
		for _, a := range c.GetAttribute() {
			switch a.GetName() {
			case "value":
				tp = a.GetT()
			case "value_ints":
				return append([]int64{}, a.GetInts()...), true
			case "value_int":
				return []int64{a.GetI()}, true
			}
		}
	}
	if tp == nil {
		return nil, false
	}
	t, err := decodeTensor(tp)
	if err != nil {
		return nil, false
	}
	switch t.DType {
	case tensor.Int64, tensor.Int32:
		return append([]int64{}, t.I64...), true
	case tensor.Bool:
		v := make([]int64, len(t.Bool))
		for i, b := range t.Bool {
			if b {
				v[i] = 1
			}
		}
		return v, true
	}
	return nil, false
}

// dropDead removes the Constant nodes and adapter-made initializers whose every use the
// adapters folded away (values the file's own nodes still read are kept).
func (u *upgrader) dropDead(nodes []*onnxpb.NodeProto) []*onnxpb.NodeProto {
	out := nodes[:0]
	for _, np := range nodes {
		if c, ok := u.consts[firstOutput(np)]; ok && c == np && u.folded[c.GetOutput()[0]] && u.uses[c.GetOutput()[0]] <= 0 {
			continue
		}
		out = append(out, np)
	}
	var inits []*onnxpb.TensorProto
	for _, tp := range u.g.GetInitializer() {
		if u.folded[tp.GetName()] && u.uses[tp.GetName()] <= 0 {
			continue
		}
		inits = append(inits, tp)
	}
	u.g.Initializer = inits
	return out
}

// unuse records that the adapters removed one use of the value name.
func (u *upgrader) unuse(name string) {
	u.uses[name]--
	u.folded[name] = true
}

func firstOutput(np *onnxpb.NodeProto) string {
	if len(np.GetOutput()) == 0 {
		return ""
	}
	return np.GetOutput()[0]
}

func findAttr(np *onnxpb.NodeProto, name string) *onnxpb.AttributeProto {
	for _, a := range np.GetAttribute() {
		if a.GetName() == name {
			return a
		}
	}
	return nil
}

// takeInts removes the ints attribute name from np and returns its values.
func takeInts(np *onnxpb.NodeProto, name string) ([]int64, bool) {
	for i, a := range np.GetAttribute() {
		if a.GetName() == name {
			np.Attribute = append(np.Attribute[:i:i], np.Attribute[i+1:]...)
			return append([]int64{}, a.GetInts()...), true
		}
	}
	return nil, false
}

// fixCoercedSoftmax gives each Softmax-1..12 node of g (by output name, with its axis) the
// meaning it had: softmax over the input flattened to 2-D at axis. Where the rank is known and
// axis is the last axis, that is Softmax-13 over it; otherwise the node is rewritten as
// Reshape → Softmax(-1) → Reshape (which needs no rank for axis ≥ 0). g must be sorted.
func fixCoercedSoftmax(g *graph.Graph, coerced map[string]int64) error {
	if len(coerced) == 0 {
		return nil
	}
	ranks := map[string]int{}
	probe := *g
	if err := probe.InferShapes(); err == nil {
		for name, v := range probe.ValueInfo {
			if v.Shape != nil {
				ranks[name] = len(v.Shape)
			}
		}
	}
	for _, v := range g.Inputs {
		if v.Shape != nil {
			ranks[v.Name] = len(v.Shape)
		}
	}
	for _, in := range g.Initializers {
		ranks[in.Name] = len(in.Tensor.Shape)
	}
	var nodes []*graph.Node
	changed := false
	for _, n := range g.Nodes {
		axis, ok := coerced[n.Outputs[0]]
		if (n.Op != "Softmax" && n.Op != "LogSoftmax" && n.Op != "Hardmax") || !ok {
			nodes = append(nodes, n)
			continue
		}
		r, known := ranks[n.Inputs[0]]
		if known {
			a, err := graph.NormAxis(axis, r)
			if err != nil {
				return fmt.Errorf("%s %q: %w", n.Op, n.Name, err)
			}
			if a == r-1 {
				n.Attrs = graph.Attrs{"axis": graph.Int(-1)}
				nodes = append(nodes, n)
				continue
			}
			axis = int64(a)
		} else if axis < 0 {
			return fmt.Errorf("%s %q at an opset before 13 has axis %d over an input of unknown rank (re-export with opset_version=13 or later)", n.Op, n.Name, axis)
		}
		changed = true
		nodes = append(nodes, coercedSoftmax(g, n, axis)...)
	}
	g.Nodes = nodes
	if changed {
		return g.TopoSort()
	}
	return nil
}

// coercedSoftmax returns Softmax-1..12 (or LogSoftmax, Hardmax) at axis ≥ 0 written with
// opset-13 ops.
func coercedSoftmax(g *graph.Graph, n *graph.Node, axis int64) []*graph.Node {
	base := constPrefixAdapter + n.Outputs[0]
	dims := make([]int64, axis+1)
	dims[axis] = -1
	t, _ := tensor.FromInt64(dims, len(dims))
	g.Initializers = append(g.Initializers, graph.Initializer{Name: base + "/2d", Tensor: t})
	x, y := n.Inputs[0], n.Outputs[0]
	return []*graph.Node{
		{Name: n.Name + "/shape", Op: "Shape", Inputs: []string{x}, Outputs: []string{base + "/shape"}},
		{Name: n.Name + "/flatten", Op: "Reshape", Inputs: []string{x, base + "/2d"}, Outputs: []string{base + "/flat"}},
		{Name: n.Name, Op: n.Op, Inputs: []string{base + "/flat"}, Outputs: []string{base + "/soft"}, Attrs: graph.Attrs{"axis": graph.Int(-1)}},
		{Name: n.Name + "/unflatten", Op: "Reshape", Inputs: []string{base + "/soft", base + "/shape"}, Outputs: []string{y}},
	}
}
