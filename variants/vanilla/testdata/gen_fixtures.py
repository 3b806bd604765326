#!/usr/bin/python3
"""Parity fixtures for the vanilla variant, from the seed's PyTorch modules.

Run from the repository root with Debian's Python (torch 1.13):

    /usr/bin/python3 variants/vanilla/testdata/gen_fixtures.py          # write fixtures and ONNX exports
    /usr/bin/python3 variants/vanilla/testdata/gen_fixtures.py --bench  # PyTorch encoder speed
    /usr/bin/python3 variants/vanilla/testdata/gen_fixtures.py --grads  # only the gradient fixture

For each case it asks zoo for its weights (`zoo export --weights`), loads them by name into the
seed's modules with strict=True (so every state_dict key and shape must match), runs a batch of
real text with padding, and writes inputs and outputs to <case>.safetensors next to this script.
The Go tests rebuild the same weights from the seed, check their sha256 against the one recorded
here, and compare outputs on valid positions.

The safetensors I/O, zoo's weights (ZOO_BIN=path/to/zoo uses a prebuilt zoo binary instead of
`go run ./cmd/zoo`), the padded batch and the fixture loop are shared with the other variants'
scripts: variants/internal/fixtures/zoofixtures.py. The model is not: the seed's modules stay here.

The seed's modules are copied verbatim except for two additions the seed lacks: a key-padding
mask (True = padding) applied to the attention scores as -inf before the softmax, the same rule
as nn.MultiheadAttention's key_padding_mask, and zoo's causal=true (keys after the query masked
the same way, as nn.Transformer.generate_square_subsequent_mask).
"""
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "internal", "fixtures"))
import zoofixtures as zf  # noqa: E402


# ---- the seed's modules (shared/seed), plus the key-padding mask ---------------------------

class MultiHeadAttention(nn.Module):
    def __init__(self, d_model=512, h=8, causal=False):
        super().__init__()
        self.causal = causal  # added
        self.d_model = d_model
        self.h = h
        self.d_k = d_model // h
        self.W_Q = nn.Linear(d_model, d_model)
        self.W_K = nn.Linear(d_model, d_model)
        self.W_V = nn.Linear(d_model, d_model)
        self.W_O = nn.Linear(d_model, d_model)

    def forward(self, X, key_padding_mask=None):
        batch_size = X.size(0)
        Q = self.W_Q(X)
        K = self.W_K(X)
        V = self.W_V(X)
        Q = Q.view(batch_size, -1, self.h, self.d_k).transpose(1, 2)
        K = K.view(batch_size, -1, self.h, self.d_k).transpose(1, 2)
        V = V.view(batch_size, -1, self.h, self.d_k).transpose(1, 2)
        scores = torch.matmul(Q, K.transpose(-2, -1)) / math.sqrt(self.d_k)
        if key_padding_mask is not None:  # added: True = padding
            scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
        if self.causal:  # added: key j > query i
            scores = scores.masked_fill(zf.causal_future(scores.shape[-1]), float("-inf"))
        attn_weights = torch.softmax(scores, dim=-1)
        output = torch.matmul(attn_weights, V)
        output = output.transpose(1, 2).contiguous().view(batch_size, -1, self.d_model)
        output = self.W_O(output)
        return output


class TransformerEncoderLayer(nn.Module):
    def __init__(self, d_model=512, h=8, d_ff=2048, dropout=0.1, causal=False):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, h, causal)
        self.ffn = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, X, key_padding_mask=None):
        attn_output = self.self_attn(X, key_padding_mask)
        X = X + self.dropout(attn_output)
        X = self.norm1(X)
        ffn_output = self.ffn(X)
        X = X + self.dropout(ffn_output)
        X = self.norm2(X)
        return X


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=5000):
        super().__init__()
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, d_model)
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, X):
        return X + self.pe[: X.size(1)]


class Transformer(nn.Module):
    def __init__(self, vocab_size, d_model=512, h=8, num_layers=6, d_ff=2048, max_len=5000, causal=False):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.pos_encoding = PositionalEncoding(d_model, max_len)
        self.layers = nn.ModuleList([TransformerEncoderLayer(d_model, h, d_ff, causal=causal) for _ in range(num_layers)])
        self.fc = nn.Linear(d_model, vocab_size)

    def forward(self, X, key_padding_mask=None):
        """Returns (hidden, logits); the seed returns logits only."""
        X = self.embedding(X)
        X = self.pos_encoding(X)
        for layer in self.layers:
            X = layer(X, key_padding_mask)
        return X, self.fc(X)


# ---- fixtures -----------------------------------------------------------------------------------

CASES = [
    # name, --set overrides, seed
    ("tiny", {"d_model": 64, "heads": 4, "layers": 2, "d_ff": 128}, 1),
    ("base_layer", {"layers": 1}, 2),
    ("tiny_causal", {"d_model": 64, "heads": 4, "layers": 2, "d_ff": 128, "causal": True}, 6),
]


def build(cfg):
    """The seed's Transformer for zoo's resolved config (every hyperparameter, defaults included)."""
    return Transformer(cfg["vocab"], cfg["d_model"], cfg["heads"], cfg["layers"], cfg["d_ff"], max_len=cfg["max_len"],
                       causal=cfg.get("causal", False))


def onnx_exports():
    """The seed's encoder exported by PyTorch itself at opsets 14-17 (tiny, max_len 64), with the
    outputs PyTorch computes for the fixture batch: zoo must import and run what PyTorch writes."""
    sets = {"d_model": 64, "heads": 4, "layers": 2, "d_ff": 128, "max_len": 64}
    zf.onnx_exports(HERE, "vanilla", "seed_tiny", sets, 3, build, opsets=(14, 15, 16, 17))


def bench():
    """The seed's base encoder (6 layers, d 512, 8 heads, d_ff 2048), batch 1, eval, no grad."""
    threads = int(os.environ.get("ZOO_THREADS", os.cpu_count()))
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = Transformer(257).eval()
    text = open(os.path.join(zf.ROOT, "examples", "text.txt"), "rb").read()
    for n in (128, 512):
        ids = np.frombuffer((text * (n // len(text) + 1))[:n], dtype=np.uint8).astype(np.int64) + 1
        x = torch.from_numpy(ids).unsqueeze(0)
        with torch.no_grad():
            for _ in range(3):
                model(x)
            reps, t0 = 0, time.perf_counter()
            while time.perf_counter() - t0 < 3:
                model(x)
                reps += 1
        dt = (time.perf_counter() - t0) / reps
        print(f"pytorch {torch.__version__} seed encoder base, batch 1, n={n}, {threads} threads: "
              f"{dt * 1e3:.1f} ms, {n / dt:.0f} tokens/s")


if __name__ == "__main__":
    if "--bench" in sys.argv:
        bench()
    elif "--grads" in sys.argv:
        zf.generate_grads(HERE, "vanilla", CASES[:1], build)
    else:
        zf.generate(HERE, "vanilla", CASES, build)
        onnx_exports()
        zf.generate_grads(HERE, "vanilla", CASES[:1], build)
