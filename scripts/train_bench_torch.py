#!/usr/bin/python3
"""Training speed of the seed's vanilla encoder in PyTorch, the peer `scripts/train-bench.sh` compares zoo train against.

Run from the repository root with Debian's Python (torch 1.13):

    /usr/bin/python3 scripts/train_bench_torch.py --window 128 --batch 8 --threads 2 --steps 12

It trains the seed's Transformer (variants/vanilla/testdata/gen_fixtures.py: base, d 512, 8 heads,
6 layers, d_ff 2048, vocabulary 257, dropout 0.1, train mode) the way `zoo train vanilla` does by
default: windows of --window bytes of --input in file order (ids = byte + 1), BERT's masking of 15 %
of the positions (80 % id 0, 10 % a random id, 10 % unchanged), mean cross-entropy over the masked
positions, the global gradient norm clipped to 1.0, torch.optim.AdamW (lr 1e-4, weight decay 0.01).
A step is forward, backward, clip and the optimizer step, as zoo train times it; tokens per second
counts every token of the step's windows, as zoo train's log does. Debian's torch calls whatever
libblas.so.3 the system's alternatives point to: install libopenblas0-pthread first, or PyTorch runs
on netlib's reference BLAS and the comparison flatters zoo (the JSON names the BLAS it loaded). The first --skip steps (warm-up
of the allocator and of oneDNN's caches) are left out of the figure. One JSON line on stdout.
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "variants", "internal", "fixtures"))
sys.path.insert(0, os.path.join(ROOT, "variants", "vanilla", "testdata"))
import gen_fixtures as seed_module  # noqa: E402


def windows(path, n):
    data = np.frombuffer(open(path, "rb").read(), dtype=np.uint8).astype(np.int64) + 1
    whole = len(data) // n
    if whole == 0:
        raise SystemExit(f"{path}: shorter than one window of {n} bytes")
    return data[: whole * n].reshape(whole, n)


def mask_batch(ids, gen):
    """BERT's rule on a (B, n) batch: returns the corrupted ids and the targets (-100: not counted)."""
    picked = torch.rand(ids.shape, generator=gen) < 0.15
    targets = torch.where(picked, ids, torch.full_like(ids, -100))
    roll = torch.rand(ids.shape, generator=gen)
    x = ids.clone()
    x[picked & (roll < 0.8)] = 0
    rnd = picked & (roll >= 0.8) & (roll < 0.9)
    x[rnd] = torch.randint(1, 257, (int(rnd.sum()),), generator=gen)
    return x, targets


def blas():
    """The BLAS library this process loaded (after a first matrix product)."""
    with open("/proc/self/maps") as f:
        for line in f:
            name = os.path.basename(line.split()[-1])
            if "blas" in name or "mkl" in name:
                return name
    return "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--input", default=os.path.join(ROOT, "examples", "corpus", "kjv-genesis-exodus.txt"))
    ap.add_argument("--window", type=int, default=128)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--skip", type=int, default=2)
    a = ap.parse_args()
    if a.steps <= a.skip:
        raise SystemExit("--steps must be larger than --skip")
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    model = seed_module.Transformer(257, max_len=max(512, a.window)).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    data = torch.from_numpy(windows(a.input, a.window))
    timed, tokens = 0.0, 0
    for k in range(a.steps):
        rows = [(k * a.batch + i) % len(data) for i in range(a.batch)]
        x, y = mask_batch(data[rows], gen)
        t0 = time.perf_counter()
        _, logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, 257), y.reshape(-1), ignore_index=-100)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        dt = time.perf_counter() - t0
        if k >= a.skip:
            timed += dt
            tokens += x.numel()
    print(json.dumps({"peer": f"pytorch {torch.__version__}", "window": a.window, "batch": a.batch,
                      "blas": blas(), "threads": a.threads, "steps": a.steps - a.skip, "tokens_per_s": tokens / timed,
                      "final_loss": float(loss)}))


if __name__ == "__main__":
    main()
