// Package backends defines the Backend interface that compiles a graph.Graph into a runnable
// Program, the registry that backends join at init, and the per-machine selection rules
// (Select: --backend, ZOO_BACKEND, the user's config file, then the highest Priority among
// the available backends).
//
// Where things go:
//
//   - A new backend is a package backends/NAME: a Backend (Name, Probe, Compile) that calls
//     Register in its init, a blank import in cmd/zoo/main.go, and a test that calls
//     backendtest.Run. Its Compile goes through backends/compile, the one compile step
//     (slots, constant folding, outputs, kept intermediates, last-use frees, unused
//     constants dropped); the backend supplies a kernel per node, an evaluator for folding
//     (graph.EvalNode serves any backend) and, if it has any, fusions. It says which ops
//     of graph's table it lacks in an UnsupportedOps function, which the op-table coverage
//     test (optable_test.go) holds it to.
//   - A new op is declared once, as an OpDef in zoo/graph (schema, inference, reference
//     evaluation, cost). Each backend then registers a kernel under the op's name (cpu's
//     opTable, cuda's gpuOps or hostOps) or lists the op as unsupported; conformance cases
//     go in backendtest.Cases and, for a shape rule, backendtest.ShapeCases. Kernels call
//     graph's opsem functions (BroadcastShapes, SliceDims, NormAxis, ReshapeDims,
//     SqueezeDims, ...) for ONNX semantics and never keep a copy of their own.
//   - A fusion belongs to one backend: it rewrites that backend's plan in its
//     compile.Config.Fuse pass (the CPU's are in backends/cpu/fuse*.go) and must fall back
//     to the unfused steps for inputs its fast path does not handle.
package backends
