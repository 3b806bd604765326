#!/usr/bin/python3
"""Parity fixtures for the relbias variant, from an independent PyTorch implementation.

Run from the repository root with Debian's Python (torch 1.13):

    /usr/bin/python3 variants/relbias/testdata/gen_fixtures.py

For each case it asks zoo for its weights (`zoo export relbias --weights`), loads them by name
into the PyTorch modules below with strict=True, runs a batch of real text with padding and
writes inputs and outputs to <case>.safetensors next to this script. The Go tests rebuild the
same weights from the seed, check their sha256 and compare outputs on valid positions.

The bias follows HF transformers models/t5/modeling_t5.py: _relative_position_bucket is copied
verbatim, compute_bias builds (1, h, n, n) from the (n, n) grid of memory - context positions,
only layer 0 has relative_attention_bias and its position_bias (with the padding mask added, as
T5Stack does) is reused by every later layer; scores are q k^T, scaled as zoo's `scale` says
(zf.scale_scores: 0 divides by sqrt(d_k), the t5 case's 1 leaves them unscaled), plus
position_bias. The rest is the seed's encoder layer with zoo's conventions (LayerNorm, post- or
pre-norm). Each fixture also carries HF's buckets for j - i in [-600, 600]
("buckets_hf") so the Go test can check zoo's lookup table entry by entry.

The safetensors I/O, zoo's weights (ZOO_BIN=path/to/zoo uses a prebuilt zoo binary instead of
`go run ./cmd/zoo`), the padded batch, the fixture loop and the encoder around the attention
block are shared with the other variants' scripts: variants/internal/fixtures/zoofixtures.py.
"""
import math
import os
import sys

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "internal", "fixtures"))
import zoofixtures as zf  # noqa: E402


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
        scores = zf.scale_scores(scores, self.d_k, self.scale)
        scores = scores + position_bias
        out = torch.matmul(torch.softmax(scores, dim=-1), v)
        return self.W_O(out.transpose(1, 2).reshape(B, n, self.d_model))


class RelBiasEncoder(zf.Encoder):
    def __init__(self, c):
        super().__init__(c, lambda c, i: RelBiasSelfAttention(c["d_model"], c["heads"], c["attn_bias"], c["scale"], i == 0,
                                                            c["num_buckets"], c["max_distance"]),
                         positions=c["pos_encoding"] == "sinusoidal")
        self.causal = c["causal"]

    def forward(self, tokens, mask):
        n = tokens.shape[1]
        # T5Stack: layer 0 computes position_bias and adds the extended mask; later layers reuse it.
        position_bias = self.layers[0].self_attn.compute_bias(n, n)
        position_bias = position_bias + torch.zeros(mask.shape, dtype=torch.float32).masked_fill(mask, float("-inf"))[:, None, None, :]
        if self.causal:  # zoo's causal=true: keys after the query masked (the buckets stay bidirectional)
            position_bias = position_bias.masked_fill(zf.causal_future(n), float("-inf"))
        return super().forward(tokens, position_bias)


# ---- fixtures -----------------------------------------------------------------------------------

TINY = {"d_model": 64, "heads": 4, "layers": 2, "d_ff": 128}
T5 = {"scale": 1, "norm_first": True, "attn_bias": False, "ln_eps": 1e-6}
CASES = [
    # name, --set overrides, seed, lengths (batch rows; the longest sets n)
    ("tiny", dict(TINY), 1, [37, 23, 1]),
    ("tiny_t5", dict(TINY, **T5), 2, [37, 23, 1]),
    # long enough for every bucket, including the clamped ones past max_distance
    ("tiny_long", dict(TINY, max_distance=64, num_buckets=16), 3, [300, 150]),
    ("tiny_sinusoidal", dict(TINY, pos_encoding="sinusoidal", max_len=128, activation="gelu"), 4, [37, 23, 1]),
    ("base_layer", {"layers": 1}, 5, [37, 23, 1]),
    ("tiny_causal", dict(TINY, causal=True), 6, [37, 23, 1]),
]
DEFAULTS = {"vocab": 257, "d_model": 512, "heads": 8, "layers": 6, "d_ff": 2048, "max_len": 5000, "norm_first": False,
            "activation": "relu", "ln_eps": 1e-5, "pos_encoding": "none", "num_buckets": 32, "max_distance": 128,
            "attn_bias": True, "scale": 0.0, "causal": False, "dropout": 0.1}


def buckets_hf(name, cfg, model, state, tokens):
    """HF's buckets for j - i in [-600, 600], stored as the fixture's buckets_hf."""
    rel = torch.arange(-600, 601, dtype=torch.long)
    buckets = _relative_position_bucket(rel, True, cfg["num_buckets"], cfg["max_distance"])
    return {"buckets_hf": buckets.numpy()}, None, None


if __name__ == "__main__":
    if "--grads" not in sys.argv:
        zf.generate(HERE, "relbias", CASES, RelBiasEncoder, defaults=DEFAULTS, extra=buckets_hf)
    zf.generate_grads(HERE, "relbias", CASES[:2], RelBiasEncoder, defaults=DEFAULTS, extra=buckets_hf)  # every parameter's gradient (--grads: only these)
