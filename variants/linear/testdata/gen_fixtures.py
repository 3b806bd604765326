#!/usr/bin/python3
"""Parity fixtures for the linear variant (Katharopoulos et al. 2020, linear attention).

Run from the repository root with Debian's Python (torch 1.13):

    /usr/bin/python3 variants/linear/testdata/gen_fixtures.py         # fixtures and ONNX exports
    /usr/bin/python3 variants/linear/testdata/gen_fixtures.py --onnx  # only the ONNX exports

ZOO_BIN=path/to/zoo uses a prebuilt zoo binary instead of `go run ./cmd/zoo`. The safetensors
I/O, zoo's weights, the padded batch, the fixture loop and the encoder around the attention
block are shared with the other variants' scripts: variants/internal/fixtures/zoofixtures.py.

For each case it asks zoo for its weights (`zoo export linear --weights`), loads them by name into
the independent PyTorch model below with strict=True, runs a padded batch of real text and
writes inputs and outputs to <case>.safetensors. The Go test rebuilds the same weights from the
seed, checks their sha256 and compares outputs on valid positions at atol 1e-5.

The attention core is idiap/fast-transformers' LinearAttention.forward
(fast_transformers/attention/linear_attention.py) with its elu_feature_map, in its (N, L, H, D)
layout and einsums: K is multiplied by the key-length mask after the feature map, Z is the
reciprocal of the normaliser plus eps. AttentionLayer's projections are named W_Q, W_K, W_V,
W_O here, as in the seed.
"""
import os
import sys

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "internal", "fixtures"))
import zoofixtures as zf  # noqa: E402

VARIANT = "linear"
CASES = [
    # name, --set overrides, seed
    ("tiny", {"d_model": 64, "heads": 4, "layers": 2, "d_ff": 128}, 1),
    ("prenorm_gelu", {"d_model": 64, "heads": 2, "layers": 2, "d_ff": 128, "norm_first": True,
                      "activation": "gelu", "attn_bias": False, "attn_eps": 1e-3}, 5),
    ("tiny_causal", {"d_model": 64, "heads": 4, "layers": 2, "d_ff": 128, "causal": True}, 6),
    ("prenorm_causal", {"d_model": 64, "heads": 2, "layers": 2, "d_ff": 128, "norm_first": True,
                        "activation": "gelu", "attn_eps": 1e-3, "causal": True}, 7),
]


def elu_feature_map(x):
    return torch.nn.functional.elu(x) + 1


class LinearAttention(nn.Module):
    """fast-transformers' LinearAttention, with AttentionLayer's projections around it."""

    def __init__(self, cfg):
        super().__init__()
        d, self.h = cfg["d_model"], cfg["heads"]
        bias = cfg["attn_bias"]
        self.eps = cfg["attn_eps"]
        self.causal = cfg["causal"]
        self.W_Q = nn.Linear(d, d, bias=bias)
        self.W_K = nn.Linear(d, d, bias=bias)
        self.W_V = nn.Linear(d, d, bias=bias)
        self.W_O = nn.Linear(d, d, bias=bias)

    def forward(self, x, pad):
        N, L, _ = x.shape
        queries = self.W_Q(x).view(N, L, self.h, -1)
        keys = self.W_K(x).view(N, L, self.h, -1)
        values = self.W_V(x).view(N, L, self.h, -1)
        Q = elu_feature_map(queries)
        K = elu_feature_map(keys)
        K = K * (~pad).float()[:, :, None, None]  # key_lengths.float_matrix
        if self.causal:
            # CausalLinearAttention: Z from the prefix sums of K; the numerator written as the
            # lower-triangular product (Q K^T) V instead of causal_linear's prefix sums
            Z = 1 / (torch.einsum("nlhi,nlhi->nlh", Q, K.cumsum(1)) + self.eps)
            A = torch.einsum("nlhd,nshd->nhls", Q, K).tril()
            V = torch.einsum("nhls,nshm->nlhm", A, values) * Z[:, :, :, None]
            return self.W_O(V.contiguous().view(N, L, -1))
        KV = torch.einsum("nshd,nshm->nhmd", K, values)
        Z = 1 / (torch.einsum("nlhd,nhd->nlh", Q, K.sum(dim=1)) + self.eps)
        V = torch.einsum("nlhd,nhmd,nlh->nlhm", Q, KV, Z)
        return self.W_O(V.contiguous().view(N, L, -1))


def build(cfg):
    return zf.Encoder(cfg, lambda cfg, i: LinearAttention(cfg))


def onnx_exports():
    """The tiny model (max_len 64) as torch.onnx.export writes it at opsets 14 and 17
    (torch_tiny_op14.onnx, torch_tiny_op17.onnx) and PyTorch's outputs (torch_tiny_outputs)."""
    zf.onnx_exports(HERE, VARIANT, "torch_tiny", dict(CASES[0][1], max_len=64), 3, build, threads=1)


if __name__ == "__main__":
    if "--onnx" in sys.argv:
        onnx_exports()
        sys.exit()
    if "--grads" not in sys.argv:
        onnx_exports()
        zf.generate(HERE, VARIANT, CASES, build, threads=1)
    zf.generate_grads(HERE, VARIANT, CASES[:2], build, threads=1)  # every parameter's gradient (--grads: only these)
