#!/usr/bin/python3
"""Parity fixtures for the rope variant, from an independent PyTorch implementation.

Run from the repository root with Debian's Python (torch 1.13):

    /usr/bin/python3 plugins/rope/testdata/gen_fixtures.py

For each case it asks zoo for its weights (`zoo export rope --weights`), loads them by name into
the PyTorch modules below with strict=True, runs a batch of real text with padding and writes
inputs and outputs to <case>.safetensors next to this script. The Go tests rebuild the same
weights from the seed, check their sha256 and compare outputs on valid positions.

The rotation follows HF transformers: models/llama/modeling_llama.py (rotate_half,
apply_rotary_pos_emb: pairs (i, i + d/2), cos = cat(freqs, freqs)) for the "half" layout and
models/roformer/modeling_roformer.py (apply_rotary_position_embeddings: pairs (2i, 2i+1),
repeat_interleave) for "interleaved"; partial rotary (rope_dim < d_k) rotates the first rope_dim
dimensions of each head as x-transformers does. The cos/sin tables are built here in float64 and
cast to float32 (HF RoFormer's recipe); zoo's rope.cos/rope.sin buffers are checked against them
and then dropped, so the reference runs on its own tables.
"""
import hashlib
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))


# ---- the model ------------------------------------------------------------------------------

def rope_tables(max_len, rot, base, layout):
    inv_freq = 1.0 / (base ** (torch.arange(0, rot, 2, dtype=torch.float64) / rot))   # (rot/2,)
    freqs = torch.outer(torch.arange(max_len, dtype=torch.float64), inv_freq)          # (max_len, rot/2)
    if layout == "half":
        emb = torch.cat((freqs, freqs), dim=-1)
    else:
        emb = torch.repeat_interleave(freqs, 2, dim=-1)
    return emb.cos().float(), emb.sin().float()


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def rotate_interleaved(x):
    return torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).reshape(x.shape)


def apply_rotary(x, cos, sin, rot, layout):
    xr, xp = x[..., :rot], x[..., rot:]
    r = rotate_half(xr) if layout == "half" else rotate_interleaved(xr)
    return torch.cat((xr * cos + r * sin, xp), dim=-1)


class RotarySelfAttention(nn.Module):
    def __init__(self, d_model, h, bias, scale, rot, layout, tables):
        super().__init__()
        self.d_model, self.h, self.d_k, self.scale, self.rot, self.layout = d_model, h, d_model // h, scale, rot, layout
        self.W_Q = nn.Linear(d_model, d_model, bias=bias)
        self.W_K = nn.Linear(d_model, d_model, bias=bias)
        self.W_V = nn.Linear(d_model, d_model, bias=bias)
        self.W_O = nn.Linear(d_model, d_model, bias=bias)
        self.tables = tables

    def forward(self, x, key_padding_mask):
        B, n, _ = x.shape
        split = lambda t: t.view(B, n, self.h, self.d_k).transpose(1, 2)
        q, k, v = split(self.W_Q(x)), split(self.W_K(x)), split(self.W_V(x))
        cos, sin = self.tables()
        cos, sin = cos[:n], sin[:n]                                  # positions 0..n-1
        q = apply_rotary(q, cos, sin, self.rot, self.layout)
        k = apply_rotary(k, cos, sin, self.rot, self.layout)
        scores = torch.matmul(q, k.transpose(-2, -1))
        if self.scale:
            scores = scores / math.sqrt(self.d_k)
        scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
        out = torch.matmul(torch.softmax(scores, dim=-1), v)
        return self.W_O(out.transpose(1, 2).reshape(B, n, self.d_model))


class EncoderLayer(nn.Module):
    def __init__(self, attn, d_model, d_ff, norm_first, activation, eps):
        super().__init__()
        self.self_attn = attn
        act = nn.ReLU() if activation == "relu" else nn.GELU()
        self.ffn = nn.Sequential(nn.Linear(d_model, d_ff), act, nn.Linear(d_ff, d_model))
        self.norm1 = nn.LayerNorm(d_model, eps=eps)
        self.norm2 = nn.LayerNorm(d_model, eps=eps)
        self.norm_first = norm_first

    def forward(self, x, mask):
        if self.norm_first:
            x = x + self.self_attn(self.norm1(x), mask)
            return x + self.ffn(self.norm2(x))
        x = self.norm1(x + self.self_attn(x, mask))
        return self.norm2(x + self.ffn(x))


class RoPEEncoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        d, h = c["d_model"], c["heads"]
        rot = c["rope_dim"] or d // h
        cos, sin = rope_tables(c["max_len"], rot, c["rope_base"], c["rope_layout"])
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        tables = lambda: (self.cos, self.sin)
        self.embedding = nn.Embedding(c["vocab"], d)
        self.layers = nn.ModuleList([
            EncoderLayer(RotarySelfAttention(d, h, c["attn_bias"], c["scale"], rot, c["rope_layout"], tables),
                         d, c["d_ff"], c["norm_first"], c["activation"], c["ln_eps"]) for _ in range(c["layers"])])
        if c["norm_first"]:
            self.norm = nn.LayerNorm(d, eps=c["ln_eps"])
        self.fc = nn.Linear(d, c["vocab"])
        self.norm_first = c["norm_first"]

    def forward(self, tokens, mask):
        x = self.embedding(tokens)                                   # no additive positions
        for layer in self.layers:
            x = layer(x, mask)
        if self.norm_first:
            x = self.norm(x)
        return x, self.fc(x)


# ---- safetensors, enough for F32 / I64 / BOOL ------------------------------------------------

DTYPES = {"F32": (np.float32, torch.float32), "I64": (np.int64, torch.int64), "BOOL": (np.bool_, torch.bool)}


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    meta = header.pop("__metadata__", {})
    base = 8 + n
    out = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        arr = np.frombuffer(raw[base + begin : base + end], dtype=DTYPES[info["dtype"]][0]).reshape(info["shape"])
        out[name] = torch.from_numpy(arr.copy())
    return out, meta, hashlib.sha256(raw).hexdigest()


def write_safetensors(path, tensors, meta):
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        arr = np.ascontiguousarray(tensors[name])
        code = {np.dtype(np.float32): "F32", np.dtype(np.int64): "I64", np.dtype(np.bool_): "BOOL"}[arr.dtype]
        data = arr.tobytes()
        header[name] = {"dtype": code, "shape": list(arr.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header["__metadata__"] = meta
    hb = json.dumps(header, sort_keys=True).encode()
    hb += b" " * (-len(hb) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)) + hb + b"".join(blobs))


# ---- fixtures -----------------------------------------------------------------------------------

TINY = {"d_model": 64, "heads": 4, "layers": 2, "d_ff": 128, "max_len": 128}
CASES = [
    # name, --set overrides, seed, lengths (batch rows; the longest sets n)
    ("tiny", dict(TINY), 1, [37, 23, 1]),
    ("tiny_interleaved", dict(TINY, rope_layout="interleaved"), 2, [37, 23, 1]),
    ("tiny_partial", dict(TINY, rope_dim=8), 3, [37, 23, 1]),
    ("tiny_prenorm", dict(TINY, norm_first=True, activation="gelu", attn_bias=False, ln_eps=1e-6, scale=False,
                          rope_layout="interleaved", rope_base=500.0), 4, [37, 23, 1]),
    ("base_layer", {"layers": 1, "max_len": 512}, 5, [37, 23, 1]),
]
DEFAULTS = {"vocab": 257, "d_model": 512, "heads": 8, "layers": 6, "d_ff": 2048, "max_len": 5000, "norm_first": False,
            "activation": "relu", "ln_eps": 1e-5, "rope_base": 10000.0, "rope_layout": "half", "rope_dim": 0,
            "attn_bias": True, "scale": True}


def zoo_weights(sets, seed, path):
    cmd = ["go", "run", "./cmd/zoo", "export", "rope", "--seed", str(seed), "--weights", path]
    for k, v in sets.items():
        cmd += ["--set", f"{k}={str(v).lower() if isinstance(v, bool) else v}"]
    subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)


def batch_from_text(lengths):
    text = open(os.path.join(ROOT, "examples", "text.txt"), "rb").read()
    n = max(lengths)
    tokens = np.zeros((len(lengths), n), dtype=np.int64)
    start = 0
    for row, length in enumerate(lengths):
        tokens[row, :length] = np.frombuffer(text[start : start + length], dtype=np.uint8).astype(np.int64) + 1
        start += length
    return tokens, tokens == 0


def fixtures():
    for name, sets, seed, lengths in CASES:
        cfg = dict(DEFAULTS, **sets)
        with tempfile.TemporaryDirectory() as tmp:
            wpath = os.path.join(tmp, "w.safetensors")
            zoo_weights(sets, seed, wpath)
            state, meta, digest = read_safetensors(wpath)
        model = RoPEEncoder(cfg)
        # zoo ships its tables as buffers; they must equal ours, which the reference then uses.
        table_err = max((state.pop("rope.cos") - model.cos).abs().max().item(),
                        (state.pop("rope.sin") - model.sin).abs().max().item())
        assert table_err <= 1e-6, f"{name}: zoo's rotation tables differ from torch's by {table_err}"
        model.load_state_dict(state, strict=True)
        model.eval()
        tokens, mask = batch_from_text(lengths)
        with torch.no_grad():
            hidden, logits = model(torch.from_numpy(tokens), torch.from_numpy(mask))
        out = os.path.join(HERE, f"{name}.safetensors")
        write_safetensors(out, {"tokens": tokens, "key_padding_mask": mask, "hidden": hidden.numpy(),
                                "logits": logits.numpy()},
                          {"weights_sha256": digest, "set": json.dumps(sets, sort_keys=True), "seed": str(seed),
                           "torch": torch.__version__, "config": meta.get("config", ""),
                           "table_max_abs_diff": repr(table_err)})
        print(f"wrote {os.path.relpath(out, ROOT)}: hidden {tuple(hidden.shape)}, logits {tuple(logits.shape)}, "
              f"tables differ by {table_err:.3g}")


if __name__ == "__main__":
    fixtures()
