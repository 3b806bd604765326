#!/usr/bin/python3
"""Parity fixtures for the nystrom variant (Nyströmformer).

Run from the repository root with Debian's Python (torch 1.13):

    /usr/bin/python3 variants/nystrom/testdata/gen_fixtures.py

ZOO_BIN=path/to/zoo uses a prebuilt zoo binary instead of `go run ./cmd/zoo`. The safetensors
I/O, zoo's weights, the padded batch, the fixture loop and the encoder around the attention
block are shared with the other variants' scripts: variants/internal/fixtures/zoofixtures.py.

For each case it asks zoo for its weights (`zoo export nystrom --weights`), loads them by name
into the independent PyTorch model below with strict=True, runs a padded batch of real text and
writes inputs and outputs to <case>.safetensors. The Go test rebuilds the same weights from the
seed, checks their sha256 and compares outputs on valid positions at atol 1e-5. The comparison
is with the Nyström approximation's own math, not with exact softmax.

The attention core is the authors' NystromAttention.forward and iterative_inv
(mlpen/Nystromformer, code/attention_nystrom.py) without the optional conv. As in the authors'
pipeline, the sequence is right-padded with masked positions to a multiple of num_landmarks
(here: Q, K, V and the mask, to n' = m·ceil(n/m)) before the reference runs, and the output is
cut back to n. The reference's num_landmarks == seq_len exact-softmax branch is left out, as in
zoo. init "original" uses the global max over batch and heads, exactly as the reference;
"per_matrix" is the reference's other (unreachable) init option.
"""
import math
import os
import sys

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "internal", "fixtures"))
import zoofixtures as zf  # noqa: E402

VARIANT = "nystrom"
CASES = [
    # name, --set overrides, seed   (n = 37 is padded to 40: 8 landmarks of 5 rows, or 5 of 8)
    ("tiny", {"d_model": 64, "heads": 4, "layers": 2, "d_ff": 128, "num_landmarks": 8}, 1),
    ("per_matrix_prenorm", {"d_model": 64, "heads": 4, "layers": 2, "d_ff": 128, "num_landmarks": 5,
                            "pinv_init": "per_matrix", "norm_first": True, "activation": "gelu"}, 7),
]


class NystromCore(nn.Module):
    """NystromAttention from mlpen/Nystromformer; Q, K, V (B, h, n, dk), mask (B, n) float 1 = keep."""

    def __init__(self, head_dim, num_head, num_landmarks, seq_len, init_option, n_iter):
        super().__init__()
        self.head_dim = head_dim
        self.num_head = num_head
        self.num_landmarks = num_landmarks
        self.seq_len = seq_len
        self.init_option = init_option
        self.n_iter = n_iter

    def forward(self, Q, K, V, mask):
        Q = Q * mask[:, None, :, None] / math.sqrt(math.sqrt(self.head_dim))
        K = K * mask[:, None, :, None] / math.sqrt(math.sqrt(self.head_dim))
        Q_landmarks = Q.reshape(-1, self.num_head, self.num_landmarks, self.seq_len // self.num_landmarks, self.head_dim).mean(dim=-2)
        K_landmarks = K.reshape(-1, self.num_head, self.num_landmarks, self.seq_len // self.num_landmarks, self.head_dim).mean(dim=-2)
        kernel_1 = torch.nn.functional.softmax(torch.matmul(Q, K_landmarks.transpose(-1, -2)), dim=-1)
        kernel_2 = torch.nn.functional.softmax(torch.matmul(Q_landmarks, K_landmarks.transpose(-1, -2)), dim=-1)
        kernel_3 = torch.nn.functional.softmax(torch.matmul(Q_landmarks, K.transpose(-1, -2)) - 1e9 * (1 - mask[:, None, None, :]), dim=-1)
        return torch.matmul(torch.matmul(kernel_1, self.iterative_inv(kernel_2, self.n_iter)), torch.matmul(kernel_3, V))

    def iterative_inv(self, mat, n_iter=6):
        I = torch.eye(mat.size(-1), device=mat.device)
        K = mat
        if self.init_option == "original":
            V = 1 / torch.max(torch.sum(K, dim=-2)) * K.transpose(-1, -2)
        else:
            V = 1 / torch.max(torch.sum(K, dim=-2), dim=-1).values[:, :, None, None] * K.transpose(-1, -2)
        for _ in range(n_iter):
            KV = torch.matmul(K, V)
            V = torch.matmul(0.25 * V, 13 * I - torch.matmul(KV, 15 * I - torch.matmul(KV, 7 * I - KV)))
        return V


class NystromAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, self.h = cfg["d_model"], cfg["heads"]
        self.dk = d // self.h
        self.m = cfg["num_landmarks"]
        self.init_option, self.n_iter = cfg["pinv_init"], cfg["pinv_iterations"]
        bias = cfg["attn_bias"]
        self.W_Q = nn.Linear(d, d, bias=bias)
        self.W_K = nn.Linear(d, d, bias=bias)
        self.W_V = nn.Linear(d, d, bias=bias)
        self.W_O = nn.Linear(d, d, bias=bias)

    def forward(self, x, pad):
        B, n, d = x.shape
        q, k, v = (t.view(B, n, self.h, -1).transpose(1, 2) for t in (self.W_Q(x), self.W_K(x), self.W_V(x)))
        mask = (~pad).float()
        n2 = -(-n // self.m) * self.m  # right-pad to a multiple of the landmark count
        ext = n2 - n
        q, k, v = (torch.nn.functional.pad(t, (0, 0, 0, ext)) for t in (q, k, v))
        mask = torch.nn.functional.pad(mask, (0, ext))
        core = NystromCore(self.dk, self.h, self.m, n2, self.init_option, self.n_iter)
        out = core(q, k, v, mask)[:, :, :n]
        return self.W_O(out.transpose(1, 2).reshape(B, n, d))


def build(cfg):
    return zf.Encoder(cfg, lambda cfg, i: NystromAttention(cfg))


if __name__ == "__main__":
    if "--grads" not in sys.argv:
        zf.generate(HERE, VARIANT, CASES, build, threads=1)
    zf.generate_grads(HERE, VARIANT, CASES[:2], build, threads=1)  # every parameter's gradient (--grads: only these)
