#!/usr/bin/python3
"""Parity fixtures for the linformer variant, from an independent PyTorch implementation.

Run from the repository root with Debian's Python (torch 1.13):

    /usr/bin/python3 variants/linformer/testdata/gen_fixtures.py

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
        scores = zf.scale_scores(scores, self.d_k, self.scale)
        out = torch.matmul(torch.softmax(scores, dim=-1), vc)
        return self.W_O(out.transpose(1, 2).reshape(B, n, self.d_model))


class Linformer(zf.Encoder):
    def __init__(self, c):
        get = lambda: self.E
        super().__init__(c, lambda c, i: LinformerSelfAttention(c["d_model"], c["heads"], c["k"], c["max_len"], c["sharing"],
                                                              c["attn_bias"], c["scale"], get))
        if c["sharing"] == "layerwise":
            self.E = nn.Parameter(torch.empty(c["k"], c["max_len"]))


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


# ---- fixtures -----------------------------------------------------------------------------------

TINY = {"d_model": 64, "heads": 4, "layers": 2, "d_ff": 128, "k": 16, "max_len": 128}
CASES = [
    # name, --set overrides, seed, lengths (batch rows; the longest sets n)
    ("tiny", dict(TINY), 1, [37, 23, 1]),
    ("tiny_none", dict(TINY, sharing="none"), 2, [37, 23, 1]),
    ("tiny_kv", dict(TINY, sharing="key-value"), 3, [37, 23, 1]),
    ("tiny_layerwise", dict(TINY, sharing="layerwise"), 4, [37, 23, 1]),
    ("tiny_prenorm", dict(TINY, norm_first=True, activation="gelu", attn_bias=False, ln_eps=1e-6, scale=1), 5, [37, 23, 1]),
    # max_len == d_model and n == d_model: the only shape at which the seed's form runs at all
    ("tiny_n64", dict(TINY, max_len=64), 6, [64, 50]),
    ("base_layer", {"layers": 1, "max_len": 512}, 7, [37, 23, 1]),
]
DEFAULTS = {"vocab": 257, "d_model": 512, "heads": 8, "layers": 6, "d_ff": 2048, "max_len": 4096, "norm_first": False,
            "activation": "relu", "ln_eps": 1e-5, "k": 256, "sharing": "headwise", "attn_bias": True, "scale": 0.0}


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


def seed_form(name, cfg, model, state, tokens):
    """For "tiny", records the error the seed's form raises at n=37 (metadata seed_form_error_n37)."""
    if name != "tiny":
        return None
    err = check_seed_form(cfg, state)
    print(f"seed's form at n=37: {err}")
    return None, {"seed_form_error_n37": err}, None


if __name__ == "__main__":
    if "--grads" not in sys.argv:
        zf.generate(HERE, "linformer", CASES, Linformer, defaults=DEFAULTS, extra=seed_form)
    zf.generate_grads(HERE, "linformer", CASES[:2], Linformer, defaults=DEFAULTS, extra=seed_form)  # every parameter's gradient (--grads: only these)
