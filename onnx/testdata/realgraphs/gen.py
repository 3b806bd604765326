#!/usr/bin/python3
"""Writes the small ONNX graphs that onnx/realgraphs_test.go imports: one per op and dtype
of the "real graphs" work (float16 and bfloat16 tensors in raw_data and int32_data, QDQ
QuantizeLinear/DequantizeLinear per tensor and per axis, DynamicQuantizeLinear,
MatMulInteger, Trilu, Conv 1-D and 2-D, and ONNX Runtime's com.microsoft ops).

For each case NAME it writes NAME.onnx and NAME.json with the inputs; the expected outputs
in NAME.json come from ONNX Runtime 1.30 and are filled in by the Go test when run with
ZOO_UPDATE_REALGRAPHS=1 and ONNX Runtime installed (see onnx/realgraphs_test.go).

Run with Debian's python3-onnx (onnx 1.12) and numpy:  /usr/bin/python3 gen.py
"""
import json
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
OPSET = 17
MS = "com.microsoft"
rng = np.random.default_rng(20261201)

NP2ONNX = {np.float32: TensorProto.FLOAT, np.int64: TensorProto.INT64, np.int32: TensorProto.INT32}
DT_NAME = {np.float32: "float32", np.int64: "int64", np.int32: "int32"}


def rand(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def vi(name, arr_or_type, shape=None):
    if shape is None:
        return helper.make_tensor_value_info(name, NP2ONNX[arr_or_type.dtype.type], list(arr_or_type.shape))
    return helper.make_tensor_value_info(name, arr_or_type, shape)


def save(name, nodes, inputs, outputs, inits=(), tol=1e-5, note=""):
    """inputs: dict name -> array; outputs: list of (name, onnx type)."""
    g = helper.make_graph(
        nodes, name,
        [vi(k, v) for k, v in inputs.items()],
        [helper.make_tensor_value_info(n, t, None) for n, t in outputs],
        initializer=list(inits))
    ops = [helper.make_opsetid("", OPSET)]
    if any(n.domain == MS for n in nodes):
        ops.append(helper.make_opsetid(MS, 1))
    m = helper.make_model(g, opset_imports=ops, producer_name="zoo realgraphs gen.py")
    m.ir_version = 8
    onnx.save(m, os.path.join(HERE, name + ".onnx"))
    path = os.path.join(HERE, name + ".json")
    old = {}
    if os.path.exists(path):
        with open(path) as f:
            old = json.load(f)
    doc = {
        "note": note,
        "tolerance": tol,
        "inputs": {k: {"dtype": DT_NAME[v.dtype.type], "shape": list(v.shape), "data": v.ravel().tolist()} for k, v in inputs.items()},
        "outputs": old.get("outputs", {}),
    }
    with open(path, "w") as f:
        json.dump(doc, f, indent=None, separators=(",", ":"))
        f.write("\n")


_count = {}


def node(op, ins, outs, domain="", **attrs):
    _count[op] = _count.get(op, -1) + 1
    return helper.make_node(op, ins, outs, domain=domain, name=f"{op}_{_count[op]}", **attrs)


# ---- float16 and bfloat16 tensors: weights decoded exactly, then computed in float32 ----
x = rand(2, 3, 4)
w = rand(4, 5)
w16 = w.astype(np.float16)
save("fp16_raw_weights", [node("Cast", ["w"], ["wf"], to=TensorProto.FLOAT), node("MatMul", ["x", "wf"], ["y"])],
     {"x": x}, [("y", TensorProto.FLOAT)], [numpy_helper.from_array(w16, "w")], note="float16 initializer in raw_data")
t = helper.make_tensor("w", TensorProto.FLOAT16, w16.shape, w16.ravel().tolist(), raw=False)
assert len(t.int32_data) == w16.size
save("fp16_int32data_weights", [node("Cast", ["w"], ["wf"], to=TensorProto.FLOAT), node("MatMul", ["x", "wf"], ["y"])],
     {"x": x}, [("y", TensorProto.FLOAT)], [t], note="float16 initializer in int32_data (bit patterns)")
bvals = w.ravel().tolist()
tb = helper.make_tensor("w", TensorProto.BFLOAT16, w.shape, bvals, raw=False)
save("bf16_int32data_weights", [node("Cast", ["w"], ["wf"], to=TensorProto.FLOAT), node("MatMul", ["x", "wf"], ["y"])],
     {"x": x}, [("y", TensorProto.FLOAT)], [tb], note="bfloat16 initializer in int32_data (onnx's rounding of the float32 weights)")
bits = (np.frombuffer(w.tobytes(), dtype=np.uint32) + 0x7FFF + ((np.frombuffer(w.tobytes(), dtype=np.uint32) >> 16) & 1)) >> 16
traw = TensorProto(name="w", data_type=TensorProto.BFLOAT16, dims=list(w.shape), raw_data=bits.astype("<u2").tobytes())
save("bf16_raw_weights", [node("Cast", ["w"], ["wf"], to=TensorProto.FLOAT), node("MatMul", ["x", "wf"], ["y"])],
     {"x": x}, [("y", TensorProto.FLOAT)], [traw], note="bfloat16 initializer in raw_data (round to nearest even)")
# A whole float16 computation: ORT runs it in float16, zoo in float32; they agree within fp16 rounding.
b16 = rand(4).astype(np.float16)
save("fp16_compute", [node("Cast", ["x"], ["xh"], to=TensorProto.FLOAT16), node("Add", ["xh", "b"], ["s"]),
                      node("Mul", ["s", "s"], ["p"]), node("Cast", ["p"], ["y"], to=TensorProto.FLOAT)],
     {"x": x}, [("y", TensorProto.FLOAT)], [numpy_helper.from_array(b16, "b")], tol=2e-2,
     note="float16 values end to end; zoo computes in float32 (tolerance: fp16 rounding)")

# ---- QDQ ----
xq = np.concatenate([rand(2, 7) * 3, np.array([[0.5, 1.5, 2.5, -0.5, 100, -100, 0.05]], dtype=np.float32) / 0.02]).astype(np.float32).reshape(3, 7)
for zdt, zname in [(np.uint8, "uint8"), (np.int8, "int8")]:
    zp = np.array(7 if zdt == np.uint8 else -3, dtype=zdt)
    save(f"qdq_per_tensor_{zname}", [node("QuantizeLinear", ["x", "s", "z"], ["q"]), node("DequantizeLinear", ["q", "s", "z"], ["y"]),
                                     node("Cast", ["q"], ["qi"], to=TensorProto.INT32)],
         {"x": xq}, [("y", TensorProto.FLOAT), ("qi", TensorProto.INT32)],
         [numpy_helper.from_array(np.array(0.02, np.float32), "s"), numpy_helper.from_array(zp, "z")],
         note=f"QuantizeLinear/DequantizeLinear per tensor, {zname}, ties to even and saturation")
wq = rand(7, 5)
sc = (np.abs(wq).max(axis=0) / 127).astype(np.float32)
wint = np.clip(np.rint(wq / sc), -127, 127).astype(np.int8)
save("qdq_per_axis_matmul", [node("DequantizeLinear", ["wq", "ws", "wz"], ["w"], axis=1),
                             node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]), node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
                             node("MatMul", ["xd", "w"], ["y"])],
     {"x": xq}, [("y", TensorProto.FLOAT)],
     [numpy_helper.from_array(wint, "wq"), numpy_helper.from_array(sc, "ws"), numpy_helper.from_array(np.zeros(5, np.int8), "wz"),
      numpy_helper.from_array(np.array(0.05, np.float32), "xs"), numpy_helper.from_array(np.array(128, np.uint8), "xz")],
     note="a QDQ MatMul: int8 weights per output channel (axis 1), uint8 activations")
save("qdq_axis0", [node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=0), node("Cast", ["q"], ["qi"], to=TensorProto.INT32),
                   node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=0)],
     {"x": xq}, [("qi", TensorProto.INT32), ("y", TensorProto.FLOAT)],
     [numpy_helper.from_array(np.array([0.02, 0.1, 0.5], np.float32), "s"), numpy_helper.from_array(np.array([0, 10, -10], np.int8), "z")],
     note="per-axis quantization along axis 0, int8")

# ---- DynamicQuantizeLinear + MatMulInteger, as ORT's dynamic quantization writes them ----
xd = rand(2, 3, 6)
wd = rng.integers(-128, 128, size=(6, 4)).astype(np.int8)
save("dynamic_quant_matmul", [node("DynamicQuantizeLinear", ["x"], ["q", "s", "z"]),
                              node("MatMulInteger", ["q", "w", "z", "wz"], ["acc"]),
                              node("Cast", ["acc"], ["accf"], to=TensorProto.FLOAT), node("Mul", ["s", "ws"], ["scale"]),
                              node("Mul", ["accf", "scale"], ["y"]),
                              node("Cast", ["q"], ["qi"], to=TensorProto.INT32), node("Cast", ["z"], ["z32"], to=TensorProto.INT32),
                              # scalar outputs crash onnx/ort's value conversion, so the scale and zero point leave as (1,)
                              node("Reshape", ["z32", "one"], ["zi"]), node("Reshape", ["s", "one"], ["si"])],
     {"x": xd}, [("y", TensorProto.FLOAT), ("qi", TensorProto.INT32), ("zi", TensorProto.INT32), ("si", TensorProto.FLOAT), ("acc", TensorProto.INT32)],
     [numpy_helper.from_array(wd, "w"), numpy_helper.from_array(np.array([0, 1, -2, 3], np.int8), "wz"),
      numpy_helper.from_array(np.array(0.01, np.float32), "ws"), numpy_helper.from_array(np.array([1], np.int64), "one")],
     note="DynamicQuantizeLinear then MatMulInteger with per-column int8 weight zero points")
a8 = rng.integers(0, 256, size=(3, 5)).astype(np.uint8)
b8 = rng.integers(0, 256, size=(5, 2)).astype(np.uint8)
save("matmulinteger_uint8", [node("Cast", ["a"], ["a8"], to=TensorProto.UINT8), node("MatMulInteger", ["a8", "b", "az", "bz"], ["y"])],
     {"a": a8.astype(np.int32)}, [("y", TensorProto.INT32)],
     [numpy_helper.from_array(b8, "b"), numpy_helper.from_array(np.array(12, np.uint8), "az"), numpy_helper.from_array(np.array(200, np.uint8), "bz")],
     note="MatMulInteger uint8 x uint8 with scalar zero points")

xcv = rand(2, 3, 9, 8)
wcv = rng.integers(-128, 128, size=(4, 3, 3, 3)).astype(np.int8)
save("dynamic_quant_conv", [node("DynamicQuantizeLinear", ["x"], ["q", "s", "z"]),
                            node("ConvInteger", ["q", "w", "z", "wz"], ["acc"], pads=[1, 1, 1, 1], strides=[2, 1]),
                            node("Cast", ["acc"], ["accf"], to=TensorProto.FLOAT), node("Mul", ["s", "ws"], ["scale"]),
                            node("Mul", ["accf", "scale"], ["y"])],
     {"x": xcv}, [("acc", TensorProto.INT32), ("y", TensorProto.FLOAT)],
     [numpy_helper.from_array(wcv, "w"), numpy_helper.from_array(np.array(3, np.int8), "wz"), numpy_helper.from_array(np.array(0.01, np.float32), "ws")],
     note="DynamicQuantizeLinear then ConvInteger (ONNX Runtime's dynamic quantization of a Conv)")

# ---- Trilu ----
xt = rand(2, 4, 5)
for upper in (1, 0):
    for k in (0, 2, -1):
        save(f"trilu_{'upper' if upper else 'lower'}_k{k}".replace("-", "m"),
             [node("Trilu", ["x", "k"], ["y"], upper=upper)], {"x": xt}, [("y", TensorProto.FLOAT)],
             [numpy_helper.from_array(np.array(k, np.int64), "k")], note="Trilu")
save("trilu_causal_mask", [node("Shape", ["x"], ["shp"]), node("ConstantOfShape", ["shp"], ["ones"], value=helper.make_tensor("v", TensorProto.FLOAT, [1], [1])),
                           node("Trilu", ["ones", "one"], ["y"])], {"x": xt}, [("y", TensorProto.FLOAT)],
     [numpy_helper.from_array(np.array(1, np.int64), "one")], note="torch.triu(ones, 1): the causal mask PyTorch exports")

# ---- Conv ----
xa = rand(2, 4, 16)
save("conv1d_audio", [node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[3], pads=[1, 1], strides=[2])],
     {"x": xa}, [("y", TensorProto.FLOAT)], [numpy_helper.from_array(rand(6, 4, 3), "w"), numpy_helper.from_array(rand(6), "b")],
     note="Whisper-style 1-D front end: kernel 3, pad 1, stride 2")
save("conv1d_groups_dilations", [node("Conv", ["x", "w"], ["y"], group=2, dilations=[2], pads=[0, 3])],
     {"x": xa}, [("y", TensorProto.FLOAT)], [numpy_helper.from_array(rand(4, 2, 3), "w")], note="groups 2, dilation 2, asymmetric pads")
save("conv1d_same_lower", [node("Conv", ["x", "w"], ["y"], auto_pad="SAME_LOWER", strides=[3])],
     {"x": xa}, [("y", TensorProto.FLOAT)], [numpy_helper.from_array(rand(3, 4, 4), "w")], note="auto_pad SAME_LOWER")
xi = rand(1, 3, 16, 12)
save("conv2d_patch_embed", [node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[4, 4], strides=[4, 4])],
     {"x": xi}, [("y", TensorProto.FLOAT)], [numpy_helper.from_array(rand(8, 3, 4, 4), "w"), numpy_helper.from_array(rand(8), "b")],
     note="ViT patch embedding: kernel = stride = 4")
save("conv2d_same_upper_depthwise", [node("Conv", ["x", "w"], ["y"], auto_pad="SAME_UPPER", group=3, strides=[2, 1])],
     {"x": xi}, [("y", TensorProto.FLOAT)], [numpy_helper.from_array(rand(3, 1, 3, 3), "w")], note="depthwise, SAME_UPPER, strides (ONNX Runtime refuses dilations with SAME_*)")

# ---- convolutional front ends: BatchNormalization, Clip, HardSigmoid, pools ----
xc = rand(2, 3, 7, 6)
save("batchnorm_inference", [node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], epsilon=1e-5)],
     {"x": xc}, [("y", TensorProto.FLOAT)],
     [numpy_helper.from_array(rand(3) + 1, "s"), numpy_helper.from_array(rand(3), "b"), numpy_helper.from_array(rand(3), "m"),
      numpy_helper.from_array(np.abs(rand(3)) + 0.1, "v")], note="BatchNormalization, inference mode")
save("hardswish_relu6", [node("HardSigmoid", ["x"], ["h"], alpha=1 / 6), node("Mul", ["x", "h"], ["hs"]),
                         node("Clip", ["hs", "lo", "hi"], ["y"])],
     {"x": xc * 4}, [("y", TensorProto.FLOAT)],
     [numpy_helper.from_array(np.array(0, np.float32), "lo"), numpy_helper.from_array(np.array(6, np.float32), "hi")],
     note="hard-swish (x · HardSigmoid(x), alpha 1/6) then ReLU6 (Clip 0..6)")
save("averagepool_ceil_pads", [node("AveragePool", ["x"], ["y"], kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 1, 1], ceil_mode=1)],
     {"x": xc}, [("y", TensorProto.FLOAT)], note="AveragePool with pads and ceil_mode, padding excluded")
save("averagepool_include_pad", [node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], strides=[1, 2], pads=[1, 1, 1, 1], count_include_pad=1)],
     {"x": xc}, [("y", TensorProto.FLOAT)], note="AveragePool counting the padding")
save("averagepool_same_upper", [node("AveragePool", ["x"], ["y"], kernel_shape=[2, 3], strides=[2, 2], auto_pad="SAME_UPPER")],
     {"x": xc}, [("y", TensorProto.FLOAT)], note="AveragePool with auto_pad SAME_UPPER")
save("globalaveragepool", [node("GlobalAveragePool", ["x"], ["y"])], {"x": xc}, [("y", TensorProto.FLOAT)], note="GlobalAveragePool")

# ---- com.microsoft ----
B, S, D, H = 2, 5, 8, 2
xh = rand(B, S, D)
bias = rand(D, scale=0.5)
save("ms_gelu", [node("Gelu", ["x"], ["y"], domain=MS)], {"x": xh * 2}, [("y", TensorProto.FLOAT)], note="com.microsoft Gelu")
save("ms_fastgelu_bias", [node("FastGelu", ["x", "b"], ["y"], domain=MS)], {"x": xh * 2}, [("y", TensorProto.FLOAT)],
     [numpy_helper.from_array(bias, "b")], note="com.microsoft FastGelu with bias")
save("ms_fastgelu", [node("FastGelu", ["x"], ["y"], domain=MS)], {"x": xh * 2}, [("y", TensorProto.FLOAT)], note="com.microsoft FastGelu")
save("ms_biasgelu", [node("BiasGelu", ["x", "b"], ["y"], domain=MS)], {"x": xh * 2}, [("y", TensorProto.FLOAT)],
     [numpy_helper.from_array(bias, "b")], note="com.microsoft BiasGelu")
gamma, beta = rand(D) + 1, rand(D)
save("ms_skiplayernorm", [node("SkipLayerNormalization", ["x", "skip", "g", "be", "bi"], ["y", "", "", "sum"], domain=MS, epsilon=1e-5)],
     {"x": xh, "skip": rand(B, S, D)}, [("y", TensorProto.FLOAT), ("sum", TensorProto.FLOAT)],
     [numpy_helper.from_array(gamma, "g"), numpy_helper.from_array(beta, "be"), numpy_helper.from_array(bias, "bi")],
     note="com.microsoft SkipLayerNormalization with beta, bias and the input+skip+bias sum")
save("ms_skiplayernorm_2d_skip", [node("SkipLayerNormalization", ["x", "skip", "g"], ["y"], domain=MS)],
     {"x": xh, "skip": rand(S, D)}, [("y", TensorProto.FLOAT)], [numpy_helper.from_array(gamma, "g")],
     note="com.microsoft SkipLayerNormalization, skip (S, D) broadcast, default epsilon")

wqkv, bqkv = rand(D, 3 * D, scale=0.4), rand(3 * D, scale=0.2)
inits = [numpy_helper.from_array(wqkv, "w"), numpy_helper.from_array(bqkv, "b")]
lens = np.array([5, 3], np.int32)
save("ms_attention_nomask", [node("Attention", ["x", "w", "b"], ["y"], domain=MS, num_heads=H)], {"x": xh}, [("y", TensorProto.FLOAT)], inits,
     note="com.microsoft Attention, no mask")
save("ms_attention_keylen", [node("Attention", ["x", "w", "b", "m"], ["y"], domain=MS, num_heads=H)], {"x": xh, "m": lens}, [("y", TensorProto.FLOAT)], inits,
     note="mask_index 1-D (B): right-padding key lengths")
save("ms_attention_startend", [node("Attention", ["x", "w", "b", "m"], ["y"], domain=MS, num_heads=H)],
     {"x": xh, "m": np.array([5, 4, 0, 2], np.int32)}, [("y", TensorProto.FLOAT)], inits, note="mask_index 1-D (2B): end and start positions")
m2 = np.array([[1, 1, 1, 1, 1], [1, 1, 0, 1, 0]], np.int32)
save("ms_attention_2d", [node("Attention", ["x", "w", "b", "m"], ["y"], domain=MS, num_heads=H)], {"x": xh, "m": m2}, [("y", TensorProto.FLOAT)], inits,
     note="mask_index 2-D (B, S), 1 = keep")
m3 = (rng.random((B, S, S)) > 0.3).astype(np.int32)
m3[:, :, 0] = 1
save("ms_attention_3d", [node("Attention", ["x", "w", "b", "m"], ["y"], domain=MS, num_heads=H)], {"x": xh, "m": m3}, [("y", TensorProto.FLOAT)], inits,
     note="mask_index 3-D (B, S, S)")
save("ms_attention_causal_mask", [node("Attention", ["x", "w", "b", "m"], ["y"], domain=MS, num_heads=H, unidirectional=1)],
     {"x": xh, "m": m2}, [("y", TensorProto.FLOAT)], inits, note="unidirectional with a 2-D mask")
save("ms_attention_causal", [node("Attention", ["x", "w", "b"], ["y"], domain=MS, num_heads=H, unidirectional=1)],
     {"x": xh}, [("y", TensorProto.FLOAT)], inits, note="unidirectional, no mask")
wv = rand(D, D + D + 4, scale=0.4)
# (ONNX Runtime 1.30's CPU Attention crashes without a bias, so this case has one.)
save("ms_attention_qkv_sizes", [node("Attention", ["x", "w", "b", "m"], ["y"], domain=MS, num_heads=H, qkv_hidden_sizes=[D, D, 4], scale=0.3, mask_filter_value=-1e4)],
     {"x": xh, "m": lens}, [("y", TensorProto.FLOAT)], [numpy_helper.from_array(wv, "w"), numpy_helper.from_array(rand(D + D + 4, scale=0.2), "b")],
     note="qkv_hidden_sizes with a smaller V, explicit scale")
save("ms_attention_bias", [node("Attention", ["x", "w", "b", "", "", "rb"], ["y"], domain=MS, num_heads=H)],
     {"x": xh, "rb": rand(1, H, S, S)}, [("y", TensorProto.FLOAT)], inits, note="attention_bias (1, N, S, S), relative position bias")

L = 3
qm, km, vm = rand(B, S, D), rand(B, L, D), rand(B, L, 6)
save("ms_mha_cross", [node("MultiHeadAttention", ["q", "k", "v"], ["y"], domain=MS, num_heads=H)],
     {"q": qm, "k": km, "v": vm}, [("y", TensorProto.FLOAT)], note="com.microsoft MultiHeadAttention, L != S, Dv != D")
save("ms_mha_bias_keylen", [node("MultiHeadAttention", ["q", "k", "v", "b", "m"], ["y"], domain=MS, num_heads=H)],
     {"q": qm, "k": km, "v": vm, "m": np.array([3, 2], np.int32)}, [("y", TensorProto.FLOAT)],
     [numpy_helper.from_array(rand(D + D + 6), "b")], note="MultiHeadAttention with bias and key lengths")
save("ms_mha_2d_mask", [node("MultiHeadAttention", ["q", "k", "v", "", "m"], ["y"], domain=MS, num_heads=H, scale=0.5)],
     {"q": qm, "k": km, "v": vm, "m": np.array([[1, 0, 1], [1, 1, 0]], np.int32)}, [("y", TensorProto.FLOAT)],
     note="MultiHeadAttention with a 2-D key padding mask and scale")

V, P, G = 11, 7, 2
ids = rng.integers(0, V, size=(B, S)).astype(np.int32)
segs = rng.integers(0, G, size=(B, S)).astype(np.int32)
mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], np.int32)
emb_inits = [numpy_helper.from_array(rand(V, D), "we"), numpy_helper.from_array(rand(P, D), "pe"), numpy_helper.from_array(rand(G, D), "se"),
             numpy_helper.from_array(gamma, "g"), numpy_helper.from_array(beta, "be")]
save("ms_embedlayernorm", [node("EmbedLayerNormalization", ["ids", "seg", "we", "pe", "se", "g", "be", "mask"], ["y", "mi", "sum"], domain=MS, epsilon=1e-5)],
     {"ids": ids, "seg": segs, "mask": mask}, [("y", TensorProto.FLOAT), ("mi", TensorProto.INT32), ("sum", TensorProto.FLOAT)], emb_inits,
     note="com.microsoft EmbedLayerNormalization with segments and mask (mask_index = count of 1s)")
save("ms_embedlayernorm_posids", [node("EmbedLayerNormalization", ["ids", "", "we", "pe", "", "g", "be", "", "pos"], ["y", "mi"], domain=MS)],
     {"ids": ids, "pos": np.array([[6, 5, 4, 3, 2]], np.int32)}, [("y", TensorProto.FLOAT), ("mi", TensorProto.INT32)], [emb_inits[0], emb_inits[1], emb_inits[3], emb_inits[4]],
     note="EmbedLayerNormalization without segments, position_ids (1, S)")
# ---- QLinearMatMul (its own generator, so the cases above keep their values) ----
qrng = np.random.default_rng(20261202)
aq = qrng.integers(0, 256, size=(2, 3, 6)).astype(np.uint8)
bq = qrng.integers(-128, 128, size=(6, 4)).astype(np.int8)
save("qlinear_matmul", [node("Cast", ["a"], ["a8"], to=TensorProto.UINT8),
                        node("QLinearMatMul", ["a8", "as", "az", "b", "bs", "bz", "ys", "yz"], ["yq"]),
                        node("Cast", ["yq"], ["y"], to=TensorProto.INT32)],
     {"a": aq.astype(np.int32)}, [("y", TensorProto.INT32)],
     [numpy_helper.from_array(np.array(0.02, np.float32), "as"), numpy_helper.from_array(np.array(131, np.uint8), "az"),
      numpy_helper.from_array(bq, "b"), numpy_helper.from_array(np.array([0.01, 0.003, 0.02, 0.0071], np.float32), "bs"),
      numpy_helper.from_array(np.array([0, 0, 0, 0], np.int8), "bz"),
      numpy_helper.from_array(np.array(0.03, np.float32), "ys"), numpy_helper.from_array(np.array(120, np.uint8), "yz")],
     note="QLinearMatMul uint8 x int8 with per-column weight scales, requantized to uint8 (some saturate)")
print("wrote", len([f for f in os.listdir(HERE) if f.endswith(".onnx")]), "graphs")
