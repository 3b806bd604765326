#!/usr/bin/python3
"""Parity fixtures for the alibi variant (attention with linear biases, encoder form).

Run from the repository root with Debian's Python (torch 1.13):

    /usr/bin/python3 variants/alibi/testdata/gen_fixtures.py

ZOO_BIN=path/to/zoo uses a prebuilt zoo binary instead of `go run ./cmd/zoo`. The safetensors
I/O, zoo's weights, the padded batch, the fixture loop and the encoder around the attention
block are shared with the other variants' scripts: variants/internal/fixtures/zoofixtures.py.

For each case it asks zoo for its weights (`zoo export alibi --weights`), loads them by name into
the independent PyTorch model below with strict=True, runs a padded batch of real text and
writes inputs and outputs to <case>.safetensors. The Go test rebuilds the same weights from the
seed, checks their sha256 and compares outputs on valid positions at atol 1e-5.

The attention is written from Press et al. 2021 and its reference code: `get_slopes` is copied
from ofirpress/attention_with_linear_biases (fairseq/models/transformer.py), and the
bidirectional bias follows MosaicBERT (mosaicml/examples bert_layers.py,
BertEncoder.rebuild_alibi_tensor): alibi = slopes[:, None, None] * -|j - i|, added to the scaled
scores together with -inf at padded keys. There is no positional embedding.
"""
import math
import os
import sys

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "internal", "fixtures"))
import zoofixtures as zf  # noqa: E402

VARIANT = "alibi"
CASES = [
    # name, --set overrides, seed
    ("tiny", {"d_model": 64, "heads": 4, "layers": 2, "d_ff": 128}, 1),
    # 6 heads is not a power of two: slopes of 4 heads, then every other slope of 8
    ("heads6_prenorm", {"d_model": 48, "heads": 6, "layers": 2, "d_ff": 96, "norm_first": True,
                        "activation": "gelu"}, 4),
    ("tiny_causal", {"d_model": 64, "heads": 4, "layers": 2, "d_ff": 128, "causal": True}, 6),
]


def get_slopes(n):
    def get_slopes_power_of_2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        ratio = start
        return [start * ratio ** i for i in range(n)]

    if math.log2(n).is_integer():
        return get_slopes_power_of_2(n)
    closest_power_of_2 = 2 ** math.floor(math.log2(n))
    return get_slopes_power_of_2(closest_power_of_2) + get_slopes(2 * closest_power_of_2)[0::2][: n - closest_power_of_2]


def alibi_tensor(n_heads, size):
    context_position = torch.arange(size)[:, None]
    memory_position = torch.arange(size)[None, :]
    relative_position = torch.abs(memory_position - context_position)
    relative_position = relative_position.unsqueeze(0).expand(n_heads, -1, -1)
    slopes = torch.Tensor(get_slopes(n_heads))
    return slopes.unsqueeze(1).unsqueeze(1) * -relative_position  # (h, n, n)


class ALiBiAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, self.h = cfg["d_model"], cfg["heads"]
        self.dk = d // self.h
        bias = cfg["attn_bias"]
        self.scale = cfg["scale"]
        self.causal = cfg["causal"]
        self.W_Q = nn.Linear(d, d, bias=bias)
        self.W_K = nn.Linear(d, d, bias=bias)
        self.W_V = nn.Linear(d, d, bias=bias)
        self.W_O = nn.Linear(d, d, bias=bias)

    def forward(self, x, pad):
        B, n, d = x.shape
        q = self.W_Q(x).view(B, n, self.h, self.dk).transpose(1, 2)
        k = self.W_K(x).view(B, n, self.h, self.dk).transpose(1, 2)
        v = self.W_V(x).view(B, n, self.h, self.dk).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-2, -1))
        scores = scores / math.sqrt(self.dk) if self.scale == 0 else scores * self.scale
        scores = scores + alibi_tensor(self.h, n)[None]
        scores = zf.mask_scores(scores, pad, self.causal)
        out = torch.matmul(torch.softmax(scores, dim=-1), v)
        return self.W_O(out.transpose(1, 2).reshape(B, n, d))


def build(cfg):
    assert get_slopes(8) == [2.0 ** -k for k in range(1, 9)]
    return zf.Encoder(cfg, lambda cfg, i: ALiBiAttention(cfg), positions=False)


if __name__ == "__main__":
    if "--grads" not in sys.argv:
        zf.generate(HERE, VARIANT, CASES, build, threads=1)
    zf.generate_grads(HERE, VARIANT, CASES[:2], build, threads=1)  # every parameter's gradient (--grads: only these)
