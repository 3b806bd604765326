// Package graph is zoo's intermediate representation: an ONNX-shaped dataflow graph of typed
// values, nodes with ONNX op types and attributes, and named initializers (the weights).
// Variants build it (Builder), backends compile it, and package onnx converts it to and from
// ModelProto.
//
// # The op table
//
// Every operator the IR accepts (ai.onnx, and the ONNX Runtime contrib ops of com.microsoft
// that real encoder files use, keyed "com.microsoft.NAME": see OpKey and LookupNodeOp) is
// declared exactly once, by an OpDef registered
// from an op_*.go file of this package (op_elementwise.go, op_const.go, op_shape.go,
// op_linalg.go, op_nn.go, and one file per imported op such as op_conv.go or
// op_ms_attention.go). An OpDef holds the op's schema (inputs, outputs, attributes with
// their kinds and defaults), the ai.onnx opsets whose semantics it follows, its type and
// shape inference rule, its pure-Go reference evaluation (Eval, the oracle every backend is
// tested against; EvalNode runs it), its cost (FLOPs and bytes moved) and its gradient rule
// (Grad, see grad.go; NoGrad declares an op not differentiable; package autodiff applies
// them). Validate, InferShapes, ConcreteShapes, Cost and EvalNode all read the table; Ops and
// LookupOp expose it.
//
// The ONNX shape semantics that inference, the reference and the backends share live in one
// place, opsem.go: BroadcastShapes, NormAxis and NormAxes, ReshapeDims (Reshape's 0 and -1),
// SqueezeDims, UnsqueezeDims, SliceBound and SliceDims, NumElements. Backends call these
// rather than keeping their own copies.
//
// # Adding an op
//
// A new op is one file in zoo/graph plus its test: register an OpDef in an op_*.go file (a
// new file named for the op or its family), with its schema, opset range, inference rule,
// reference Eval, Cost and Grad (with a finite-difference case in zoo/autodiff's fd_test.go, or
// NoGrad and an entry in its notDifferentiable list), and add golden cases for it to
// eval_test.go or the op's own test file through goldenSets (TestOpTableComplete
// and TestEvalCoversEveryOp fail until every part and an accepted and a rejected case
// exist). Then kernels in backends register against it: each backend's op table maps the op
// name to its kernel and is tested against EvalNode.
package graph
