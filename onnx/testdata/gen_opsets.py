#!/usr/bin/python3
"""Regenerate zoo's op-by-op import fixtures for ai.onnx opsets 7 to 23 (run from anywhere):

    /usr/bin/python3 onnx/testdata/gen_opsets.py

Needs Debian's python3-onnx (1.12) and numpy; /usr/bin/python3 because another python3 on PATH
may not see them.

Each case is one small model holding one operator in the form it takes at one opset (Slice's
attributes before 10, Squeeze/Unsqueeze/ReduceSum axes attributes before 13, Split's split
attribute before 13, Softmax's 2-D coercion before 13, Dropout's forms at 7, 10 and 12, and the
input forms of ReduceMean/ReduceMax at 18, Split's num_outputs at 18, ...). For opsets up to 17
the model is checked with onnx.checker (full_check, so shape inference runs against each
opset's schema) and the op's schema at that opset is asserted to be the version the case
means (onnx.defs.get_schema); models up to 16 are also up-converted to 17 with ONNX's own
version converter (onnx.version_converter.convert_version) and written next to the original,
so the Go test checks zoo's adapters against ONNX's. onnx 1.12 knows opsets up to 17: the 18
to 23 forms are written by hand after the ONNX 1.18 operator changelog, and are run by ONNX
Runtime in cmd/zoo's parity tests rather than checked here.

Expected outputs are computed with numpy from the operator's definition at that opset.
opsets/cases.json lists, per case, the model files, the inputs and the expected outputs as
{"dtype", "shape", "data"}.
"""
import json
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper, version_converter

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "opsets")
rng = np.random.default_rng(7)
F = TensorProto.FLOAT


def arr(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def coerced_softmax(x, axis):
    axis = axis % x.ndim
    flat = x.reshape(int(np.prod(x.shape[:axis])), -1)
    return softmax(flat, 1).reshape(x.shape)


def enc(t):
    t = np.asarray(t)
    kind = {np.dtype(np.float32): "float32", np.dtype(np.int64): "int64", np.dtype(np.bool_): "bool"}[t.dtype]
    data = t.reshape(-1).astype(np.float64).tolist() if t.dtype == np.bool_ else t.reshape(-1).tolist()
    return {"dtype": kind, "shape": list(t.shape), "data": data}


CASES = []


def case(name, opset, op, version, nodes, inputs, outputs, inits=(), convert=True):
    """inputs: {name: array}; outputs: {name: expected array}; version: the op's schema
    version this form belongs to (checked where onnx 1.12 knows the opset); convert=False for
    forms ONNX's converter refuses (BatchNormalization-7 with spatial 0)."""
    ins = [helper.make_tensor_value_info(k, onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[np.dtype(v.dtype)], v.shape) for k, v in inputs.items()]
    outs = [helper.make_tensor_value_info(k, onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[np.dtype(v.dtype)], v.shape) for k, v in outputs.items()]
    assert outputs, name
    g = helper.make_graph(nodes, name, ins, outs, initializer=[numpy_helper.from_array(v, k) for k, v in inits])
    ir = 8 if opset <= 17 else 9 if opset <= 20 else 10
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=ir, producer_name="gen_opsets.py")
    files = [f"{name}.onnx"]
    if opset <= 17:
        onnx.checker.check_model(m, full_check=True)
        s = onnx.defs.get_schema(op, opset)
        assert s.since_version == version, f"{name}: {op} at opset {opset} is version {s.since_version}, case says {version}"
        if opset < 17 and convert:
            up = version_converter.convert_version(m, 17)
            onnx.checker.check_model(up, full_check=True)
            onnx.save(up, os.path.join(HERE, f"{name}.to17.onnx"))
            files.append(f"{name}.to17.onnx")
    onnx.save(m, os.path.join(HERE, f"{name}.onnx"))
    CASES.append({"name": name, "opset": opset, "op": op, "version": version, "files": files,
                  "inputs": {k: enc(v) for k, v in inputs.items()}, "outputs": {k: enc(v) for k, v in outputs.items()}})


def ints(name, v):
    return (name, np.array(v, dtype=np.int64))


def main():
    os.makedirs(HERE, exist_ok=True)
    x34 = arr(3, 4)
    x234 = arr(2, 3, 4)
    x1314 = arr(1, 3, 1, 4)

    # Slice: attributes (1) → inputs (10) → negative axes (11) → 13.
    case("slice_op7", 7, "Slice", 1, [helper.make_node("Slice", ["x"], ["y"], starts=[1, 0], ends=[3, 100], axes=[0, 1])], {"x": x34}, {"y": x34[1:3, 0:100]})
    case("slice_op9_noaxes", 9, "Slice", 1, [helper.make_node("Slice", ["x"], ["y"], starts=[0, -3], ends=[2, -1])], {"x": x34}, {"y": x34[0:2, -3:-1]})
    case("slice_op10_steps", 10, "Slice", 10, [helper.make_node("Slice", ["x", "s", "e", "a", "st"], ["y"])], {"x": x34}, {"y": x34[:, 3:0:-2]},
         inits=[ints("s", [3]), ints("e", [0]), ints("a", [1]), ints("st", [-2])])
    case("slice_op13", 13, "Slice", 13, [helper.make_node("Slice", ["x", "s", "e", "a"], ["y"])], {"x": x234}, {"y": x234[:, :, -2:]},
         inits=[ints("s", [-2]), ints("e", [9223372036854775807]), ints("a", [-1])])

    # Squeeze / Unsqueeze: axes attribute (1, 11) → input (13); 21 and 23 add types only.
    case("squeeze_op7", 7, "Squeeze", 1, [helper.make_node("Squeeze", ["x"], ["y"], axes=[0, 2])], {"x": x1314}, {"y": x1314.reshape(3, 4)})
    case("squeeze_op11_neg", 11, "Squeeze", 11, [helper.make_node("Squeeze", ["x"], ["y"], axes=[-2])], {"x": x1314}, {"y": x1314.reshape(1, 3, 4)})
    case("squeeze_op11_all", 11, "Squeeze", 11, [helper.make_node("Squeeze", ["x"], ["y"])], {"x": x1314}, {"y": x1314.reshape(3, 4)})
    case("squeeze_op13", 13, "Squeeze", 13, [helper.make_node("Squeeze", ["x", "a"], ["y"])], {"x": x1314}, {"y": x1314.reshape(3, 4)}, inits=[ints("a", [0, 2])])
    case("squeeze_op23", 23, "Squeeze", 23, [helper.make_node("Squeeze", ["x", "a"], ["y"])], {"x": x1314}, {"y": x1314.reshape(1, 3, 4)}, inits=[ints("a", [2])])
    case("unsqueeze_op7", 7, "Unsqueeze", 1, [helper.make_node("Unsqueeze", ["x"], ["y"], axes=[0, 3])], {"x": x34}, {"y": x34.reshape(1, 3, 4, 1)})
    case("unsqueeze_op11_neg", 11, "Unsqueeze", 11, [helper.make_node("Unsqueeze", ["x"], ["y"], axes=[-1])], {"x": x34}, {"y": x34.reshape(3, 4, 1)})
    case("unsqueeze_op13", 13, "Unsqueeze", 13, [helper.make_node("Unsqueeze", ["x", "a"], ["y"])], {"x": x34}, {"y": x34.reshape(3, 1, 4)}, inits=[ints("a", [1])])
    case("unsqueeze_op21", 21, "Unsqueeze", 21, [helper.make_node("Unsqueeze", ["x", "a"], ["y"])], {"x": x34}, {"y": x34.reshape(1, 3, 4)}, inits=[ints("a", [0])])

    # Split: split attribute (2, 11) → input (13) → num_outputs (18).
    case("split_op7_equal", 7, "Split", 2, [helper.make_node("Split", ["x"], ["y0", "y1"], axis=1)], {"x": x34}, {"y0": x34[:, :2], "y1": x34[:, 2:]})
    case("split_op11_attr", 11, "Split", 11, [helper.make_node("Split", ["x"], ["y0", "y1"], axis=-1, split=[1, 3])], {"x": x34}, {"y0": x34[:, :1], "y1": x34[:, 1:]})
    case("split_op13_input", 13, "Split", 13, [helper.make_node("Split", ["x", "s"], ["y0", "y1"], axis=0)], {"x": x34}, {"y0": x34[:2], "y1": x34[2:]}, inits=[ints("s", [2, 1])])
    case("split_op18_num", 18, "Split", 18, [helper.make_node("Split", ["x"], ["y0", "y1"], axis=0, num_outputs=2)], {"x": x34}, {"y0": x34[:2], "y1": x34[2:]})
    case("split_op18_input", 18, "Split", 18, [helper.make_node("Split", ["x", "s"], ["y0", "y1", "y2"], axis=1)], {"x": x34},
         {"y0": x34[:, :1], "y1": x34[:, 1:3], "y2": x34[:, 3:]}, inits=[ints("s", [1, 2, 1])])

    # Reductions: attribute (1, 11) → ReduceSum input (13) → ReduceMean/ReduceMax input (18).
    case("reducesum_op7", 7, "ReduceSum", 1, [helper.make_node("ReduceSum", ["x"], ["y"], axes=[1], keepdims=0)], {"x": x234}, {"y": x234.sum(axis=1)})
    case("reducesum_op11_all", 11, "ReduceSum", 11, [helper.make_node("ReduceSum", ["x"], ["y"])], {"x": x234}, {"y": x234.sum(keepdims=True)})
    case("reducesum_op13", 13, "ReduceSum", 13, [helper.make_node("ReduceSum", ["x", "a"], ["y"])], {"x": x234}, {"y": x234.sum(axis=-1, keepdims=True)}, inits=[ints("a", [-1])])
    case("reducemean_op11", 11, "ReduceMean", 11, [helper.make_node("ReduceMean", ["x"], ["y"], axes=[-1])], {"x": x234}, {"y": x234.mean(axis=-1, keepdims=True)})
    case("reducemean_op18", 18, "ReduceMean", 18, [helper.make_node("ReduceMean", ["x", "a"], ["y"], keepdims=0)], {"x": x234}, {"y": x234.mean(axis=(0, 2))}, inits=[ints("a", [0, 2])])
    case("reducemean_op18_const", 18, "ReduceMean", 18, [helper.make_node("Constant", [], ["a"], value_ints=[-1]), helper.make_node("ReduceMean", ["x", "a"], ["y"])],
         {"x": x234}, {"y": x234.mean(axis=-1, keepdims=True)})
    case("reducemean_op18_all", 18, "ReduceMean", 18, [helper.make_node("ReduceMean", ["x"], ["y"], keepdims=0)], {"x": x234}, {"y": np.array(x234.mean(), dtype=np.float32)})
    case("reducemean_op18_noop", 18, "ReduceMean", 18, [helper.make_node("ReduceMean", ["x"], ["y"], noop_with_empty_axes=1)], {"x": x234}, {"y": x234})
    case("reducemax_op13", 13, "ReduceMax", 13, [helper.make_node("ReduceMax", ["x"], ["y"], axes=[1], keepdims=0)], {"x": x234}, {"y": x234.max(axis=1)})
    case("reducemax_op20", 20, "ReduceMax", 20, [helper.make_node("ReduceMax", ["x", "a"], ["y"])], {"x": x234}, {"y": x234.max(axis=1, keepdims=True)}, inits=[ints("a", [1])])

    # Softmax: 2-D coercion at axis, default 1 (1, 11) → one axis, default -1 (13).
    case("softmax_op7_default", 7, "Softmax", 1, [helper.make_node("Softmax", ["x"], ["y"])], {"x": x234}, {"y": coerced_softmax(x234, 1)})
    case("softmax_op11_axis1", 11, "Softmax", 11, [helper.make_node("Softmax", ["x"], ["y"], axis=1)], {"x": x234}, {"y": coerced_softmax(x234, 1)})
    case("softmax_op11_axis0", 11, "Softmax", 11, [helper.make_node("Softmax", ["x"], ["y"], axis=0)], {"x": x234}, {"y": coerced_softmax(x234, 0)})
    case("softmax_op11_last", 11, "Softmax", 11, [helper.make_node("Softmax", ["x"], ["y"], axis=2)], {"x": x234}, {"y": softmax(x234, 2)})
    case("softmax_op12_neg", 12, "Softmax", 11, [helper.make_node("Softmax", ["x"], ["y"], axis=-2)], {"x": x234}, {"y": coerced_softmax(x234, -2)})
    case("softmax_op13_axis1", 13, "Softmax", 13, [helper.make_node("Softmax", ["x"], ["y"], axis=1)], {"x": x234}, {"y": softmax(x234, 1)})

    # Dropout in inference: ratio attribute (7), bool mask output (10), ratio and
    # training_mode inputs (12), types (13, 22).
    case("dropout_op7", 7, "Dropout", 7, [helper.make_node("Dropout", ["x"], ["y"], ratio=0.3)], {"x": x34}, {"y": x34})
    case("dropout_op10_mask", 10, "Dropout", 10, [helper.make_node("Dropout", ["x"], ["y", "m"], ratio=0.1)], {"x": x34}, {"y": x34, "m": np.ones((3, 4), dtype=np.bool_)})
    case("dropout_op12_inputs", 12, "Dropout", 12, [helper.make_node("Dropout", ["x", "r", "t"], ["y"], seed=3)], {"x": x34}, {"y": x34},
         inits=[("r", np.array(0.5, dtype=np.float32)), ("t", np.array(False))])
    case("dropout_op13", 13, "Dropout", 13, [helper.make_node("Dropout", ["x"], ["y"])], {"x": x34}, {"y": x34})
    case("dropout_op22", 22, "Dropout", 22, [helper.make_node("Dropout", ["x", "r"], ["y"])], {"x": x34}, {"y": x34}, inits=[("r", np.array(0.2, dtype=np.float32))])

    # Ops whose later versions only add types or optional inputs with the old default.
    a, b, c = arr(2, 3), arr(4, 3), arr(4)
    case("gemm_op7", 7, "Gemm", 7, [helper.make_node("Gemm", ["a", "b", "c"], ["y"], transB=1, alpha=0.5, beta=2.0)], {"a": a, "b": b, "c": c}, {"y": 0.5 * a @ b.T + 2 * c})
    case("gemm_op11_noc", 11, "Gemm", 11, [helper.make_node("Gemm", ["a", "b"], ["y"], transB=1)], {"a": a, "b": b}, {"y": a @ b.T})
    m1, m2 = arr(2, 1, 3, 4), arr(5, 4, 2)
    case("matmul_op7", 7, "MatMul", 1, [helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": m1, "b": m2}, {"y": m1 @ m2})
    b31 = arr(3, 1)
    case("add_op7_bcast", 7, "Add", 7, [helper.make_node("Add", ["a", "b"], ["y"])], {"a": x234, "b": b31}, {"y": x234 + b31})
    case("reshape_op7", 7, "Reshape", 5, [helper.make_node("Reshape", ["x", "s"], ["y"])], {"x": x234}, {"y": x234.reshape(2, 12)}, inits=[ints("s", [0, -1])])
    case("reshape_op14_allowzero", 14, "Reshape", 14, [helper.make_node("Reshape", ["x", "s"], ["y"], allowzero=1)], {"x": x234}, {"y": x234.reshape(4, 6)}, inits=[ints("s", [4, 6])])
    case("reshape_op23", 23, "Reshape", 23, [helper.make_node("Reshape", ["x", "s"], ["y"])], {"x": x234}, {"y": x234.reshape(2, 3, 2, 2)}, inits=[ints("s", [0, 0, 2, -1])])
    case("cast_op7", 7, "Cast", 6, [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.INT64)], {"x": np.array([1.7, -2.5, 3.0], dtype=np.float32)}, {"y": np.array([1, -2, 3], dtype=np.int64)})
    case("cast_op19_saturate", 19, "Cast", 19, [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.INT64, saturate=1)], {"x": np.array([1.7, -2.5], dtype=np.float32)}, {"y": np.array([1, -2], dtype=np.int64)})
    case("transpose_op7", 7, "Transpose", 1, [helper.make_node("Transpose", ["x"], ["y"], perm=[2, 0, 1])], {"x": x234}, {"y": x234.transpose(2, 0, 1)})
    case("concat_op7", 7, "Concat", 4, [helper.make_node("Concat", ["a", "b"], ["y"], axis=1)], {"a": x34, "b": x34[:, :2].copy()}, {"y": np.concatenate([x34, x34[:, :2]], axis=1)})
    idx = np.array([[2, 0]], dtype=np.int64)
    case("gather_op7", 7, "Gather", 1, [helper.make_node("Gather", ["x", "i"], ["y"], axis=0)], {"x": x34, "i": idx}, {"y": x34[idx]})
    case("shape_op15_slice", 15, "Shape", 15, [helper.make_node("Shape", ["x"], ["y"], start=1, end=-1)], {"x": x1314}, {"y": np.array([3, 1], dtype=np.int64)})
    mu = x234.mean(-1, keepdims=True)
    var = ((x234 - mu) ** 2).mean(-1, keepdims=True)
    case("layernorm_op17", 17, "LayerNormalization", 17, [helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"], epsilon=1e-5)], {"x": x234},
         {"y": ((x234 - mu) / np.sqrt(var + 1e-5) * 2 + 0.5).astype(np.float32)}, inits=[("s", np.full(4, 2, np.float32)), ("b", np.full(4, 0.5, np.float32))])
    case("erf_op9", 9, "Erf", 9, [helper.make_node("Erf", ["x"], ["y"])], {"x": np.array([0.0, 0.5, -1.0], dtype=np.float32)}, {"y": np.array([0.0, 0.5204998778, -0.8427007929], dtype=np.float32)})
    case("where_op9", 9, "Where", 9, [helper.make_node("Where", ["c", "a", "b"], ["y"])], {"c": np.array([True, False]), "a": np.array([1.0, 2.0], dtype=np.float32), "b": np.array([5.0, 6.0], dtype=np.float32)},
         {"y": np.array([1.0, 6.0], dtype=np.float32)})
    case("pow_op7", 7, "Pow", 7, [helper.make_node("Pow", ["a", "b"], ["y"])], {"a": np.array([2.0, 3.0], dtype=np.float32), "b": np.array([3.0, 0.5], dtype=np.float32)},
         {"y": np.array([8.0, np.sqrt(3.0)], dtype=np.float32)})
    case("equal_op7", 7, "Equal", 7, [helper.make_node("Equal", ["a", "b"], ["y"])], {"a": np.array([1, 2], dtype=np.int64), "b": np.array([1, 3], dtype=np.int64)}, {"y": np.array([True, False])})
    case("max_op8", 8, "Max", 8, [helper.make_node("Max", ["a", "b"], ["y"])], {"a": x34, "b": np.zeros((4,), np.float32)}, {"y": np.maximum(x34, 0)})
    case("expand_op8", 8, "Expand", 8, [helper.make_node("Expand", ["x", "s"], ["y"])], {"x": np.array([[1.0], [2.0]], dtype=np.float32)}, {"y": np.array([[1.0, 1.0], [2.0, 2.0]], dtype=np.float32)}, inits=[ints("s", [2, 2])])
    case("constantofshape_op9", 9, "ConstantOfShape", 9, [helper.make_node("ConstantOfShape", ["s"], ["y"], value=helper.make_tensor("v", F, [1], [0.5]))], {"s": np.array([2, 1], dtype=np.int64)},
         {"y": np.full((2, 1), 0.5, np.float32)})

    # Clip: min/max attributes (6) → optional inputs (11, 12, 13).
    case("clip_op7", 7, "Clip", 6, [helper.make_node("Clip", ["x"], ["y"], min=-0.5, max=0.5)], {"x": x34}, {"y": np.clip(x34, -0.5, 0.5)})
    case("clip_op9_max", 9, "Clip", 6, [helper.make_node("Clip", ["x"], ["y"], max=0.25)], {"x": x34}, {"y": np.minimum(x34, 0.25)})
    case("clip_op11", 11, "Clip", 11, [helper.make_node("Clip", ["x", "lo", "hi"], ["y"])], {"x": x34}, {"y": np.clip(x34, -0.2, 0.3)},
         inits=[("lo", np.array(-0.2, dtype=np.float32)), ("hi", np.array(0.3, dtype=np.float32))])
    case("clip_op13_max_only", 13, "Clip", 13, [helper.make_node("Clip", ["x", "", "hi"], ["y"])], {"x": x34}, {"y": np.minimum(x34, 0.1)},
         inits=[("hi", np.array(0.1, dtype=np.float32))])
    case("clip_op13_int", 13, "Clip", 13, [helper.make_node("Clip", ["x", "lo"], ["y"])], {"x": np.array([-3, 0, 5], dtype=np.int64)}, {"y": np.array([-1, 0, 5], dtype=np.int64)},
         inits=[("lo", np.array(-1, dtype=np.int64))])

    # Flatten (1, 9, 11, 13; not in zoo's table) becomes Reshape (and Transposes above axis 1).
    case("flatten_op7_default", 7, "Flatten", 1, [helper.make_node("Flatten", ["x"], ["y"])], {"x": x234}, {"y": x234.reshape(2, 12)})
    case("flatten_op11_axis0", 11, "Flatten", 11, [helper.make_node("Flatten", ["x"], ["y"], axis=0)], {"x": x234}, {"y": x234.reshape(1, 24)})
    case("flatten_op13_axis2", 13, "Flatten", 13, [helper.make_node("Flatten", ["x"], ["y"], axis=2)], {"x": x234}, {"y": x234.reshape(6, 4)})
    x2345 = arr(2, 3, 4, 5)
    case("flatten_op13_axis3", 13, "Flatten", 13, [helper.make_node("Flatten", ["x"], ["y"], axis=3)], {"x": x2345}, {"y": x2345.reshape(24, 5)})

    # BatchNormalization in inference (7: spatial, 9, 14: training_mode, 15); spatial 0 is
    # written as x·a + b.
    def bn(x, s, b, m, v, eps=1e-5, spatial=True):
        shape = (1, -1) + (1,) * (x.ndim - 2) if spatial else (1,) + s.shape
        r = lambda t: t.reshape(shape)
        return ((x - r(m)) / np.sqrt(r(v) + eps) * r(s) + r(b)).astype(np.float32)
    c3 = [arr(3), arr(3), arr(3), np.abs(arr(3)) + 0.5]
    names = ["s", "b", "m", "v"]
    x2322 = arr(2, 3, 2, 2)
    case("batchnorm_op7", 7, "BatchNormalization", 7, [helper.make_node("BatchNormalization", ["x"] + names, ["y"], epsilon=1e-3)], {"x": x234},
         {"y": bn(x234, *c3, eps=1e-3)}, inits=list(zip(names, c3)))
    c34 = [arr(3, 4), arr(3, 4), arr(3, 4), np.abs(arr(3, 4)) + 0.5]
    case("batchnorm_op7_spatial0", 7, "BatchNormalization", 7, [helper.make_node("BatchNormalization", ["x"] + names, ["y"], spatial=0)], {"x": x234},
         {"y": bn(x234, *c34, spatial=False)}, inits=list(zip(names, c34)), convert=False)
    case("batchnorm_op9_4d", 9, "BatchNormalization", 9, [helper.make_node("BatchNormalization", ["x"] + names, ["y"])], {"x": x2322},
         {"y": bn(x2322, *c3)}, inits=list(zip(names, c3)))
    case("batchnorm_op15", 15, "BatchNormalization", 15, [helper.make_node("BatchNormalization", ["x"] + names, ["y"], training_mode=0, momentum=0.8)], {"x": x2322},
         {"y": bn(x2322, *c3)}, inits=list(zip(names, c3)))

    # Pad: pads and value attributes (2) → inputs (11; 13 adds bfloat16, 18 the axes input,
    # 19 wrap mode, 21 and 23 element types). Expected values are numpy.pad's (wrap only with
    # pads up to the axis size: beyond it numpy 1.24 is not cyclic, ONNX Runtime is).
    x23 = arr(2, 3)
    case("pad_op7_value", 7, "Pad", 2, [helper.make_node("Pad", ["x"], ["y"], pads=[1, 0, 0, 2], value=1.5)], {"x": x23},
         {"y": np.pad(x23, ((1, 0), (0, 2)), constant_values=1.5)})
    case("pad_op10_reflect", 10, "Pad", 2, [helper.make_node("Pad", ["x"], ["y"], pads=[0, 2, 0, 1], mode="reflect")], {"x": x23},
         {"y": np.pad(x23, ((0, 0), (2, 1)), mode="reflect")})
    case("pad_op11_edge", 11, "Pad", 11, [helper.make_node("Pad", ["x", "p"], ["y"], mode="edge")], {"x": x23},
         {"y": np.pad(x23, ((1, 1), (0, 2)), mode="edge")}, inits=[("p", np.array([1, 0, 1, 2], dtype=np.int64))])
    case("pad_op13_value", 13, "Pad", 13, [helper.make_node("Pad", ["x", "p", "v"], ["y"])], {"x": x23},
         {"y": np.pad(x23, ((0, 1), (1, 0)), constant_values=-2.0)}, inits=[("p", np.array([0, 1, 1, 0], dtype=np.int64)), ("v", np.array(-2.0, dtype=np.float32))])
    case("pad_op18_axes", 18, "Pad", 18, [helper.make_node("Pad", ["x", "p", "", "a"], ["y"], mode="reflect")], {"x": x23},
         {"y": np.pad(x23, ((0, 0), (2, 2)), mode="reflect")}, inits=[("p", np.array([2, 2], dtype=np.int64)), ("a", np.array([-1], dtype=np.int64))])
    case("pad_op19_wrap", 19, "Pad", 19, [helper.make_node("Pad", ["x", "p"], ["y"], mode="wrap")], {"x": x23},
         {"y": np.pad(x23, ((2, 1), (1, 2)), mode="wrap")}, inits=[("p", np.array([2, 1, 1, 2], dtype=np.int64))])
    case("pad_op21_crop", 21, "Pad", 21, [helper.make_node("Pad", ["x", "p"], ["y"])], {"x": x23},
         {"y": np.pad(x23, ((0, 0), (1, 0)))[:, :-1]}, inits=[("p", np.array([0, 1, 0, -1], dtype=np.int64))])
    case("pad_op23_edge", 23, "Pad", 23, [helper.make_node("Pad", ["x", "p"], ["y"], mode="edge")], {"x": x23},
         {"y": np.pad(x23, ((3, 0), (0, 0)), mode="edge")}, inits=[("p", np.array([3, 0, 0, 0], dtype=np.int64))])

    # Upsample-7 (scales attribute), Upsample-9 and Resize-10 (scales input): x_in = x_out / scale,
    # nearest rounding down (ONNX's converter to 17 keeps half_pixel, so no .to17 files). Resize-11
    # on: ONNX's reference (interpolate_nd of onnx/backend/test/case/node/resize.py).
    from onnx.backend.test.case.node.resize import interpolate_nd, linear_coeffs, nearest_coeffs
    lin = lambda r, scale=1.0: linear_coeffs(r)
    near = lambda m: (lambda r, scale=1.0: nearest_coeffs(r, mode=m))
    img = arr(1, 2, 3, 4)
    up = np.array([1, 1, 2, 3], dtype=np.float32)
    case("upsample_op7_nearest", 7, "Upsample", 7, [helper.make_node("Upsample", ["x"], ["y"], scales=up.tolist())], {"x": img},
         {"y": img.repeat(2, axis=2).repeat(3, axis=3)}, convert=False)
    case("upsample_op9_linear", 9, "Upsample", 9, [helper.make_node("Upsample", ["x", "s"], ["y"], mode="linear")], {"x": img},
         {"y": interpolate_nd(img, lin, scale_factors=up, coordinate_transformation_mode="asymmetric").astype(np.float32)}, inits=[("s", up)], convert=False)
    case("resize_op10_nearest", 10, "Resize", 10, [helper.make_node("Resize", ["x", "s"], ["y"])], {"x": img},
         {"y": img.repeat(2, axis=2).repeat(3, axis=3)}, inits=[("s", up)], convert=False)
    roi = np.zeros(0, dtype=np.float32)
    case("resize_op11_linear", 11, "Resize", 11, [helper.make_node("Resize", ["x", "roi", "s"], ["y"], mode="linear")], {"x": img},
         {"y": interpolate_nd(img, lin, scale_factors=up).astype(np.float32)}, inits=[("roi", roi), ("s", up)])
    sz = np.array([1, 2, 5, 7], dtype=np.int64)
    case("resize_op13_sizes_align", 13, "Resize", 13, [helper.make_node("Resize", ["x", "", "", "z"], ["y"], mode="linear", coordinate_transformation_mode="align_corners")],
         {"x": img}, {"y": interpolate_nd(img, lin, output_size=sz, coordinate_transformation_mode="align_corners").astype(np.float32)}, inits=[("z", sz)])
    case("resize_op18_axes", 18, "Resize", 18, [helper.make_node("Resize", ["x", "", "", "z"], ["y"], axes=[2, 3], nearest_mode="ceil")],
         {"x": img}, {"y": interpolate_nd(img, near("ceil"), output_size=sz).astype(np.float32)}, inits=[("z", sz[2:])])
    # (an output axis of length 1 is avoided: there ONNX 1.12's reference takes in·scale > 1, ONNX
    # Runtime and zoo the output length, so they map it to 0)
    down = np.array([1, 1, 0.7, 0.5], dtype=np.float32)
    case("resize_op19_down", 19, "Resize", 19, [helper.make_node("Resize", ["x", "", "s"], ["y"], mode="linear", coordinate_transformation_mode="pytorch_half_pixel")],
         {"x": img}, {"y": interpolate_nd(img, lin, scale_factors=down, coordinate_transformation_mode="pytorch_half_pixel").astype(np.float32)}, inits=[("s", down)])

    with open(os.path.join(HERE, "cases.json"), "w") as f:
        json.dump(CASES, f, indent=0)
        f.write("\n")
    print(f"{len(CASES)} cases in {HERE}")


if __name__ == "__main__":
    main()
