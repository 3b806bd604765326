// Package onnx converts zoo's graph IR (package zoo/graph) to and from ONNX models.
//
// Export writes an ONNX ModelProto (IR version 8, ai.onnx opset 17 by default, opsets 13 to 23
// accepted) with the generated protobuf types of package onnx/onnxpb, deterministically, each
// node in its form at the requested opset (opset_export.go; at 23 zoo's attention and rope
// blocks become Attention and RotaryEmbedding, opset_fuse.go and opset_rotary.go).
// Import reads any self-contained ONNX model at ai.onnx opsets 7 to 23 (and 1 to 6 for the
// operators that kept their meaning since) whose operators zoo's
// IR knows, for example PyTorch's exports at opsets 11 to 17, rewrites older operator forms
// into the op table's (opset.go, after ONNX's version converter) and returns a validated,
// topologically sorted graph.
// ImportFile also reads external tensor data from the model's folder (external.go) and names
// a Git LFS pointer. ONNX Runtime's com.microsoft ops are imported into their own domain
// (graph.OpKey); an unknown op is refused with every unknown op of the graph listed at once
// (unsupported.go). Float16 and bfloat16 weights and values are computed in float32: they are
// widened once at import, while the file's 16-bit graph inputs and outputs keep their types and
// its Casts to 16-bit floats still round (each followed by a Cast back to float32; dtype.go);
// int8 and uint8 tensors (quantized graphs) are read as they are.
//
// # How Import uses onnx-go
//
// The graph walk goes through github.com/owulveryck/onnx-go v0.5.0: zoo implements onnx-go's
// Backend (a gonum weighted directed graph builder plus ApplyOperation), onnx-go decodes the
// model and reports each operator with its type, its decoded attributes (ints, floats,
// strings, lists and Constant tensors, converted from gorgonia tensors) and its wiring (an
// edge from each output to each input, weighted by input position). Import builds the IR
// nodes from those reports and cross-checks each against the raw NodeProto; a disagreement is
// an error, never a silently different graph.
//
// A pre-pass over the raw ModelProto (package onnxpb) supplies what onnx-go drops or gets
// wrong, and rejects bad input before anything large is allocated:
//
//   - opset_import and node domains (onnx-go never passes them on);
//   - node names (onnx-go's Operation has only the op type);
//   - graph input and output types with symbolic dimensions (onnx-go keeps only fixed
//     dimensions, so (batch, seq) inputs lose their rank);
//   - initializers. onnx-go is given a skeleton of the model without them, for reasons that
//     make its tensor decoding unusable there: it reads 8 bytes per bool in raw_data (the
//     spec says 1), fails on zero-element tensors ("No data found"), decodes only
//     float32/float64/int32/int64/bool, lets gorgonia panic on a shape that does not match
//     the data instead of returning an error, and would hold a second copy of every weight.
//     zoo decodes initializers itself after checking declared dims × element size against
//     the bytes present, bit for bit (raw_data little-endian or the typed fields);
//   - graph input/output value types are removed from the skeleton too, because onnx-go
//     allocates a placeholder tensor of the declared fixed shape for each (a hostile file
//     could declare a huge one);
//   - tensor attributes are checked the same way and passed to onnx-go with bool raw_data
//     rewritten as int32_data; zero-element ones and 8- and 16-bit ones (which onnx-go does
//     not decode) are filled in from the pre-pass;
//   - metadata_props, including zoo's own list of buffer initializers (BuffersKey).
//
// A panic inside onnx-go or gorgonia is recovered and returned as an error.
//
// # Dependencies
//
// onnx-go v0.5.0 pulls gorgonia.org/tensor (v0.9.3 is selected today). Newer gorgonia tensor
// releases (e.g. v0.9.24) depend on go4.org/unsafe/assume-no-moving-gc, whose older versions
// panic at start-up under Go 1.26; go.mod therefore pins that module at
// v0.0.0-20231121144256-b99613f794b6 (the first version that does not), so that an upgrade
// cannot bring the panic back. Every test binary of this package would panic at init if it did.
// The generated types live in onnx/onnxpb under the proto package "zoo.onnx", because
// onnx-go registers its own copy of the ONNX messages as "onnx".
//
// # Fuzzing
//
//	go test ./onnx -run '^$' -fuzz FuzzImport -fuzztime 60s -fuzzminimizetime 5s
package onnx
