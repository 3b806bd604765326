#!/usr/bin/env python3
"""PyTorch eager baseline for zoo's CUDA backend: the seed's base encoder (6 layers,
d_model 512, 8 heads, d_ff 2048, post-LN, ReLU), batch 32, n = 512, on the GPU, fp32 (TF32
off) and TF32. The modules are copied from plugins/vanilla/testdata/gen_fixtures.py (the
seed's classes plus the key-padding mask). Prints one line per mode: ms per batch and
tokens/s, measured with CUDA events after warm-up, as the mean of timed repetitions.

    python3 scripts/gpu/bench_torch.py [--batch 32] [--n 512] [--reps 20]
"""

import argparse
import math

import torch
import torch.nn as nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model=512, h=8):
        super().__init__()
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
        attn_weights = torch.softmax(scores, dim=-1)
        output = torch.matmul(attn_weights, V)
        output = output.transpose(1, 2).contiguous().view(batch_size, -1, self.d_model)
        output = self.W_O(output)
        return output


class TransformerEncoderLayer(nn.Module):
    def __init__(self, d_model=512, h=8, d_ff=2048, dropout=0.1):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, h)
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
    def __init__(self, vocab_size, d_model=512, h=8, num_layers=6, d_ff=2048, max_len=5000):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.pos_encoding = PositionalEncoding(d_model, max_len)
        self.layers = nn.ModuleList([TransformerEncoderLayer(d_model, h, d_ff) for _ in range(num_layers)])
        self.fc = nn.Linear(d_model, vocab_size)

    def forward(self, X, key_padding_mask=None):
        """Returns (hidden, logits); the seed returns logits only."""
        X = self.embedding(X)
        X = self.pos_encoding(X)
        for layer in self.layers:
            X = layer(X, key_padding_mask)
        return X, self.fc(X)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    dev = torch.device("cuda")
    torch.manual_seed(0)
    model = Transformer(257).eval().to(dev)
    # The same token pattern as zoo's BenchmarkVanillaBase (1 + (i*37+11) % 200), no padding.
    i = torch.arange(args.batch * args.n, device=dev)
    x = (1 + (i * 37 + 11) % 200).view(args.batch, args.n)
    mask = torch.zeros(args.batch, args.n, dtype=torch.bool, device=dev)
    for mode in ("fp32", "tf32"):
        torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
        torch.backends.cudnn.allow_tf32 = mode == "tf32"
        with torch.no_grad():
            for _ in range(3):
                model(x, mask)
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(args.reps):
                model(x, mask)
            end.record()
            torch.cuda.synchronize()
        ms = start.elapsed_time(end) / args.reps
        print(f"pytorch {torch.__version__} eager {mode} on {torch.cuda.get_device_name()}: seed encoder base, "
              f"batch {args.batch}, n={args.n}: {ms:.2f} ms/batch, {args.batch * args.n / ms * 1e3:.0f} tokens/s")


if __name__ == "__main__":
    main()
