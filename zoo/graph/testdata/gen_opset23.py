#!/usr/bin/python3
"""Golden cases for the ops zoo takes from ai.onnx opsets 20 and 23 (Gelu, RMSNormalization,
RotaryEmbedding, Attention), computed with numpy from the operators' definitions (ONNX 1.18
operator docs), since Debian's onnx 1.12 cannot run them. Run from anywhere:

    /usr/bin/python3 zoo/graph/testdata/gen_opset23.py

It writes opset23_golden.json next to itself: a list of {"name", "op", "attrs", "in", "want"}
where attrs maps a name to {"int"|"float"|"string": value} and tensors are
{"dtype", "shape", "data"} (null for an omitted optional input). zoo/graph's eval test reads
it; backends/backendtest's conformance cases for these ops use the same values.
"""
import json
import math
import os

import numpy as np

rng = np.random.default_rng(23)
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "opset23_golden.json")


def enc(t):
    if t is None:
        return None
    t = np.asarray(t)
    kind = {np.dtype(np.float32): "float32", np.dtype(np.float64): "float32", np.dtype(np.int64): "int64", np.dtype(np.bool_): "bool"}[t.dtype]
    data = t.reshape(-1).astype(np.float64).tolist() if kind != "int64" else t.reshape(-1).tolist()
    return {"dtype": kind, "shape": list(t.shape), "data": data}


CASES = []


def case(name, op, attrs, ins, want):
    a = {}
    for k, v in attrs.items():
        a[k] = {"int": v} if isinstance(v, (bool, int)) else {"float": v} if isinstance(v, float) else {"string": v}
    CASES.append({"name": name, "op": op, "attrs": a, "in": [enc(x) for x in ins], "want": [enc(np.asarray(w, dtype=np.float32) if np.asarray(w).dtype == np.float64 else w) for w in want]})


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def gelu(x, approximate="none"):
    x = x.astype(np.float64)
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def rms(x, scale, axis=-1, eps=1e-5):
    x = x.astype(np.float64)
    axes = tuple(range(axis % x.ndim, x.ndim))
    return x / np.sqrt((x * x).mean(axis=axes, keepdims=True) + eps) * scale


def rotary(x, cos, sin, pos=None, interleaved=0, rot=0, heads=0):
    shape = x.shape
    x = x.astype(np.float64)
    if x.ndim == 4:  # (B, H, S, D) -> (B, S, H, D)
        x = x.transpose(0, 2, 1, 3)
    else:
        x = x.reshape(shape[0], shape[1], heads, shape[2] // heads)
    d = x.shape[3]
    rot = rot or d
    if pos is not None:
        cos, sin = cos[pos], sin[pos]
    c, s = cos[:, :, None, :].astype(np.float64), sin[:, :, None, :].astype(np.float64)
    xr = x[..., :rot]
    if interleaved:
        x1, x2 = xr[..., 0::2], xr[..., 1::2]
    else:
        x1, x2 = xr[..., : rot // 2], xr[..., rot // 2:]
    real, imag = c * x1 - s * x2, s * x1 + c * x2
    if interleaved:
        out = np.stack([real, imag], axis=-1).reshape(xr.shape)
    else:
        out = np.concatenate([real, imag], axis=-1)
    y = np.concatenate([out, x[..., rot:]], axis=-1)
    return y.reshape(shape) if len(shape) == 3 else y.transpose(0, 2, 1, 3)


def attention(q, k, v, mask=None, past_k=None, past_v=None, is_causal=0, qh=None, kvh=None, scale=None, softcap=0.0, mode=0):
    three = q.ndim == 3
    q, k, v = q.astype(np.float64), k.astype(np.float64), v.astype(np.float64)
    if three:
        b = q.shape[0]
        q = q.reshape(b, q.shape[1], qh, -1).transpose(0, 2, 1, 3)
        k = k.reshape(b, k.shape[1], kvh, -1).transpose(0, 2, 1, 3)
        v = v.reshape(b, v.shape[1], kvh, -1).transpose(0, 2, 1, 3)
    if past_k is not None:
        k = np.concatenate([past_k, k], axis=2)
        v = np.concatenate([past_v, v], axis=2)
    present_k, present_v = k.copy(), v.copy()
    past = 0 if past_k is None else past_k.shape[2]
    if scale is None:
        scale = 1 / math.sqrt(q.shape[3])
    rep = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)
    qs, total = q.shape[2], k.shape[2]
    scores = q @ k.transpose(0, 1, 3, 2) * scale
    out = {0: scores.copy()}
    bias = np.zeros((qs, total))
    if mask is not None:
        m = mask
        if m.shape[-1] < total:
            pad = [(0, 0)] * (m.ndim - 1) + [(0, total - m.shape[-1])]
            m = np.pad(m, pad, constant_values=False if m.dtype == np.bool_ else -np.inf)
        bias = np.where(m, 0.0, -np.inf) if m.dtype == np.bool_ else m.astype(np.float64)
    s = scores + bias
    if is_causal:
        s = s + np.where(np.arange(total)[None, :] > np.arange(qs)[:, None] + past, -np.inf, 0.0)
    out[1] = s.copy()
    if softcap > 0:
        s = softcap * np.tanh(s / softcap)
    out[2] = s.copy()
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    p = e / e.sum(axis=-1, keepdims=True)
    out[3] = p
    y = p @ v
    if three:
        y = y.transpose(0, 2, 1, 3).reshape(y.shape[0], qs, -1)
    return y, present_k, present_v, out[mode]


def main():
    x = np.array([-3, -1, -0.5, 0, 0.5, 1, 3], dtype=np.float32)
    case("exact", "Gelu", {}, [x], [gelu(x)])
    case("tanh", "Gelu", {"approximate": "tanh"}, [x], [gelu(x, "tanh")])
    x = f32(2, 3, 4)
    case("default, 2-D scale", "Gelu", {}, [x], [gelu(x)])

    s4 = f32(4)
    case("last axis", "RMSNormalization", {}, [x, s4], [rms(x, s4)])
    s34 = f32(3, 4)
    case("axis 1, eps", "RMSNormalization", {"axis": 1, "epsilon": 0.1}, [x, s34], [rms(x, s34, 1, 0.1)])
    case("broadcast scale", "RMSNormalization", {"axis": -2}, [x, s4], [rms(x, s4, -2)])

    b, h, s, d = 2, 2, 3, 4
    x4 = f32(b, h, s, d)
    cos, sin = f32(b, s, d // 2), f32(b, s, d // 2)
    case("4-D", "RotaryEmbedding", {}, [x4, cos, sin, None], [rotary(x4, cos, sin)])
    case("4-D interleaved", "RotaryEmbedding", {"interleaved": 1}, [x4, cos, sin, None], [rotary(x4, cos, sin, interleaved=1)])
    ang = np.arange(6)[:, None] * np.array([1.0, 0.1])[None, :]
    ccache, scache = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
    pos = np.array([[0, 1, 2], [3, 4, 5]], dtype=np.int64)
    x3 = f32(b, s, h * d)
    case("3-D, positions", "RotaryEmbedding", {"num_heads": h}, [x3, ccache, scache, pos], [rotary(x3, ccache, scache, pos, heads=h)])
    c1, s1 = ccache[:, :1].copy(), scache[:, :1].copy()
    case("partial rotation", "RotaryEmbedding", {"rotary_embedding_dim": 2, "interleaved": 1}, [x4, c1, s1, pos], [rotary(x4, c1, s1, pos, interleaved=1, rot=2)])

    q, k, v = f32(2, 2, 3, 4), f32(2, 2, 5, 4), f32(2, 2, 5, 3)
    y, pk, pv, _ = attention(q, k, v)
    case("4-D", "Attention", {}, [q, k, v], [y, pk, pv])
    keep = rng.random((2, 1, 1, 5)) > 0.3
    keep[..., 0] = True
    y, _, _, qk = attention(q, k, v, mask=keep, mode=3)
    case("bool mask, softmax out", "Attention", {"qk_matmul_output_mode": 3}, [q, k, v, keep, None, None], [y, None, None, qk])
    fm = f32(3, 5)
    y, _, _, qk = attention(q, k, v, mask=fm, scale=0.3, mode=1)
    case("float mask, scale, mask out", "Attention", {"scale": 0.3, "qk_matmul_output_mode": 1}, [q, k, v, fm, None, None], [y, None, None, qk])
    qg = f32(1, 4, 3, 4)
    kg, vg = f32(1, 2, 3, 4), f32(1, 2, 3, 4)
    y, _, _, _ = attention(qg, kg, vg, is_causal=1)
    case("gqa causal", "Attention", {"is_causal": 1}, [qg, kg, vg], [y])
    q3, k3, v3 = f32(2, 3, 8), f32(2, 3, 4), f32(2, 3, 4)
    y, pk, pv, _ = attention(q3, k3, v3, qh=2, kvh=1)
    case("3-D gqa", "Attention", {"q_num_heads": 2, "kv_num_heads": 1}, [q3, k3, v3], [y, pk, pv])
    pk0, pv0 = f32(2, 2, 2, 4), f32(2, 2, 2, 3)
    short = np.ones((3, 4), dtype=np.bool_)
    y, pk, pv, qk = attention(q, k, v, mask=short, past_k=pk0, past_v=pv0, is_causal=1, softcap=2.0, mode=2)
    case("past, causal, short mask, softcap", "Attention", {"is_causal": 1, "softcap": 2.0, "qk_matmul_output_mode": 2},
         [q, k, v, short, pk0, pv0], [y, pk, pv, qk])

    with open(OUT, "w") as f:
        json.dump(CASES, f, indent=0)
        f.write("\n")
    print(f"{len(CASES)} cases in {OUT}")


if __name__ == "__main__":
    main()
