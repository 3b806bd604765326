#!/usr/bin/python3
"""Parity fixtures for the rope variant, from an independent PyTorch implementation.

Run from the repository root with Debian's Python (torch 1.13):

    /usr/bin/python3 variants/rope/testdata/gen_fixtures.py

For each case it asks zoo for its weights (`zoo export rope --weights`), loads them by name into
the PyTorch modules below with strict=True, runs a batch of real text with padding and writes
inputs and outputs to <case>.safetensors next to this script. The Go tests rebuild the same
weights from the seed, check their sha256 and compare outputs on valid positions.

The rotation follows HF transformers: models/llama/modeling_llama.py (rotate_half,
apply_rotary_pos_emb: pairs (i, i + d/2), cos = cat(freqs, freqs)) for the "half" layout and
models/roformer/modeling_roformer.py (apply_rotary_position_embeddings: pairs (2i, 2i+1),
repeat_interleave) for "interleaved"; partial rotary (rope_dim < d_k) rotates the first rope_dim
dimensions of each head as x-transformers does. The cos/sin tables are built here in float64 and
cast to float32 (HF RoFormer's recipe); zoo's rope.cos/rope.sin buffers are checked against them
and then dropped, so the reference runs on its own tables.

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


# ---- the model ------------------------------------------------------------------------------

def rope_tables(max_len, rot, base, layout):
    inv_freq = 1.0 / (base ** (torch.arange(0, rot, 2, dtype=torch.float64) / rot))   # (rot/2,)
    freqs = torch.outer(torch.arange(max_len, dtype=torch.float64), inv_freq)          # (max_len, rot/2)
    if layout == "half":
        emb = torch.cat((freqs, freqs), dim=-1)
    else:
        emb = torch.repeat_interleave(freqs, 2, dim=-1)
    return emb.cos().float(), emb.sin().float()


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def rotate_interleaved(x):
    return torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).reshape(x.shape)


def apply_rotary(x, cos, sin, rot, layout):
    xr, xp = x[..., :rot], x[..., rot:]
    r = rotate_half(xr) if layout == "half" else rotate_interleaved(xr)
    return torch.cat((xr * cos + r * sin, xp), dim=-1)


class RotarySelfAttention(nn.Module):
    def __init__(self, d_model, h, bias, scale, rot, layout, tables, causal=False):
        super().__init__()
        self.causal = causal
        self.d_model, self.h, self.d_k, self.scale, self.rot, self.layout = d_model, h, d_model // h, scale, rot, layout
        self.W_Q = nn.Linear(d_model, d_model, bias=bias)
        self.W_K = nn.Linear(d_model, d_model, bias=bias)
        self.W_V = nn.Linear(d_model, d_model, bias=bias)
        self.W_O = nn.Linear(d_model, d_model, bias=bias)
        self.tables = tables

    def forward(self, x, key_padding_mask):
        B, n, _ = x.shape
        split = lambda t: t.view(B, n, self.h, self.d_k).transpose(1, 2)
        q, k, v = split(self.W_Q(x)), split(self.W_K(x)), split(self.W_V(x))
        cos, sin = self.tables()
        cos, sin = cos[:n], sin[:n]                                  # positions 0..n-1
        q = apply_rotary(q, cos, sin, self.rot, self.layout)
        k = apply_rotary(k, cos, sin, self.rot, self.layout)
        scores = torch.matmul(q, k.transpose(-2, -1))
        scores = zf.scale_scores(scores, self.d_k, self.scale)
        scores = zf.mask_scores(scores, key_padding_mask, self.causal)
        out = torch.matmul(torch.softmax(scores, dim=-1), v)
        return self.W_O(out.transpose(1, 2).reshape(B, n, self.d_model))


class RoPEEncoder(zf.Encoder):
    def __init__(self, c):
        rot = c["rope_dim"] or c["d_model"] // c["heads"]
        tables = lambda: (self.cos, self.sin)
        super().__init__(c, lambda c, i: RotarySelfAttention(c["d_model"], c["heads"], c["attn_bias"], c["scale"], rot,
                                                           c["rope_layout"], tables, c["causal"]),
                         positions=False)  # no additive positions
        cos, sin = rope_tables(c["max_len"], rot, c["rope_base"], c["rope_layout"])
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)


# ---- fixtures -----------------------------------------------------------------------------------

TINY = {"d_model": 64, "heads": 4, "layers": 2, "d_ff": 128, "max_len": 128}
CASES = [
    # name, --set overrides, seed, lengths (batch rows; the longest sets n)
    ("tiny", dict(TINY), 1, [37, 23, 1]),
    ("tiny_interleaved", dict(TINY, rope_layout="interleaved"), 2, [37, 23, 1]),
    ("tiny_partial", dict(TINY, rope_dim=8), 3, [37, 23, 1]),
    ("tiny_prenorm", dict(TINY, norm_first=True, activation="gelu", attn_bias=False, ln_eps=1e-6, scale=1,
                          rope_layout="interleaved", rope_base=500.0), 4, [37, 23, 1]),
    ("base_layer", {"layers": 1, "max_len": 512}, 5, [37, 23, 1]),
    ("tiny_causal", dict(TINY, causal=True), 6, [37, 23, 1]),
]
DEFAULTS = {"vocab": 257, "d_model": 512, "heads": 8, "layers": 6, "d_ff": 2048, "max_len": 5000, "norm_first": False,
            "activation": "relu", "ln_eps": 1e-5, "rope_base": 10000.0, "rope_layout": "half", "rope_dim": 0,
            "attn_bias": True, "scale": 0.0, "causal": False, "dropout": 0.1}


def check_tables(name, cfg, model, state, tokens):
    """zoo ships its tables as buffers; they must equal ours, which the reference then uses."""
    table_err = max((state.pop("rope.cos") - model.cos).abs().max().item(),
                    (state.pop("rope.sin") - model.sin).abs().max().item())
    assert table_err <= 1e-6, f"{name}: zoo's rotation tables differ from torch's by {table_err}"
    return None, {"table_max_abs_diff": repr(table_err)}, f"tables differ by {table_err:.3g}"


if __name__ == "__main__":
    if "--grads" not in sys.argv:
        zf.generate(HERE, "rope", CASES, RoPEEncoder, defaults=DEFAULTS, extra=check_tables)
    zf.generate_grads(HERE, "rope", CASES[:2], RoPEEncoder, defaults=DEFAULTS, extra=check_tables)  # every parameter's gradient (--grads: only these)
