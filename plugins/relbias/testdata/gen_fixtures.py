#!/usr/bin/python3
"""Parity fixtures for the relbias variant, from an independent PyTorch implementation.

Run from the repository root with Debian's Python (torch 1.13):

    /usr/bin/python3 plugins/relbias/testdata/gen_fixtures.py

For each case it asks zoo for its weights (`zoo export relbias --weights`), loads them by name
into the PyTorch modules below with strict=True, runs a batch of real text with padding and
writes inputs and outputs to <case>.safetensors next to this script. The Go tests rebuild the
same weights from the seed, check their sha256 and compare outputs on valid positions.

The bias follows HF transformers models/t5/modeling_t5.py: _relative_position_bucket is copied
verbatim, compute_bias builds (1, h, n, n) from the (n, n) grid of memory - context positions,
only layer 0 has relative_attention_bias and its position_bias (with the padding mask added, as
T5Stack does) is reused by every later layer; scores are q k^T (/ sqrt(d_k) unless scale=false)
+ position_bias. The rest is the seed's encoder layer with zoo's conventions (LayerNorm,
post- or pre-norm). Each fixture also carries HF's buckets for j - i in [-600, 600]
("buckets_hf") so the Go test can check zoo's lookup table entry by entry.
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

def _relative_position_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
    """HF T5Attention._relative_position_bucket, verbatim."""
    relative_buckets = 0
    if bidirectional:
        num_buckets //= 2
        relative_buckets += (relative_position > 0).to(torch.long) * num_buckets
        relative_position = torch.abs(relative_position)
    else:
        relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
    # now relative_position is in the range [0, inf)

    # half of the buckets are for exact increments in positions
    max_exact = num_buckets // 2
    is_small = relative_position < max_exact

    # The other half of the buckets are for logarithmically bigger bins in positions up to max_distance
    relative_position_if_large = max_exact + (
        torch.log(relative_position.float() / max_exact)
        / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)
    ).to(torch.long)
    relative_position_if_large = torch.min(
        relative_position_if_large, torch.full_like(relative_position_if_large, num_buckets - 1)
    )

    relative_buckets += torch.where(is_small, relative_position, relative_position_if_large)
    return relative_buckets


class RelBiasSelfAttention(nn.Module):
    def __init__(self, d_model, h, bias, scale, has_relative_attention_bias, num_buckets, max_distance):
        super().__init__()
        self.d_model, self.h, self.d_k, self.scale = d_model, h, d_model // h, scale
        self.num_buckets, self.max_distance = num_buckets, max_distance
        self.W_Q = nn.Linear(d_model, d_model, bias=bias)
        self.W_K = nn.Linear(d_model, d_model, bias=bias)
        self.W_V = nn.Linear(d_model, d_model, bias=bias)
        self.W_O = nn.Linear(d_model, d_model, bias=bias)
        if has_relative_attention_bias:
            self.relative_attention_bias = nn.Embedding(num_buckets, h)

    def compute_bias(self, query_length, key_length):
        """HF T5Attention.compute_bias (encoder: bidirectional)."""
        context_position = torch.arange(query_length, dtype=torch.long)[:, None]
        memory_position = torch.arange(key_length, dtype=torch.long)[None, :]
        relative_position = memory_position - context_position  # shape (query_length, key_length)
        relative_position_bucket = _relative_position_bucket(
            relative_position, bidirectional=True, num_buckets=self.num_buckets, max_distance=self.max_distance)
        values = self.relative_attention_bias(relative_position_bucket)  # (q, k, h)
        return values.permute([2, 0, 1]).unsqueeze(0)  # (1, h, q, k)

    def forward(self, x, position_bias):
        B, n, _ = x.shape
        split = lambda t: t.view(B, n, self.h, self.d_k).transpose(1, 2)
        q, k, v = split(self.W_Q(x)), split(self.W_K(x)), split(self.W_V(x))
        scores = torch.matmul(q, k.transpose(-2, -1))
        if self.scale:
            scores = scores / math.sqrt(self.d_k)
        scores = scores + position_bias
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


class RelBiasEncoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        d, h = c["d_model"], c["heads"]
        self.embedding = nn.Embedding(c["vocab"], d)
        self.pos_encoding = PositionalEncoding(d, c["max_len"]) if c["pos_encoding"] == "sinusoidal" else None
        self.layers = nn.ModuleList([
            EncoderLayer(RelBiasSelfAttention(d, h, c["attn_bias"], c["scale"], i == 0, c["num_buckets"], c["max_distance"]),
                         d, c["d_ff"], c["norm_first"], c["activation"], c["ln_eps"]) for i in range(c["layers"])])
        if c["norm_first"]:
            self.norm = nn.LayerNorm(d, eps=c["ln_eps"])
        self.fc = nn.Linear(d, c["vocab"])
        self.norm_first = c["norm_first"]

    def forward(self, tokens, mask):
        x = self.embedding(tokens)
        if self.pos_encoding is not None:
            x = self.pos_encoding(x)
        n = tokens.shape[1]
        # T5Stack: layer 0 computes position_bias and adds the extended mask; later layers reuse it.
        position_bias = self.layers[0].self_attn.compute_bias(n, n)
        position_bias = position_bias + torch.zeros(mask.shape, dtype=torch.float32).masked_fill(mask, float("-inf"))[:, None, None, :]
        for layer in self.layers:
            x = layer(x, position_bias)
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

TINY = {"d_model": 64, "heads": 4, "layers": 2, "d_ff": 128}
T5 = {"scale": False, "norm_first": True, "attn_bias": False, "ln_eps": 1e-6}
CASES = [
    # name, --set overrides, seed, lengths (batch rows; the longest sets n)
    ("tiny", dict(TINY), 1, [37, 23, 1]),
    ("tiny_t5", dict(TINY, **T5), 2, [37, 23, 1]),
    # long enough for every bucket, including the clamped ones past max_distance
    ("tiny_long", dict(TINY, max_distance=64, num_buckets=16), 3, [300, 150]),
    ("tiny_sinusoidal", dict(TINY, pos_encoding="sinusoidal", max_len=128, activation="gelu"), 4, [37, 23, 1]),
    ("base_layer", {"layers": 1}, 5, [37, 23, 1]),
]
DEFAULTS = {"vocab": 257, "d_model": 512, "heads": 8, "layers": 6, "d_ff": 2048, "max_len": 5000, "norm_first": False,
            "activation": "relu", "ln_eps": 1e-5, "pos_encoding": "none", "num_buckets": 32, "max_distance": 128,
            "attn_bias": True, "scale": True}


def zoo_weights(sets, seed, path):
    cmd = ["go", "run", "./cmd/zoo", "export", "relbias", "--seed", str(seed), "--weights", path]
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
        model = RelBiasEncoder(cfg)
        model.load_state_dict(state, strict=True)
        model.eval()
        tokens, mask = batch_from_text(lengths)
        with torch.no_grad():
            hidden, logits = model(torch.from_numpy(tokens), torch.from_numpy(mask))
        rel = torch.arange(-600, 601, dtype=torch.long)
        buckets = _relative_position_bucket(rel, True, cfg["num_buckets"], cfg["max_distance"])
        out = os.path.join(HERE, f"{name}.safetensors")
        write_safetensors(out, {"tokens": tokens, "key_padding_mask": mask, "hidden": hidden.numpy(),
                                "logits": logits.numpy(), "buckets_hf": buckets.numpy()},
                          {"weights_sha256": digest, "set": json.dumps(sets, sort_keys=True), "seed": str(seed),
                           "torch": torch.__version__, "config": meta.get("config", "")})
        print(f"wrote {os.path.relpath(out, ROOT)}: hidden {tuple(hidden.shape)}, logits {tuple(logits.shape)}")


if __name__ == "__main__":
    fixtures()
