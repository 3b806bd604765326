#!/usr/bin/env python3
"""PyTorch baselines for zoo's CUDA backend, on the same GPU: the seed's base encoder (6 layers,
d_model 512, 8 heads, d_ff 2048, post-LN, ReLU, vocab 257), batch 32, no padding, the token
pattern of zoo's benchmark (1 + (i*37+11) % 200).

Modes, each at every --n:
  eager fp32   the seed's modules as written (matmul, masked_fill(-inf), softmax, matmul), TF32 off
  eager tf32   the same with TF32 matrix products
  eager bf16   the same with the model and activations in bf16
  sdpa fp32 / sdpa bf16   attention through torch.nn.functional.scaled_dot_product_attention with the
               key-padding mask as its boolean attn_mask (zoo's semantics); PyTorch picks its kernel
  sdpa-nomask fp32 / bf16 the same without a mask (lets PyTorch use flash attention): a lower bound

Each line is the median over --reps forwards after warm-up, timed with CUDA events per forward:
"device" leaves hidden and logits on the GPU; "e2e" also copies both to host memory (.cpu()), as
zoo's Program.Run returns them.

    python3 scripts/gpu/bench_torch.py [--batch 32] [--n 512,2048] [--reps 10] [--root REPO]

The seed's modules come from variants/vanilla/testdata/gen_fixtures.py under --root (default: this
script's repository), so the baseline runs the reference the CPU parity tests use.
"""

import argparse
import importlib.util
import os
import statistics
import sys

import torch
import torch.nn.functional as F


def load_seed(root):
    sys.path.insert(0, os.path.join(root, "variants", "internal", "fixtures"))
    spec = importlib.util.spec_from_file_location(
        "vanilla_fixtures", os.path.join(root, "variants", "vanilla", "testdata", "gen_fixtures.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def sdpa_forward(self, X, key_padding_mask=None, use_mask=True):
    """The seed's MultiHeadAttention.forward with the score/softmax/product through SDPA."""
    b = X.size(0)
    Q = self.W_Q(X).view(b, -1, self.h, self.d_k).transpose(1, 2)
    K = self.W_K(X).view(b, -1, self.h, self.d_k).transpose(1, 2)
    V = self.W_V(X).view(b, -1, self.h, self.d_k).transpose(1, 2)
    mask = None
    if use_mask and key_padding_mask is not None:
        mask = ~key_padding_mask[:, None, None, :]  # True = attend
    out = F.scaled_dot_product_attention(Q, K, V, attn_mask=mask)
    return self.W_O(out.transpose(1, 2).contiguous().view(b, -1, self.d_model))


def time_ms(fn, reps, warm=3):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--n", default="512,2048")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--root", default=os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")))
    args = ap.parse_args()
    seed = load_seed(args.root)
    dev = torch.device("cuda")
    print(f"pytorch {torch.__version__} on {torch.cuda.get_device_name()}; "
          f"sdpa backends enabled: flash {torch.backends.cuda.flash_sdp_enabled()}, "
          f"mem-efficient {torch.backends.cuda.mem_efficient_sdp_enabled()}, math {torch.backends.cuda.math_sdp_enabled()}", flush=True)
    modes = [("eager", "fp32"), ("eager", "tf32"), ("eager", "bf16"), ("sdpa", "fp32"), ("sdpa", "bf16"),
             ("sdpa-nomask", "fp32"), ("sdpa-nomask", "bf16")]
    for n in [int(x) for x in args.n.split(",")]:
        i = torch.arange(args.batch * n, device=dev)
        x = (1 + (i * 37 + 11) % 200).view(args.batch, n)
        mask = torch.zeros(args.batch, n, dtype=torch.bool, device=dev)
        for attn, prec in modes:
            torch.manual_seed(0)
            model = seed.Transformer(257).eval().to(dev)
            if prec == "bf16":
                model = model.to(torch.bfloat16)
            for layer in model.layers:
                mha = layer.self_attn
                if attn == "sdpa":
                    mha.forward = sdpa_forward.__get__(mha)
                elif attn == "sdpa-nomask":
                    mha.forward = (lambda m: lambda X, kpm=None: sdpa_forward(m, X, kpm, use_mask=False))(mha)
            torch.backends.cuda.matmul.allow_tf32 = prec == "tf32"
            torch.backends.cudnn.allow_tf32 = prec == "tf32"
            try:
                with torch.no_grad():
                    dev_ms = time_ms(lambda: model(x, mask), args.reps)

                    def e2e():
                        h, lg = model(x, mask)
                        h.cpu(), lg.cpu()
                    e2e_ms = time_ms(e2e, max(3, args.reps // 2), warm=1)
                print(f"BENCH torch n={n} {attn} {prec}: device {dev_ms:.2f} ms/batch "
                      f"({args.batch * n / dev_ms * 1e3:.0f} tokens/s), e2e {e2e_ms:.2f} ms/batch", flush=True)
            except Exception as e:  # one mode failing (e.g. out of memory) must not hide the rest
                print(f"BENCH torch n={n} {attn} {prec}: failed: {type(e).__name__}: {str(e).splitlines()[0]}", flush=True)
            del model
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
