#!/usr/bin/python3
"""Write opset-18 to 23 forms of zoo's PyTorch fixtures (run after gen_fixtures.py):

    /usr/bin/python3 onnx/testdata/gen_upconverted.py

Debian's onnx 1.12 converts up to opset 17 only, and PyTorch 1.13 exports up to 17, so the
newer forms are made here by rewriting each node of torch/enc_<act>_op16.onnx (LayerNorm
written as ReduceMean/Sub/Pow/Sqrt/Div, GELU as Div/Erf/Add/Mul) and torch/enc_<act>_op17.onnx
(LayerNormalization) into what it becomes at the newer opset, following the ONNX operator
changelog:

  * 18: ReduceMean (and ReduceSum/ReduceMax/ReduceMin/ReduceProd) take axes as an input, not
    an attribute; Split takes num_outputs when it has no split input.
  * 20: the exact GELU subgraph PyTorch writes (Div by √2 → Erf → Add 1 → Mul x → Mul 0.5)
    becomes the Gelu op (new in 20).
  * 19 to 23: no change in the ops these files use beyond added types (Cast, Reshape,
    Shape, Constant, ... gained versions for float8/int4/float4 types); the opset import and
    the IR version (9 from 19, 10 from 21, as ONNX Runtime expects) are raised.

Each file lands in torch_up/enc_<act>_<form>_op<N>.onnx: form "ln16" (from the opset-16
export) at the even opsets, "ln17" (from the opset-17 one) at the odd ones. The models compute exactly what the opset-17 export
computes, so the Go tests compare them with PyTorch's outputs in torch/enc_<act>_op17.*.npy,
and cmd/zoo's parity test runs them through ONNX Runtime.
"""
import os

import numpy as np
import onnx
from onnx import helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
REDUCE = {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd"}


def ir_for(opset):
    return 8 if opset <= 17 else 9 if opset <= 20 else 10


def axes_to_inputs(g):
    for n in g.node:
        if n.op_type in REDUCE and n.op_type != "ReduceSum":
            for a in list(n.attribute):
                if a.name == "axes":
                    name = f"{n.name or n.output[0]}/axes"
                    g.initializer.append(numpy_helper.from_array(np.array(list(a.ints), dtype=np.int64), name))
                    n.input.append(name)
                    n.attribute.remove(a)
        if n.op_type == "Split" and len(n.input) < 2 and not any(a.name == "num_outputs" for a in n.attribute):
            n.attribute.append(helper.make_attribute("num_outputs", len(n.output)))


def const_value(g, name):
    for t in g.initializer:
        if t.name == name:
            return numpy_helper.to_array(t)
    for n in g.node:
        if n.op_type == "Constant" and n.output[0] == name:
            return numpy_helper.to_array(n.attribute[0].t)
    return None


def fuse_gelu(g):
    """Replace Div(x, √2) → Erf → Add(·, 1) → Mul(x, ·) → Mul(·, 0.5) by Gelu(x)."""
    users = {}
    for n in g.node:
        for i in n.input:
            users.setdefault(i, []).append(n)
    by_out = {o: n for n in g.node for o in n.output}
    dead, fused = set(), 0
    for div in list(g.node):
        if div.op_type != "Div":
            continue
        c = const_value(g, div.input[1])
        if c is None or c.size != 1 or abs(float(c) - np.sqrt(2)) > 1e-6:
            continue
        x = div.input[0]
        chain = [div]
        ok = True
        for op, check in (("Erf", None), ("Add", 1.0), ("Mul", "x"), ("Mul", 0.5)):
            u = users.get(chain[-1].output[0], [])
            if len(u) != 1 or u[0].op_type != op:
                ok = False
                break
            n = u[0]
            other = [i for i in n.input if i != chain[-1].output[0]]
            if check == "x":
                ok = other == [x]
            elif check is not None:
                v = const_value(g, other[0]) if other else None
                ok = v is not None and v.size == 1 and abs(float(v) - check) < 1e-7
            if not ok:
                break
            chain.append(n)
        if not ok:
            continue
        last = chain[-1]
        gelu = helper.make_node("Gelu", [x], [last.output[0]], name=(div.name or x) + "/Gelu")
        idx = list(g.node).index(last)
        g.node.insert(idx, gelu)
        dead.update(id(n) for n in chain)
        fused += 1
    keep = [n for n in g.node if id(n) not in dead]
    del g.node[:]
    g.node.extend(keep)
    return fused


def main():
    os.makedirs(os.path.join(HERE, "torch_up"), exist_ok=True)
    for act in ("relu", "gelu"):
        for opset in range(18, 24):
            # Alternate the source so that both LayerNorm forms reach every new rule.
            form, src = ("ln16", 16) if opset % 2 == 0 else ("ln17", 17)
            m = onnx.load(os.path.join(HERE, "torch", f"enc_{act}_op{src}.onnx"))
            axes_to_inputs(m.graph)
            fused = fuse_gelu(m.graph) if opset >= 20 else 0
            del m.opset_import[:]
            m.opset_import.append(helper.make_opsetid("", opset))
            m.ir_version = ir_for(opset)
            path = os.path.join(HERE, "torch_up", f"enc_{act}_{form}_op{opset}.onnx")
            onnx.save(m, path)
            ops = sorted({n.op_type for n in m.graph.node})
            print(f"{path}: opset {opset}, ir {m.ir_version}, {len(m.graph.node)} nodes, {fused} Gelu, ops {' '.join(ops)}")


if __name__ == "__main__":
    main()
