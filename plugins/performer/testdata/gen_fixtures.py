#!/usr/bin/python3
"""Parity fixtures for the performer variant (FAVOR+, positive orthogonal random features).

Run from the repository root with Debian's Python (torch 1.13):

    /usr/bin/python3 plugins/performer/testdata/gen_fixtures.py

ZOO_BIN=path/to/zoo uses a prebuilt zoo binary instead of `go run ./cmd/zoo`.

For each case it asks zoo for its weights (`zoo export performer --weights`), including every
layer's random features self_attn.projection_matrix (a buffer), loads them by name into the
independent PyTorch model below with strict=True, runs a padded batch of real text and writes
inputs and outputs to <case>.safetensors. The Go test rebuilds the same weights from the seed,
checks their sha256 and compares outputs on valid positions at atol 1e-5. The comparison is
with FAVOR+'s own math, not with exact softmax.

The kernel and linear attention are lucidrains/performer-pytorch's softmax_kernel and
linear_attention (performer_pytorch.py), with the two documented zoo choices: the key
stabiliser is the max of data_dash over valid keys and features per (batch, head) (not the
global torch.max), and padded keys' features are zeroed after the kernel (not the raw keys
before it). Ω is not redrawn (the reference's fix_projection_matrices_).

The script also checks that zoo's Ω has orthogonal block rows with the documented norms.
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

VARIANT = "performer"
CASES = [
    # name, --set overrides, seed
    ("tiny", {"d_model": 64, "heads": 4, "layers": 2, "d_ff": 128}, 1),  # d_k 16: m = int(16 ln 16) = 44
    ("sqrt_prenorm", {"d_model": 64, "heads": 4, "layers": 2, "d_ff": 128, "norm_first": True, "activation": "gelu",
                      "nb_features": 24, "feature_scaling": "sqrt_dk", "kernel_eps": 1e-6, "attn_bias": False}, 6),
]


def softmax_kernel(data, *, projection_matrix, is_query, normalize_data=True, eps=1e-4, pad=None):
    b, h, *_ = data.shape
    data_normalizer = (data.shape[-1] ** -0.25) if normalize_data else 1.0
    ratio = projection_matrix.shape[0] ** -0.5
    projection = projection_matrix.expand(b, h, *projection_matrix.shape)
    data_dash = torch.einsum("...id,...jd->...ij", (data_normalizer * data), projection)
    diag_data = data ** 2
    diag_data = torch.sum(diag_data, dim=-1)
    diag_data = (diag_data / 2.0) * (data_normalizer ** 2)
    diag_data = diag_data.unsqueeze(dim=-1)
    if is_query:
        data_dash = ratio * (torch.exp(data_dash - diag_data - torch.max(data_dash, dim=-1, keepdim=True).values) + eps)
    else:
        keymask = pad[:, None, :, None]  # True = padding
        stab = torch.amax(data_dash.masked_fill(keymask, float("-inf")), dim=(-1, -2), keepdim=True)
        data_dash = ratio * (torch.exp(data_dash - diag_data - stab) + eps)
        data_dash = data_dash.masked_fill(keymask, 0.0)
    return data_dash


def linear_attention(q, k, v):
    D_inv = 1.0 / torch.einsum("...nd,...d->...n", q, k.sum(dim=-2))
    context = torch.einsum("...nd,...ne->...de", k, v)
    return torch.einsum("...de,...nd,...n->...ne", context, q, D_inv)


class FavorAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, self.h = cfg["d_model"], cfg["heads"]
        dk = d // self.h
        m = cfg["nb_features"] or int(dk * math.log(dk))
        bias = cfg["attn_bias"]
        self.eps = cfg["kernel_eps"]
        self.W_Q = nn.Linear(d, d, bias=bias)
        self.W_K = nn.Linear(d, d, bias=bias)
        self.W_V = nn.Linear(d, d, bias=bias)
        self.W_O = nn.Linear(d, d, bias=bias)
        self.register_buffer("projection_matrix", torch.zeros(m, dk))  # zoo's Ω, loaded by name

    def forward(self, x, pad):
        B, n, d = x.shape
        q, k, v = (t.view(B, n, self.h, -1).transpose(1, 2) for t in (self.W_Q(x), self.W_K(x), self.W_V(x)))
        fq = softmax_kernel(q, projection_matrix=self.projection_matrix, is_query=True, eps=self.eps)
        fk = softmax_kernel(k, projection_matrix=self.projection_matrix, is_query=False, eps=self.eps, pad=pad)
        out = linear_attention(fq, fk, v)
        return self.W_O(out.transpose(1, 2).reshape(B, n, d))


def check_features(model, cfg):
    """Ω's rows are orthogonal within each block of d_k rows; norms are √d_k or chi-like."""
    for layer in model.layers:
        w = layer.self_attn.projection_matrix.double()
        m, dk = w.shape
        for s in range(0, m, dk):
            blk = w[s : s + dk]
            u = blk / blk.norm(dim=1, keepdim=True)
            assert torch.allclose(u @ u.T, torch.eye(len(blk), dtype=torch.float64), atol=1e-6), "block not orthogonal"
        if cfg["feature_scaling"] == "sqrt_dk":
            assert torch.allclose(w.norm(dim=1), torch.full((m,), math.sqrt(dk), dtype=torch.float64), atol=1e-5)


def build(cfg):
    model = Encoder(cfg, lambda cfg, i: FavorAttention(cfg))
    orig = model.load_state_dict

    def load_and_check(state, strict=True):
        r = orig(state, strict=strict)
        check_features(model, cfg)
        return r

    model.load_state_dict = load_and_check
    return model


# ---- the encoder around the attention block (the seed's, with zoo's documented switches) ------

class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len):
        super().__init__()
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, d_model)
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)  # overwritten by zoo's table on load

    def forward(self, x):
        return x + self.pe[: x.size(1)]


class EncoderLayer(nn.Module):
    """post-LN (the seed, norm_first=False) or pre-LN (norm_first=True)."""

    def __init__(self, cfg, attn):
        super().__init__()
        d, dff, eps = cfg["d_model"], cfg["d_ff"], cfg["ln_eps"]
        act = nn.ReLU() if cfg["activation"] == "relu" else nn.GELU()  # exact erf GELU
        self.self_attn = attn
        self.ffn = nn.Sequential(nn.Linear(d, dff), act, nn.Linear(dff, d))
        self.norm1 = nn.LayerNorm(d, eps=eps)
        self.norm2 = nn.LayerNorm(d, eps=eps)
        self.norm_first = cfg["norm_first"]

    def forward(self, x, pad):
        if self.norm_first:
            x = x + self.self_attn(self.norm1(x), pad)
            return x + self.ffn(self.norm2(x))
        x = self.norm1(x + self.self_attn(x, pad))
        return self.norm2(x + self.ffn(x))


class Encoder(nn.Module):
    def __init__(self, cfg, make_attn, positions=True):
        super().__init__()
        d = cfg["d_model"]
        self.embedding = nn.Embedding(cfg["vocab"], d)
        self.pos_encoding = PositionalEncoding(d, cfg["max_len"]) if positions else None
        self.layers = nn.ModuleList([EncoderLayer(cfg, make_attn(cfg, i)) for i in range(cfg["layers"])])
        self.norm = nn.LayerNorm(d, eps=cfg["ln_eps"]) if cfg["norm_first"] else None
        self.fc = nn.Linear(d, cfg["vocab"])

    def forward(self, tokens, pad):
        """pad: (B, n) bool, True = padding. Returns (hidden, logits)."""
        x = self.embedding(tokens)
        if self.pos_encoding is not None:
            x = self.pos_encoding(x)
        for layer in self.layers:
            x = layer(x, pad)
        if self.norm is not None:
            x = self.norm(x)
        return x, self.fc(x)


# ---- safetensors, enough for F32 / I64 / BOOL ------------------------------------------------

DTYPES = {"F32": np.float32, "I64": np.int64, "BOOL": np.bool_}


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
        arr = np.frombuffer(raw[base + begin : base + end], dtype=DTYPES[info["dtype"]]).reshape(info["shape"])
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

LENGTHS = [37, 23, 1]  # batch 3: an odd length, a padded row, and a single token


def zoo_weights(sets, seed, path):
    zoo = os.environ.get("ZOO_BIN")  # a prebuilt zoo binary; default: go run ./cmd/zoo
    cmd = ([zoo] if zoo else ["go", "run", "./cmd/zoo"]) + ["export", VARIANT, "--seed", str(seed), "--weights", path]
    for k, v in sets.items():
        cmd += ["--set", f"{k}={str(v).lower() if isinstance(v, bool) else v}"]
    subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)


def batch_from_text():
    text = open(os.path.join(ROOT, "examples", "text.txt"), "rb").read()
    n = max(LENGTHS)
    tokens = np.zeros((len(LENGTHS), n), dtype=np.int64)
    start = 0
    for row, length in enumerate(LENGTHS):
        tokens[row, :length] = np.frombuffer(text[start : start + length], dtype=np.uint8).astype(np.int64) + 1
        start += length
    return tokens, tokens == 0


def fixtures():
    torch.set_num_threads(1)
    tokens, mask = batch_from_text()
    for name, sets, seed in CASES:
        with tempfile.TemporaryDirectory() as tmp:
            wpath = os.path.join(tmp, "w.safetensors")
            zoo_weights(sets, seed, wpath)
            state, meta, digest = read_safetensors(wpath)
        cfg = json.loads(meta["config"])  # every hyperparameter, defaults included
        model = build(cfg)
        model.load_state_dict(state, strict=True)  # every key and shape must match
        model.eval()
        with torch.no_grad():
            hidden, logits = model(torch.from_numpy(tokens), torch.from_numpy(mask))
        out = os.path.join(HERE, f"{name}.safetensors")
        write_safetensors(out, {"tokens": tokens, "key_padding_mask": mask, "hidden": hidden.numpy(),
                                "logits": logits.numpy()},
                          {"weights_sha256": digest, "set": json.dumps(sets, sort_keys=True), "seed": str(seed),
                           "torch": torch.__version__, "config": meta.get("config", "")})
        print(f"wrote {os.path.relpath(out, ROOT)}: hidden {tuple(hidden.shape)}, logits {tuple(logits.shape)}")


if __name__ == "__main__":
    fixtures()
