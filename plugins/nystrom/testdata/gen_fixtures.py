#!/usr/bin/python3
"""Parity fixtures for the nystrom variant (Nyströmformer).

Run from the repository root with Debian's Python (torch 1.13):

    /usr/bin/python3 plugins/nystrom/testdata/gen_fixtures.py

ZOO_BIN=path/to/zoo uses a prebuilt zoo binary instead of `go run ./cmd/zoo`.

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
import hashlib
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))

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
    return Encoder(cfg, lambda cfg, i: NystromAttention(cfg))


# ---- the encoder around the attention block (the seed's, with zoo's documented switches) ------

class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len):
        super().__init__()
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, d_model)
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)  # overwritten by zoo's table on load

    def forward(self, x):
        return x + self.pe[: x.size(1)]


class EncoderLayer(nn.Module):
    """post-LN (the seed, norm_first=False) or pre-LN (norm_first=True)."""

    def __init__(self, cfg, attn):
        super().__init__()
        d, dff, eps = cfg["d_model"], cfg["d_ff"], cfg["ln_eps"]
        act = nn.ReLU() if cfg["activation"] == "relu" else nn.GELU()  # exact erf GELU
        self.self_attn = attn
        self.ffn = nn.Sequential(nn.Linear(d, dff), act, nn.Linear(dff, d))
        self.norm1 = nn.LayerNorm(d, eps=eps)
        self.norm2 = nn.LayerNorm(d, eps=eps)
        self.norm_first = cfg["norm_first"]

    def forward(self, x, pad):
        if self.norm_first:
            x = x + self.self_attn(self.norm1(x), pad)
            return x + self.ffn(self.norm2(x))
        x = self.norm1(x + self.self_attn(x, pad))
        return self.norm2(x + self.ffn(x))


class Encoder(nn.Module):
    def __init__(self, cfg, make_attn, positions=True):
        super().__init__()
        d = cfg["d_model"]
        self.embedding = nn.Embedding(cfg["vocab"], d)
        self.pos_encoding = PositionalEncoding(d, cfg["max_len"]) if positions else None
        self.layers = nn.ModuleList([EncoderLayer(cfg, make_attn(cfg, i)) for i in range(cfg["layers"])])
        self.norm = nn.LayerNorm(d, eps=cfg["ln_eps"]) if cfg["norm_first"] else None
        self.fc = nn.Linear(d, cfg["vocab"])

    def forward(self, tokens, pad):
        """pad: (B, n) bool, True = padding. Returns (hidden, logits)."""
        x = self.embedding(tokens)
        if self.pos_encoding is not None:
            x = self.pos_encoding(x)
        for layer in self.layers:
            x = layer(x, pad)
        if self.norm is not None:
            x = self.norm(x)
        return x, self.fc(x)


# ---- safetensors, enough for F32 / I64 / BOOL ------------------------------------------------

DTYPES = {"F32": np.float32, "I64": np.int64, "BOOL": np.bool_}


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    meta = header.pop("__metadata__", {})
    base = 8 + n
    out = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        arr = np.frombuffer(raw[base + begin : base + end], dtype=DTYPES[info["dtype"]]).reshape(info["shape"])
        out[name] = torch.from_numpy(arr.copy())
    return out, meta, hashlib.sha256(raw).hexdigest()


def write_safetensors(path, tensors, meta):
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        arr = np.ascontiguousarray(tensors[name])
        code = {np.dtype(np.float32): "F32", np.dtype(np.int64): "I64", np.dtype(np.bool_): "BOOL"}[arr.dtype]
        data = arr.tobytes()
        header[name] = {"dtype": code, "shape": list(arr.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header["__metadata__"] = meta
    hb = json.dumps(header, sort_keys=True).encode()
    hb += b" " * (-len(hb) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)) + hb + b"".join(blobs))


# ---- fixtures -----------------------------------------------------------------------------------

LENGTHS = [37, 23, 1]  # batch 3: an odd length, a padded row, and a single token


def zoo_weights(sets, seed, path):
    zoo = os.environ.get("ZOO_BIN")  # a prebuilt zoo binary; default: go run ./cmd/zoo
    cmd = ([zoo] if zoo else ["go", "run", "./cmd/zoo"]) + ["export", VARIANT, "--seed", str(seed), "--weights", path]
    for k, v in sets.items():
        cmd += ["--set", f"{k}={str(v).lower() if isinstance(v, bool) else v}"]
    subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)


def batch_from_text():
    text = open(os.path.join(ROOT, "examples", "text.txt"), "rb").read()
    n = max(LENGTHS)
    tokens = np.zeros((len(LENGTHS), n), dtype=np.int64)
    start = 0
    for row, length in enumerate(LENGTHS):
        tokens[row, :length] = np.frombuffer(text[start : start + length], dtype=np.uint8).astype(np.int64) + 1
        start += length
    return tokens, tokens == 0


def fixtures():
    torch.set_num_threads(1)
    tokens, mask = batch_from_text()
    for name, sets, seed in CASES:
        with tempfile.TemporaryDirectory() as tmp:
            wpath = os.path.join(tmp, "w.safetensors")
            zoo_weights(sets, seed, wpath)
            state, meta, digest = read_safetensors(wpath)
        cfg = json.loads(meta["config"])  # every hyperparameter, defaults included
        model = build(cfg)
        model.load_state_dict(state, strict=True)  # every key and shape must match
        model.eval()
        with torch.no_grad():
            hidden, logits = model(torch.from_numpy(tokens), torch.from_numpy(mask))
        out = os.path.join(HERE, f"{name}.safetensors")
        write_safetensors(out, {"tokens": tokens, "key_padding_mask": mask, "hidden": hidden.numpy(),
                                "logits": logits.numpy()},
                          {"weights_sha256": digest, "set": json.dumps(sets, sort_keys=True), "seed": str(seed),
                           "torch": torch.__version__, "config": meta.get("config", "")})
        print(f"wrote {os.path.relpath(out, ROOT)}: hidden {tuple(hidden.shape)}, logits {tuple(logits.shape)}")


if __name__ == "__main__":
    fixtures()
