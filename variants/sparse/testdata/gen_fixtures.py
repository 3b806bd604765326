#!/usr/bin/python3
"""Parity fixtures for the sparse variant, from an independent dense-masked PyTorch reference.

Run from the repository root with Debian's Python (torch 1.13):

    /usr/bin/python3 variants/sparse/testdata/gen_fixtures.py

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

The safetensors I/O, zoo's weights (ZOO_BIN=path/to/zoo uses a prebuilt zoo binary instead of
`go run ./cmd/zoo`), the padded batch, the fixture loop and the encoder around the attention
block are shared with the other variants' scripts: variants/internal/fixtures/zoofixtures.py.
"""
import os
import sys

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "internal", "fixtures"))
import zoofixtures as zf  # noqa: E402

NEG = -1e9


# ---- the model ------------------------------------------------------------------------------

def pattern(n, block, window, stride, global_tokens, causal=False):
    i = torch.arange(n)[:, None]
    j = torch.arange(n)[None, :]
    qb, kb = i // block, j // block
    keep = (qb - kb).abs() <= window
    if stride > 0:
        keep = keep | ((qb - kb) % stride == 0)
    if global_tokens > 0:
        keep = keep | (i < global_tokens) | (j < global_tokens)
    if causal:  # zoo's causal=true: never a key after the query
        keep = keep & (j <= i)
    return keep


class SparseSelfAttention(nn.Module):
    def __init__(self, d_model, h, bias, scale, block, window, stride, global_tokens, causal):
        super().__init__()
        self.d_model, self.h, self.d_k, self.scale = d_model, h, d_model // h, scale
        self.pat = (block, window, stride, global_tokens, causal)
        self.W_Q = nn.Linear(d_model, d_model, bias=bias)
        self.W_K = nn.Linear(d_model, d_model, bias=bias)
        self.W_V = nn.Linear(d_model, d_model, bias=bias)
        self.W_O = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, key_padding_mask):
        B, n, _ = x.shape
        split = lambda t: t.view(B, n, self.h, self.d_k).transpose(1, 2)
        q, k, v = split(self.W_Q(x)), split(self.W_K(x)), split(self.W_V(x))
        scores = torch.matmul(q, k.transpose(-2, -1))
        scores = zf.scale_scores(scores, self.d_k, self.scale)
        keep = pattern(n, *self.pat)[None, None] & ~key_padding_mask[:, None, None, :]
        scores = scores.masked_fill(~keep, NEG)
        out = torch.matmul(torch.softmax(scores, dim=-1), v)
        return self.W_O(out.transpose(1, 2).reshape(B, n, self.d_model))


class SparseEncoder(zf.Encoder):
    def __init__(self, c):
        super().__init__(c, lambda c, i: SparseSelfAttention(c["d_model"], c["heads"], c["attn_bias"], c["scale"], c["block"],
                                                           c["window"], c["stride"], c["global_tokens"], c["causal"]))


# ---- fixtures -----------------------------------------------------------------------------------

TINY = {"d_model": 64, "heads": 4, "layers": 2, "d_ff": 128, "max_len": 512, "block": 4}
CASES = [
    # name, --set overrides, seed, lengths (batch rows; the longest sets n)
    ("tiny", dict(TINY), 1, [37, 23, 1]),
    ("tiny_global", dict(TINY, global_tokens=3), 2, [37, 23, 1]),
    ("tiny_stride", dict(TINY, stride=3), 3, [37, 23, 1]),
    ("tiny_all", dict(TINY, block=3, window=2, stride=2, global_tokens=5), 4, [37, 23, 1]),
    ("tiny_prenorm", dict(TINY, norm_first=True, activation="gelu", attn_bias=False, ln_eps=1e-6, scale=1,
                          global_tokens=1), 5, [37, 23, 1]),
    ("tiny_long", dict(TINY, block=8, stride=4, global_tokens=2), 6, [300, 130]),
    ("base_layer", {"layers": 1, "block": 8, "stride": 2, "global_tokens": 2}, 7, [37, 23, 1]),
    ("tiny_causal", dict(TINY, causal=True), 8, [37, 23, 1]),
    ("tiny_causal_global", dict(TINY, block=3, window=2, global_tokens=5, causal=True), 9, [37, 23, 1]),
    ("tiny_causal_all", dict(TINY, block=3, window=1, stride=3, global_tokens=4, causal=True), 10, [37, 23, 1]),
]
DEFAULTS = {"vocab": 257, "d_model": 512, "heads": 8, "layers": 6, "d_ff": 2048, "max_len": 5000, "norm_first": False,
            "activation": "relu", "ln_eps": 1e-5, "block": 64, "window": 1, "stride": 0, "global_tokens": 0,
            "attn_bias": True, "scale": 0.0, "causal": False, "dropout": 0.1}


def with_pattern(name, cfg, model, state, tokens):
    """The fixture also carries the reference's (n, n) keep pattern."""
    n = tokens.shape[1]
    keep = pattern(n, cfg["block"], cfg["window"], cfg["stride"], cfg["global_tokens"], cfg["causal"])
    return {"pattern": keep.numpy()}, None, f"pattern keeps {keep.float().mean().item():.1%} of {n}x{n}"


if __name__ == "__main__":
    if "--grads" not in sys.argv:
        zf.generate(HERE, "sparse", CASES, SparseEncoder, defaults=DEFAULTS, extra=with_pattern)
    zf.generate_grads(HERE, "sparse", CASES[:2], SparseEncoder, defaults=DEFAULTS, extra=with_pattern)  # every parameter's gradient (--grads: only these)
