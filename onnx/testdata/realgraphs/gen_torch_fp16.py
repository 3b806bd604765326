#!/usr/bin/python3
"""Writes a small PyTorch Transformer encoder (torch 1.13's nn.TransformerEncoder: 2 pre-LN
layers, d_model 32, 4 heads, GELU, float input of shape (batch, seq, 32)) exported to ONNX
at opsets 14 and 17, once with float32 weights and once with its weights stored as float16
(each initializer W becomes a float16 tensor and a Cast to float32, as fp16 weight
compression does). NAME.json holds the input and PyTorch's float32 output as "torch";
the ONNX Runtime outputs are filled in by onnx/realgraphs_test.go (ZOO_UPDATE_REALGRAPHS=1).

Run with Debian's python3-torch (1.13) and python3-onnx (1.12):  /usr/bin/python3 gen_torch_fp16.py
"""
import io
import json
import os

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
torch.manual_seed(16)
layer = torch.nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, dropout=0.0, activation="gelu", batch_first=True, norm_first=True)
enc = torch.nn.TransformerEncoder(layer, 2, norm=torch.nn.LayerNorm(32)).eval()
x = torch.randn(2, 7, 32)
with torch.no_grad():
    ref = enc(x).numpy()


def fp16_weights(m):
    """Stores every float32 initializer as float16 plus a Cast node that restores its name."""
    g = m.graph
    casts, inits = [], []
    for t in g.initializer:
        if t.data_type != TensorProto.FLOAT:
            inits.append(t)
            continue
        a = numpy_helper.to_array(t).astype(np.float16)
        inits.append(numpy_helper.from_array(a, t.name + "_fp16"))
        casts.append(helper.make_node("Cast", [t.name + "_fp16"], [t.name], name="cast_" + t.name, to=TensorProto.FLOAT))
    del g.initializer[:]
    g.initializer.extend(inits)
    nodes = casts + list(g.node)
    del g.node[:]
    g.node.extend(nodes)
    return m


for opset in (14, 17):
    buf = io.BytesIO()
    torch.onnx.export(enc, (x,), buf, opset_version=opset, input_names=["x"], output_names=["hidden"],
                      dynamic_axes={"x": {0: "batch", 1: "seq"}, "hidden": {0: "batch", 1: "seq"}})
    for kind in ("fp32", "fp16w"):
        m = onnx.load_from_string(buf.getvalue())
        if kind == "fp16w":
            m = fp16_weights(m)
        onnx.checker.check_model(m)
        name = f"torch_encoder_op{opset}_{kind}"
        onnx.save(m, os.path.join(HERE, name + ".onnx"))
        path = os.path.join(HERE, name + ".json")
        old = json.load(open(path)) if os.path.exists(path) else {}
        doc = {
            "note": f"PyTorch 1.13 nn.TransformerEncoder (pre-LN, GELU) at opset {opset}, {kind} weights",
            "tolerance": 1e-5,
            "inputs": {"x": {"dtype": "float32", "shape": list(x.shape), "data": x.numpy().ravel().tolist()}},
            "outputs": old.get("outputs", {}),
            "torch": {"hidden": {"dtype": "float32", "shape": list(ref.shape), "data": ref.ravel().tolist()}},
        }
        with open(path, "w") as f:
            json.dump(doc, f, separators=(",", ":"))
            f.write("\n")
print("ok")
