#!/usr/bin/python3
"""Parity fixtures for the sparse variant, from an independent dense-masked PyTorch reference.

Run from the repository root with Debian's Python (torch 1.13):

    /usr/bin/python3 plugins/sparse/testdata/gen_fixtures.py

For each case it asks zoo for its weights (`zoo export sparse --weights`), loads them by name into
the PyTorch modules below with strict=True, runs a batch of real text with padding and writes
inputs and outputs to <case>.safetensors next to this script. The Go tests rebuild the same
weights from the seed, check their sha256 and compare outputs on valid positions.

The reference computes full (n x n) scores and masks them with the documented pattern (as the
research notes recommend for window patterns: a dense masked reference, not HF Longformer's
chunked kernel), blocks of b tokens, qb = i // b, kb = j // b:
    keep[i, j] = |qb - kb| <= window
               or (stride > 0 and (qb - kb) % stride == 0)         # Sparse Transformer, strided
               or i < global_tokens or j < global_tokens            # Longformer global tokens
    keep &= not padding[j]
Masked scores get -1e9 (not -inf) as zoo does, so a padded row with no visible key is finite.
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
NEG = -1e9


# ---- the model ------------------------------------------------------------------------------

def pattern(n, block, window, stride, global_tokens):
    i = torch.arange(n)[:, None]
    j = torch.arange(n)[None, :]
    qb, kb = i // block, j // block
    keep = (qb - kb).abs() <= window
    if stride > 0:
        keep = keep | ((qb - kb) % stride == 0)
    if global_tokens > 0:
        keep = keep | (i < global_tokens) | (j < global_tokens)
    return keep


class SparseSelfAttention(nn.Module):
    def __init__(self, d_model, h, bias, scale, block, window, stride, global_tokens):
        super().__init__()
        self.d_model, self.h, self.d_k, self.scale = d_model, h, d_model // h, scale
        self.pat = (block, window, stride, global_tokens)
        self.W_Q = nn.Linear(d_model, d_model, bias=bias)
        self.W_K = nn.Linear(d_model, d_model, bias=bias)
        self.W_V = nn.Linear(d_model, d_model, bias=bias)
        self.W_O = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, key_padding_mask):
        B, n, _ = x.shape
        split = lambda t: t.view(B, n, self.h, self.d_k).transpose(1, 2)
        q, k, v = split(self.W_Q(x)), split(self.W_K(x)), split(self.W_V(x))
        scores = torch.matmul(q, k.transpose(-2, -1))
        if self.scale:
            scores = scores / math.sqrt(self.d_k)
        keep = pattern(n, *self.pat)[None, None] & ~key_padding_mask[:, None, None, :]
        scores = scores.masked_fill(~keep, NEG)
        out = torch.matmul(torch.softmax(scores, dim=-1), v)
        return self.W_O(out.transpose(1, 2).reshape(B, n, self.d_model))


def sinusoidal(max_len, d):
    position = torch.arange(max_len).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d, 2) * (-math.log(10000.0) / d))
    pe = torch.zeros(max_len, d)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe


class PositionalEncoding(nn.Module):
    def __init__(self, d, max_len):
        super().__init__()
        self.register_buffer("pe", sinusoidal(max_len, d))

    def forward(self, x):
        return x + self.pe[: x.size(1)]


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


def sinusoidal(max_len, d):
    position = torch.arange(max_len).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d, 2) * (-math.log(10000.0) / d))
    pe = torch.zeros(max_len, d)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe


class PositionalEncoding(nn.Module):
    def __init__(self, d, max_len):
        super().__init__()
        self.register_buffer("pe", sinusoidal(max_len, d))

    def forward(self, x):
        return x + self.pe[: x.size(1)]


class SparseEncoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        d, h = c["d_model"], c["heads"]
        self.embedding = nn.Embedding(c["vocab"], d)
        self.pos_encoding = PositionalEncoding(d, c["max_len"])
        self.layers = nn.ModuleList([
            EncoderLayer(SparseSelfAttention(d, h, c["attn_bias"], c["scale"], c["block"], c["window"], c["stride"],
                                             c["global_tokens"]),
                         d, c["d_ff"], c["norm_first"], c["activation"], c["ln_eps"]) for _ in range(c["layers"])])
        if c["norm_first"]:
            self.norm = nn.LayerNorm(d, eps=c["ln_eps"])
        self.fc = nn.Linear(d, c["vocab"])
        self.norm_first = c["norm_first"]

    def forward(self, tokens, mask):
        x = self.pos_encoding(self.embedding(tokens))
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

TINY = {"d_model": 64, "heads": 4, "layers": 2, "d_ff": 128, "max_len": 512, "block": 4}
CASES = [
    # name, --set overrides, seed, lengths (batch rows; the longest sets n)
    ("tiny", dict(TINY), 1, [37, 23, 1]),
    ("tiny_global", dict(TINY, global_tokens=3), 2, [37, 23, 1]),
    ("tiny_stride", dict(TINY, stride=3), 3, [37, 23, 1]),
    ("tiny_all", dict(TINY, block=3, window=2, stride=2, global_tokens=5), 4, [37, 23, 1]),
    ("tiny_prenorm", dict(TINY, norm_first=True, activation="gelu", attn_bias=False, ln_eps=1e-6, scale=False,
                          global_tokens=1), 5, [37, 23, 1]),
    ("tiny_long", dict(TINY, block=8, stride=4, global_tokens=2), 6, [300, 130]),
    ("base_layer", {"layers": 1, "block": 8, "stride": 2, "global_tokens": 2}, 7, [37, 23, 1]),
]
DEFAULTS = {"vocab": 257, "d_model": 512, "heads": 8, "layers": 6, "d_ff": 2048, "max_len": 5000, "norm_first": False,
            "activation": "relu", "ln_eps": 1e-5, "block": 64, "window": 1, "stride": 0, "global_tokens": 0,
            "attn_bias": True, "scale": True}


def zoo_weights(sets, seed, path):
    cmd = ["go", "run", "./cmd/zoo", "export", "sparse", "--seed", str(seed), "--weights", path]
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
        model = SparseEncoder(cfg)
        model.load_state_dict(state, strict=True)
        model.eval()
        tokens, mask = batch_from_text(lengths)
        with torch.no_grad():
            hidden, logits = model(torch.from_numpy(tokens), torch.from_numpy(mask))
        n = tokens.shape[1]
        keep = pattern(n, cfg["block"], cfg["window"], cfg["stride"], cfg["global_tokens"])
        out = os.path.join(HERE, f"{name}.safetensors")
        write_safetensors(out, {"tokens": tokens, "key_padding_mask": mask, "hidden": hidden.numpy(),
                                "logits": logits.numpy(), "pattern": keep.numpy()},
                          {"weights_sha256": digest, "set": json.dumps(sets, sort_keys=True), "seed": str(seed),
                           "torch": torch.__version__, "config": meta.get("config", "")})
        print(f"wrote {os.path.relpath(out, ROOT)}: hidden {tuple(hidden.shape)}, pattern keeps "
              f"{keep.float().mean().item():.1%} of {n}x{n}")


if __name__ == "__main__":
    fixtures()
