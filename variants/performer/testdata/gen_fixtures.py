#!/usr/bin/python3
"""Parity fixtures for the performer variant (FAVOR+, positive orthogonal random features).

Run from the repository root with Debian's Python (torch 1.13):

    /usr/bin/python3 variants/performer/testdata/gen_fixtures.py         # fixtures and ONNX exports
    /usr/bin/python3 variants/performer/testdata/gen_fixtures.py --onnx  # only the ONNX exports

ZOO_BIN=path/to/zoo uses a prebuilt zoo binary instead of `go run ./cmd/zoo`. The safetensors
I/O, zoo's weights, the padded batch, the fixture loop and the encoder around the attention
block are shared with the other variants' scripts: variants/internal/fixtures/zoofixtures.py.

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
import math
import os
import sys

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "internal", "fixtures"))
import zoofixtures as zf  # noqa: E402

VARIANT = "performer"
CASES = [
    # name, --set overrides, seed
    ("tiny", {"d_model": 64, "heads": 4, "layers": 2, "d_ff": 128}, 1),  # d_k 16: m = int(16 ln 16) = 44
    ("sqrt_prenorm", {"d_model": 64, "heads": 4, "layers": 2, "d_ff": 128, "norm_first": True, "activation": "gelu",
                      "nb_features": 24, "feature_scaling": "sqrt_dk", "kernel_eps": 1e-6, "attn_bias": False}, 6),
    ("tiny_causal", {"d_model": 64, "heads": 4, "layers": 2, "d_ff": 128, "causal": True}, 7),
]


def softmax_kernel(data, *, projection_matrix, is_query, normalize_data=True, eps=1e-4, pad=None, causal=False):
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
        if causal:  # zoo's causal keys are not stabilised: the max would reach into the future
            stab = torch.zeros_like(stab)
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
        self.causal = cfg["causal"]
        self.W_Q = nn.Linear(d, d, bias=bias)
        self.W_K = nn.Linear(d, d, bias=bias)
        self.W_V = nn.Linear(d, d, bias=bias)
        self.W_O = nn.Linear(d, d, bias=bias)
        self.register_buffer("projection_matrix", torch.zeros(m, dk))  # zoo's Ω, loaded by name

    def forward(self, x, pad):
        B, n, d = x.shape
        q, k, v = (t.view(B, n, self.h, -1).transpose(1, 2) for t in (self.W_Q(x), self.W_K(x), self.W_V(x)))
        fq = softmax_kernel(q, projection_matrix=self.projection_matrix, is_query=True, eps=self.eps)
        fk = softmax_kernel(k, projection_matrix=self.projection_matrix, is_query=False, eps=self.eps, pad=pad,
                            causal=self.causal)
        if self.causal:  # the lower-triangular form of causal_linear_attention (without its eps)
            A = torch.einsum("...nd,...md->...nm", fq, fk).tril()
            out = torch.einsum("...nm,...me->...ne", A, v) / A.sum(dim=-1, keepdim=True)
        else:
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
    model = zf.Encoder(cfg, lambda cfg, i: FavorAttention(cfg))
    orig = model.load_state_dict

    def load_and_check(state, strict=True):
        r = orig(state, strict=strict)
        check_features(model, cfg)
        return r

    model.load_state_dict = load_and_check
    return model


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
