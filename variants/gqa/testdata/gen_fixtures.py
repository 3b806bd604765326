#!/usr/bin/python3
"""Parity fixtures for the gqa variant (grouped-query / multi-query attention).

Run from the repository root with Debian's Python (torch 1.13):

    /usr/bin/python3 variants/gqa/testdata/gen_fixtures.py

ZOO_BIN=path/to/zoo uses a prebuilt zoo binary instead of `go run ./cmd/zoo`. The safetensors
I/O, zoo's weights, the padded batch, the fixture loop and the encoder around the attention
block are shared with the other variants' scripts: variants/internal/fixtures/zoofixtures.py.

For each case it asks zoo for its weights (`zoo export gqa --weights`), loads them by name into
the independent PyTorch model below with strict=True, runs a padded batch of real text and
writes inputs and outputs to <case>.safetensors. The Go test rebuilds the same weights from the
seed, checks their sha256 and compares outputs on valid positions at atol 1e-5.

The attention is written from Ainslie et al. 2023 and Hugging Face's LLaMA `repeat_kv` +
`eager_attention_forward`: K and V are projected to kv_heads heads and each is repeated
heads/kv_heads times with `repeat_interleave` along the head axis, so query head i reads
key/value head i // (heads/kv_heads). Padded keys get -inf before the softmax.
"""
import math
import os
import sys

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "internal", "fixtures"))
import zoofixtures as zf  # noqa: E402

VARIANT = "gqa"
CASES = [
    # name, --set overrides, seed
    ("tiny", {"d_model": 64, "heads": 4, "kv_heads": 2, "layers": 2, "d_ff": 128}, 1),
    ("mqa_prenorm", {"d_model": 64, "heads": 4, "kv_heads": 1, "layers": 2, "d_ff": 128, "norm_first": True,
                     "activation": "gelu", "attn_bias": False, "scale": 0.3}, 3),
    ("tiny_causal", {"d_model": 64, "heads": 4, "kv_heads": 2, "layers": 2, "d_ff": 128, "causal": True}, 6),
    ("mqa_causal", {"d_model": 64, "heads": 4, "kv_heads": 1, "layers": 2, "d_ff": 128, "causal": True}, 7),
]


class GroupedQueryAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, self.h, self.kv = cfg["d_model"], cfg["heads"], cfg["kv_heads"]
        self.dk = d // self.h
        bias = cfg["attn_bias"]
        self.scale = cfg["scale"]
        self.causal = cfg["causal"]
        self.W_Q = nn.Linear(d, self.h * self.dk, bias=bias)
        self.W_K = nn.Linear(d, self.kv * self.dk, bias=bias)
        self.W_V = nn.Linear(d, self.kv * self.dk, bias=bias)
        self.W_O = nn.Linear(d, d, bias=bias)

    def forward(self, x, pad):
        B, n, d = x.shape
        q = self.W_Q(x).view(B, n, self.h, self.dk).transpose(1, 2)
        k = self.W_K(x).view(B, n, self.kv, self.dk).transpose(1, 2)
        v = self.W_V(x).view(B, n, self.kv, self.dk).transpose(1, 2)
        rep = self.h // self.kv
        k = torch.repeat_interleave(k, rep, dim=1)  # head i -> kv head i // rep
        v = torch.repeat_interleave(v, rep, dim=1)
        scores = torch.matmul(q, k.transpose(-2, -1))
        scores = scores / math.sqrt(self.dk) if self.scale == 0 else scores * self.scale
        scores = zf.mask_scores(scores, pad, self.causal)
        out = torch.matmul(torch.softmax(scores, dim=-1), v)
        return self.W_O(out.transpose(1, 2).reshape(B, n, d))


def build(cfg):
    return zf.Encoder(cfg, lambda cfg, i: GroupedQueryAttention(cfg))


if __name__ == "__main__":
    if "--grads" not in sys.argv:
        zf.generate(HERE, VARIANT, CASES, build, threads=1)
    zf.generate_grads(HERE, VARIANT, CASES[:2], build, threads=1)  # every parameter's gradient (--grads: only these)
