#!/usr/bin/env python3
"""PyTorch eager baseline for zoo's CUDA backend: the seed's base encoder (6 layers,
d_model 512, 8 heads, d_ff 2048, post-LN, ReLU), batch 32, n = 512, on the GPU, fp32 (TF32
off) and TF32. The modules are imported from variants/vanilla/testdata/gen_fixtures.py (the
seed's classes plus the key-padding mask). Prints one line per mode: ms per batch and
tokens/s, measured with CUDA events after warm-up, as the mean of timed repetitions.

    python3 scripts/gpu/bench_torch.py [--batch 32] [--n 512] [--reps 20]
"""

import argparse
import importlib.util
import os

import torch


# The seed's modules (plus the key-padding mask) come from the vanilla fixture script, so the
# GPU baseline runs exactly the reference the CPU parity tests use.
_ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
_spec = importlib.util.spec_from_file_location(
    "vanilla_fixtures", os.path.join(_ROOT, "variants", "vanilla", "testdata", "gen_fixtures.py"))
_seed = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_seed)
Transformer = _seed.Transformer


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
