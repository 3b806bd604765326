#!/usr/bin/python3
"""Parity fixtures for the linformer variant, from an independent PyTorch implementation.

Run from the repository root with Debian's Python (torch 1.13):

    /usr/bin/python3 plugins/linformer/testdata/gen_fixtures.py

For each case it asks zoo for its weights (`zoo export linformer --weights`), loads them by name
into the PyTorch modules below with strict=True, runs a batch of real text with padding and
writes inputs and outputs to <case>.safetensors next to this script. The Go tests rebuild the
same weights from the seed, check their sha256 and compare outputs on valid positions.

The attention follows the paper (Wang et al. 2020, eq. 7) and the reference implementations
(fairseq examples/linformer MultiheadLinearAttention, lucidrains/linformer LinformerSelfAttention):
E, F in R^{k x max_len} compress keys and values along the SEQUENCE axis, a length-n input uses
the first n columns, and keys/values of padded tokens are zeroed before the compression.
Projection order is the paper's: K = x W_K + b_K first, then E K.

It also checks the seed's form (nn.Linear(d_model, k) on the feature axis, then
.view(B, k, h, d_k)): it must raise at n = 37 != d_model; the Go test
TestSeedFormFails checks the same thing on zoo's backend and shows that at n == d_model it
runs but disagrees with these fixtures.
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
import torch.nn.functional as Fn

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))


# ---- the model ------------------------------------------------------------------------------

class LinformerSelfAttention(nn.Module):
    """Paper eq. 7 with the four sharing modes of §4.

    none:      E, F of shape (h, k, max_len), one pair per head
    headwise:  E, F of shape (k, max_len), shared by the heads of a layer
    key-value: E of shape (k, max_len) used for both keys and values
    layerwise: one E owned by the model (passed in as a callable), used everywhere
    """

    def __init__(self, d_model, h, k, max_len, sharing, bias, scale, shared=None):
        super().__init__()
        self.d_model, self.h, self.d_k, self.k, self.sharing, self.scale = d_model, h, d_model // h, k, sharing, scale
        self.W_Q = nn.Linear(d_model, d_model, bias=bias)
        self.W_K = nn.Linear(d_model, d_model, bias=bias)
        self.W_V = nn.Linear(d_model, d_model, bias=bias)
        self.W_O = nn.Linear(d_model, d_model, bias=bias)
        self.shared = shared
        if sharing == "none":
            self.E = nn.Parameter(torch.empty(h, k, max_len))
            self.F = nn.Parameter(torch.empty(h, k, max_len))
        elif sharing == "headwise":
            self.E = nn.Parameter(torch.empty(k, max_len))
            self.F = nn.Parameter(torch.empty(k, max_len))
        elif sharing == "key-value":
            self.E = nn.Parameter(torch.empty(k, max_len))
        elif sharing != "layerwise":
            raise ValueError(sharing)

    def projections(self):
        if self.sharing == "layerwise":
            e = self.shared()
            return e, e
        if self.sharing == "key-value":
            return self.E, self.E
        return self.E, self.F

    def forward(self, x, key_padding_mask):
        B, n, _ = x.shape
        q = self.W_Q(x).view(B, n, self.h, self.d_k).transpose(1, 2)
        k = self.W_K(x)
        v = self.W_V(x)
        pad = key_padding_mask.unsqueeze(-1)                 # (B, n, 1), True = padding
        k = k.masked_fill(pad, 0.0)
        v = v.masked_fill(pad, 0.0)
        E, F = self.projections()
        E, F = E[..., :n], F[..., :n]                        # first n columns
        if self.sharing == "none":
            kh = k.view(B, n, self.h, self.d_k).transpose(1, 2)
            vh = v.view(B, n, self.h, self.d_k).transpose(1, 2)
            kc = torch.einsum("hkn,bhnd->bhkd", E, kh)
            vc = torch.einsum("hkn,bhnd->bhkd", F, vh)
        else:
            kc = torch.einsum("kn,bnd->bkd", E, k).reshape(B, self.k, self.h, self.d_k).transpose(1, 2)
            vc = torch.einsum("kn,bnd->bkd", F, v).reshape(B, self.k, self.h, self.d_k).transpose(1, 2)
        scores = torch.matmul(q, kc.transpose(-2, -1))
        if self.scale:
            scores = scores / math.sqrt(self.d_k)
        out = torch.matmul(torch.softmax(scores, dim=-1), vc)
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


class Linformer(nn.Module):
    def __init__(self, c):
        super().__init__()
        d, h, L = c["d_model"], c["heads"], c["layers"]
        self.embedding = nn.Embedding(c["vocab"], d)
        self.pos_encoding = PositionalEncoding(d, c["max_len"])
        if c["sharing"] == "layerwise":
            self.E = nn.Parameter(torch.empty(c["k"], c["max_len"]))
        get = lambda: self.E
        self.layers = nn.ModuleList([
            EncoderLayer(LinformerSelfAttention(d, h, c["k"], c["max_len"], c["sharing"], c["attn_bias"], c["scale"], get),
                         d, c["d_ff"], c["norm_first"], c["activation"], c["ln_eps"]) for _ in range(L)])
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


class SeedLinformerAttention(nn.Module):
    """The seed's code, verbatim (feature-axis projection; only runs when n == d_model)."""

    def __init__(self, d_model=512, h=8, k=256):
        super().__init__()
        self.d_model, self.h, self.d_k, self.k = d_model, h, d_model // h, k
        self.W_Q = nn.Linear(d_model, d_model)
        self.W_K = nn.Linear(d_model, d_model)
        self.W_V = nn.Linear(d_model, d_model)
        self.E = nn.Linear(d_model, k)
        self.F = nn.Linear(d_model, k)
        self.W_O = nn.Linear(d_model, d_model)

    def forward(self, X):
        batch_size, n, _ = X.size()
        Q = self.W_Q(X).view(batch_size, n, self.h, self.d_k).transpose(1, 2)
        K = self.W_K(X)
        V = self.W_V(X)
        K = self.E(K).view(batch_size, self.k, self.h, self.d_k).transpose(1, 2)
        V = self.F(V).view(batch_size, self.k, self.h, self.d_k).transpose(1, 2)
        scores = torch.matmul(Q, K.transpose(-2, -1)) / math.sqrt(self.d_k)
        attn = torch.softmax(scores, dim=-1)
        output = torch.matmul(attn, V)
        output = output.transpose(1, 2).contiguous().view(batch_size, n, self.d_model)
        return self.W_O(output)


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

TINY = {"d_model": 64, "heads": 4, "layers": 2, "d_ff": 128, "k": 16, "max_len": 128}
CASES = [
    # name, --set overrides, seed, lengths (batch rows; the longest sets n)
    ("tiny", dict(TINY), 1, [37, 23, 1]),
    ("tiny_none", dict(TINY, sharing="none"), 2, [37, 23, 1]),
    ("tiny_kv", dict(TINY, sharing="key-value"), 3, [37, 23, 1]),
    ("tiny_layerwise", dict(TINY, sharing="layerwise"), 4, [37, 23, 1]),
    ("tiny_prenorm", dict(TINY, norm_first=True, activation="gelu", attn_bias=False, ln_eps=1e-6, scale=False), 5, [37, 23, 1]),
    # max_len == d_model and n == d_model: the only shape at which the seed's form runs at all
    ("tiny_n64", dict(TINY, max_len=64), 6, [64, 50]),
    ("base_layer", {"layers": 1, "max_len": 512}, 7, [37, 23, 1]),
]
DEFAULTS = {"vocab": 257, "d_model": 512, "heads": 8, "layers": 6, "d_ff": 2048, "max_len": 4096, "norm_first": False,
            "activation": "relu", "ln_eps": 1e-5, "k": 256, "sharing": "headwise", "attn_bias": True, "scale": True}


def zoo_weights(sets, seed, path):
    cmd = ["go", "run", "./cmd/zoo", "export", "linformer", "--seed", str(seed), "--weights", path]
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


def check_seed_form(cfg, state):
    """The seed's LinformerAttention with zoo's layer-0 weights: it cannot run at n != d_model."""
    d, h, k = cfg["d_model"], cfg["heads"], cfg["k"]
    seed = SeedLinformerAttention(d, h, k)
    with torch.no_grad():
        for w in ("W_Q", "W_K", "W_V", "W_O"):
            getattr(seed, w).weight.copy_(state[f"layers.0.self_attn.{w}.weight"])
            getattr(seed, w).bias.copy_(state[f"layers.0.self_attn.{w}.bias"])
        x = torch.randn(2, 37, d)
        try:
            seed(x)
        except RuntimeError as e:
            return str(e).splitlines()[0]
    raise AssertionError("the seed's Linformer ran at n=37 != d_model; it should not")


def fixtures():
    for name, sets, seed, lengths in CASES:
        cfg = dict(DEFAULTS, **sets)
        with tempfile.TemporaryDirectory() as tmp:
            wpath = os.path.join(tmp, "w.safetensors")
            zoo_weights(sets, seed, wpath)
            state, meta, digest = read_safetensors(wpath)
        model = Linformer(cfg)
        model.load_state_dict(state, strict=True)
        model.eval()
        tokens, mask = batch_from_text(lengths)
        with torch.no_grad():
            hidden, logits = model(torch.from_numpy(tokens), torch.from_numpy(mask))
        extra = {}
        if name == "tiny":
            extra["seed_form_error_n37"] = check_seed_form(cfg, state)
            print(f"seed's form at n=37: {extra['seed_form_error_n37']}")
        out = os.path.join(HERE, f"{name}.safetensors")
        write_safetensors(out, {"tokens": tokens, "key_padding_mask": mask, "hidden": hidden.numpy(),
                                "logits": logits.numpy()},
                          dict({"weights_sha256": digest, "set": json.dumps(sets, sort_keys=True), "seed": str(seed),
                                "torch": torch.__version__, "config": meta.get("config", "")}, **extra))
        print(f"wrote {os.path.relpath(out, ROOT)}: hidden {tuple(hidden.shape)}, logits {tuple(logits.shape)}")


if __name__ == "__main__":
    fixtures()
