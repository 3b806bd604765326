#!/usr/bin/python3
"""Write zoo's quantized ONNX fixtures, and ONNX Runtime's quantize_dynamic form of any model.

    /usr/bin/python3 onnx/testdata/gen_int8.py                  # the fixtures, into onnx/testdata/int8/
    /usr/bin/python3 onnx/testdata/gen_int8.py --quantize-dynamic IN.onnx OUT.onnx [--per-channel]

Needs only Debian's python3-onnx (1.12) and numpy: no PyTorch and no onnxruntime (neither the
fixtures nor CI need them), so every quantized file is written with onnx.helper directly.

The fixtures are one small model, two linear layers (16 -> 32, ReLU, 32 -> 16, biases), input x
float32 (batch, seq, 16) (the Gemm forms: (batch, 16)), output y, with fixed weights from a seeded
numpy generator (float.onnx: the float32 model), written in every form an importer meets:

  dyn_tensor.onnx   ONNX Runtime's quantize_dynamic default (per_channel=False, weight_type
                    QInt8): x -> DynamicQuantizeLinear -> MatMulInteger(x_q, W_q, x_zp, W_zp) ->
                    Cast(float) -> Mul(., Mul(x_scale, W_scale)) -> Add(bias); int8 weights,
                    symmetric, one scale per tensor, zero point 0.
  dyn_channel.onnx  the same with per_channel=True: W_scale and W_zp have one entry per output
                    column (MatMulInteger's per-column b_zero_point).
  dyn_u8w.onnx      weight_type QUInt8 (asymmetric uint8 weights, zero point != 0, per tensor),
                    so the integer core must subtract a weight zero point too.
  qdq_matmul.onnx   static QDQ: QuantizeLinear/DequantizeLinear of x (uint8, constant scale and
                    zero point), DequantizeLinear of int8 weights per output column (axis 1),
                    MatMul, Add(bias).
  qdq_gemm.onnx     the same around Gemm(transB=1, C=bias) with weights (out, in), per axis 0.
  qlinear.onnx      QuantizeLinear(x) -> QLinearMatMul(x_q, ..., W_q, per-column scales, ...,
                    y_scale, y_zp) -> DequantizeLinear, one QLinearMatMul per layer (no bias).

--quantize-dynamic re-implements what onnxruntime.quantization.quantize_dynamic (1.30) writes for
a float model's MatMul nodes whose B is an initializer, or a Transpose of one (which ONNX
Runtime's pre-processing folds): its formulas (symmetric int8 weights, qmin/qmax -127/127,
scale = (rmax - rmin) / 254 in float32, numpy's round-half-to-even), its node layout and names
(NAME_quantized, NAME_scale, NAME_zero_point, one DynamicQuantizeLinear per activation shared by
its MatMuls). Initializers nothing reads any more are dropped.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "int8")
D_IN, D_HID = 16, 32
OPSET = 17


def quantize_weight(w, per_channel, qtype=TensorProto.INT8):
    """ONNX Runtime's quantize_weight for a (k, n) B matrix: per tensor, or per column (axis 1)."""
    w = w.astype(np.float32)
    cols = [w[:, j] for j in range(w.shape[1])] if per_channel else [w.reshape(-1)]
    qs, scales, zps = [], [], []
    for c in cols:
        rmin, rmax = min(float(c.min()), 0.0), max(float(c.max()), 0.0)
        if qtype == TensorProto.INT8:  # symmetric, qmin/qmax -127/127 (ORT's WeightSymmetric default for int8)
            qmin, qmax = -127, 127
            absmax = max(abs(rmin), abs(rmax))
            rmin, rmax = -absmax, absmax
        else:  # uint8: asymmetric 0..255
            qmin, qmax = 0, 255
        scale = np.float32(np.float32(rmax - rmin) / np.float32(qmax - qmin))
        if scale < np.finfo(np.float32).tiny:
            scale, zp = np.float32(1.0), 0
        else:
            zp = int(np.round(qmin - np.float32(rmin) / scale))
        q = np.clip(np.round(c.astype(np.float32) / scale) + zp, qmin, qmax)
        qs.append(q)
        scales.append(scale)
        zps.append(zp)
    dt = np.int8 if qtype == TensorProto.INT8 else np.uint8
    q = (np.stack(qs, axis=1) if per_channel else qs[0].reshape(w.shape)).astype(dt)
    if per_channel:
        return q, np.array(scales, np.float32), np.array(zps, dt)
    return q, np.array(scales[0], np.float32), np.array(zps[0], dt)


class Dyn:
    """Rewrites MatMul nodes with a constant B in quantize_dynamic's form."""

    def __init__(self, graph, per_channel=False, qtype=TensorProto.INT8):
        self.g, self.per_channel, self.qtype = graph, per_channel, qtype
        self.inits = {i.name: i for i in graph.initializer}
        self.quantized_act = {}  # activation name -> (q, scale, zp)
        self.new_inits, self.nodes = [], []

    def weight_of(self, name, producers):
        """The (k, n) float array of B, and its initializer's name, or None."""
        if name in self.inits:
            return numpy_helper.to_array(self.inits[name]), name
        p = producers.get(name)
        if p is not None and p.op_type == "Transpose" and p.input[0] in self.inits:
            perm = [a.ints for a in p.attribute if a.name == "perm"]
            w = numpy_helper.to_array(self.inits[p.input[0]])
            if w.ndim == 2 and (not perm or list(perm[0]) == [1, 0]):
                return w.T.copy(), p.input[0]
        return None

    def activation(self, x):
        if x not in self.quantized_act:
            q, s, z = x + "_quantized", x + "_scale", x + "_zero_point"
            self.nodes.append(helper.make_node("DynamicQuantizeLinear", [x], [q, s, z], x + "_QuantizeLinear"))
            self.quantized_act[x] = (q, s, z)
        return self.quantized_act[x]

    def run(self):
        producers = {o: n for n in self.g.node for o in n.output}
        for n in self.g.node:
            wb = self.weight_of(n.input[1], producers) if n.op_type == "MatMul" else None
            if wb is None or wb[0].ndim != 2 or wb[0].dtype != np.float32:
                self.nodes.append(n)
                continue
            w, wname = wb
            qw, ws, wz = quantize_weight(w, self.per_channel, self.qtype)
            self.new_inits += [numpy_helper.from_array(qw, wname + "_quantized"),
                               numpy_helper.from_array(ws, wname + "_scale"),
                               numpy_helper.from_array(wz, wname + "_zero_point")]
            xq, xs, xz = self.activation(n.input[0])
            name = n.name or n.output[0]
            self.nodes += [
                helper.make_node("MatMulInteger", [xq, wname + "_quantized", xz, wname + "_zero_point"],
                                 [n.output[0] + "_output_quantized"], name + "_quant"),
                helper.make_node("Cast", [n.output[0] + "_output_quantized"], [n.output[0] + "_output_quantized_cast_output"],
                                 name + "_quant_output_scale_mul_cast", to=TensorProto.FLOAT),
                helper.make_node("Mul", [xs, wname + "_scale"], [name + "_quant_scales_mul:0"], name + "_quant_scales_mul"),
                helper.make_node("Mul", [n.output[0] + "_output_quantized_cast_output", name + "_quant_scales_mul:0"],
                                 [n.output[0]], name + "_quant_output_scale_mul"),
            ]
        # Keep the DynamicQuantizeLinear of an activation right after its producer's nodes:
        # the nodes list is already in order (each is appended when its first MatMul is met).
        del self.g.node[:]
        self.g.node.extend(self.nodes)
        self.g.initializer.extend(self.new_inits)
        # Transposes of folded weights are no longer read; then neither are their initializers.
        read = {i for n in self.g.node for i in n.input} | {o.name for o in self.g.output}
        live = [n for n in self.g.node if n.op_type != "Transpose" or any(o in read for o in n.output)]
        del self.g.node[:]
        self.g.node.extend(live)
        read = {i for n in self.g.node for i in n.input} | {o.name for o in self.g.output}
        keep = [i for i in self.g.initializer if i.name in read]
        del self.g.initializer[:]
        self.g.initializer.extend(keep)


def quantize_dynamic(src, dst, per_channel=False):
    m = onnx.load(src)
    Dyn(m.graph, per_channel).run()
    onnx.checker.check_model(m)
    onnx.save(m, dst)


# --- the fixtures ---------------------------------------------------------------------------

def weights():
    rng = np.random.default_rng(20240531)
    w1 = (rng.standard_normal((D_IN, D_HID)) / np.sqrt(D_IN)).astype(np.float32)  # (k, n)
    b1 = (0.1 * rng.standard_normal(D_HID)).astype(np.float32)
    w2 = (rng.standard_normal((D_HID, D_IN)) / np.sqrt(D_HID)).astype(np.float32)
    b2 = (0.1 * rng.standard_normal(D_IN)).astype(np.float32)
    w1[3, :] *= 4.0  # columns and rows of different ranges, so per-channel scales differ
    w2[:, 5] *= 0.25
    return w1, b1, w2, b2


def float_model(rank3=True):
    w1, b1, w2, b2 = weights()
    shape = ["batch", "seq", D_IN] if rank3 else ["batch", D_IN]
    nodes = [
        helper.make_node("MatMul", ["x", "fc1.weight_t"], ["fc1/MatMul"], "fc1/MatMul"),
        helper.make_node("Add", ["fc1/MatMul", "fc1.bias"], ["fc1/Add"], "fc1/Add"),
        helper.make_node("Relu", ["fc1/Add"], ["relu"], "relu"),
        helper.make_node("MatMul", ["relu", "fc2.weight_t"], ["fc2/MatMul"], "fc2/MatMul"),
        helper.make_node("Add", ["fc2/MatMul", "fc2.bias"], ["y"], "fc2/Add"),
    ]
    inits = [numpy_helper.from_array(w1, "fc1.weight_t"), numpy_helper.from_array(b1, "fc1.bias"),
             numpy_helper.from_array(w2, "fc2.weight_t"), numpy_helper.from_array(b2, "fc2.bias")]
    out_shape = shape[:-1] + [D_IN]
    g = helper.make_graph(nodes, "int8_fixture", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="zoo gen_int8.py")


def save(m, name):
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(OUT, name))
    print("wrote", os.path.join(OUT, name))


def dynamic(name, per_channel, qtype=TensorProto.INT8):
    m = float_model()
    Dyn(m.graph, per_channel, qtype).run()
    save(m, name)


def act_params():
    """The static activation quantization of the QDQ and QLinear forms (uint8, covering ±4)."""
    return np.array(8.0 / 255, np.float32), np.array(128, np.uint8)


def qdq(name, gemm):
    w1, b1, w2, b2 = weights()
    xs, xz = act_params()
    nodes, inits = [], [numpy_helper.from_array(xs, "x_scale"), numpy_helper.from_array(xz, "x_zero_point")]
    x = "x"
    for i, (w, b, relu) in enumerate([(w1, b1, True), (w2, b2, False)], 1):
        p = f"fc{i}"
        q, s, z = quantize_weight(w, per_channel=True)  # (k, n), per column
        axis = 1
        if gemm:  # Gemm with transB: weights (n, k), quantized per row (axis 0)
            q, axis = q.T.copy(), 0
        inits += [numpy_helper.from_array(q, p + ".weight_quantized"), numpy_helper.from_array(s, p + ".weight_scale"),
                  numpy_helper.from_array(z, p + ".weight_zero_point"), numpy_helper.from_array(b, p + ".bias")]
        nodes += [
            helper.make_node("QuantizeLinear", [x, "x_scale", "x_zero_point"], [p + "/x_q"], p + "/QuantizeLinear"),
            helper.make_node("DequantizeLinear", [p + "/x_q", "x_scale", "x_zero_point"], [p + "/x_dq"], p + "/DequantizeLinear"),
            helper.make_node("DequantizeLinear", [p + ".weight_quantized", p + ".weight_scale", p + ".weight_zero_point"],
                             [p + "/w_dq"], p + "/DequantizeLinear_w", axis=axis),
        ]
        out = "y" if i == 2 else p + "/out"
        if gemm:
            nodes.append(helper.make_node("Gemm", [p + "/x_dq", p + "/w_dq", p + ".bias"], [out], p + "/Gemm", transB=1))
        else:
            nodes += [helper.make_node("MatMul", [p + "/x_dq", p + "/w_dq"], [p + "/MatMul"], p + "/MatMul"),
                      helper.make_node("Add", [p + "/MatMul", p + ".bias"], [out], p + "/Add")]
        if relu:
            nodes.append(helper.make_node("Relu", [out], [p + "/relu"], p + "/Relu"))
            x = p + "/relu"
    shape = ["batch", D_IN] if gemm else ["batch", "seq", D_IN]
    g = helper.make_graph(nodes, "int8_qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)], inits)
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="zoo gen_int8.py"), name)


def qlinear(name):
    w1, _, w2, _ = weights()
    xs, xz = act_params()
    ys = [np.array(6.0 / 255, np.float32), np.array(3.0 / 255, np.float32)]
    yz = [np.array(0, np.uint8), np.array(128, np.uint8)]  # layer 1 feeds a ReLU-like range, layer 2 is signed
    inits = [numpy_helper.from_array(xs, "x_scale"), numpy_helper.from_array(xz, "x_zero_point")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "x_scale", "x_zero_point"], ["x_q"], "QuantizeLinear")]
    a, a_s, a_z = "x_q", "x_scale", "x_zero_point"
    for i, w in enumerate([w1, w2], 1):
        p = f"fc{i}"
        q, s, z = quantize_weight(w, per_channel=True)
        inits += [numpy_helper.from_array(q, p + ".weight_quantized"), numpy_helper.from_array(s, p + ".weight_scale"),
                  numpy_helper.from_array(z, p + ".weight_zero_point"),
                  numpy_helper.from_array(ys[i - 1], p + ".y_scale"), numpy_helper.from_array(yz[i - 1], p + ".y_zero_point")]
        nodes.append(helper.make_node("QLinearMatMul", [a, a_s, a_z, p + ".weight_quantized", p + ".weight_scale",
                                                        p + ".weight_zero_point", p + ".y_scale", p + ".y_zero_point"],
                                      [p + "/y_q"], p + "/QLinearMatMul"))
        a, a_s, a_z = p + "/y_q", p + ".y_scale", p + ".y_zero_point"
    nodes.append(helper.make_node("DequantizeLinear", [a, a_s, a_z], ["y"], "DequantizeLinear"))
    shape = ["batch", "seq", D_IN]
    g = helper.make_graph(nodes, "int8_qlinear", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)], inits)
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="zoo gen_int8.py"), name)


def main(argv):
    if len(argv) >= 3 and argv[0] == "--quantize-dynamic":
        quantize_dynamic(argv[1], argv[2], per_channel="--per-channel" in argv[3:])
        return
    if argv:
        sys.exit(__doc__)
    os.makedirs(OUT, exist_ok=True)
    save(float_model(), "float.onnx")
    dynamic("dyn_tensor.onnx", per_channel=False)
    dynamic("dyn_channel.onnx", per_channel=True)
    dynamic("dyn_u8w.onnx", per_channel=False, qtype=TensorProto.UINT8)
    qdq("qdq_matmul.onnx", gemm=False)
    qdq("qdq_gemm.onnx", gemm=True)
    qlinear("qlinear.onnx")


if __name__ == "__main__":
    main(sys.argv[1:])
