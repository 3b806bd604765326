#!/usr/bin/python3
"""Writes torch_optim.json: torch.optim's parameters after each of five steps.

Run with Debian's python3-torch (1.13):  /usr/bin/python3 gen_torch_optim.py
Each case starts from the same fixed parameters and feeds the same fixed gradients (seeded
randn, stored in the file so the Go test needs no torch RNG). The learning rate of step k
follows zoo's schedule (issue 18): lr*k/warmup while k <= warmup, then constant, linear
lr*(S-k)/(S-warmup) or cosine lr*0.5*(1+cos(pi*(k-warmup)/(S-warmup))); it is set on the
param group before each step, as a LambdaLR would. Clipping is
torch.nn.utils.clip_grad_norm_ over every parameter; grad_norm is its return value (the norm
before clipping).
"""
import json
import math
import os

import torch

STEPS = 5
SHAPES = [(4, 3), (3,), (2, 2, 2), (16, 9)]
# Gradient scales per step: some steps exceed the clip norm, some do not.
SCALES = [0.1, 3.0, 0.2, 5.0, 1.0]


def lr_at(k, lr, warmup, steps, schedule):
    if k <= warmup:
        return lr * k / warmup
    if schedule == "constant":
        return lr
    if schedule == "linear":
        return lr * (steps - k) / (steps - warmup)
    if schedule == "cosine":
        return lr * 0.5 * (1 + math.cos(math.pi * (k - warmup) / (steps - warmup)))
    raise ValueError(schedule)


CASES = [
    dict(name="adamw_warmup_linear_clip", optimizer="adamw", lr=1e-2, betas=(0.9, 0.999), eps=1e-8,
         weight_decay=0.1, warmup=2, schedule="linear", clip=1.0),
    dict(name="adamw_cosine_noclip", optimizer="adamw", lr=3e-3, betas=(0.8, 0.99), eps=1e-6,
         weight_decay=0.01, warmup=1, schedule="cosine", clip=0.0),
    dict(name="sgd_momentum_wd", optimizer="sgd", lr=0.1, momentum=0.9, weight_decay=0.01,
         warmup=0, schedule="constant", clip=0.0),
    dict(name="sgd_plain_wd_clip", optimizer="sgd", lr=0.05, momentum=0.0, weight_decay=0.1,
         warmup=0, schedule="linear", clip=0.5),
]


def flat(ts):
    return [float(x) for t in ts for x in t.reshape(-1).tolist()]


def main():
    g = torch.Generator().manual_seed(18)
    init = [torch.randn(s, generator=g) for s in SHAPES]
    grads = [[torch.randn(s, generator=g) * SCALES[k] for s in SHAPES] for k in range(STEPS)]
    out = {"shapes": [list(s) for s in SHAPES], "init": flat(init),
           "grads": [flat(gs) for gs in grads], "cases": []}
    for case in CASES:
        params = [torch.nn.Parameter(t.clone()) for t in init]
        if case["optimizer"] == "adamw":
            opt = torch.optim.AdamW(params, lr=case["lr"], betas=case["betas"], eps=case["eps"],
                                    weight_decay=case["weight_decay"])
        else:
            opt = torch.optim.SGD(params, lr=case["lr"], momentum=case["momentum"],
                                  weight_decay=case["weight_decay"])
        steps = []
        for k in range(1, STEPS + 1):
            for p, gr in zip(params, grads[k - 1]):
                p.grad = gr.clone()
            norm = None
            if case["clip"] > 0:
                norm = float(torch.nn.utils.clip_grad_norm_(params, case["clip"]))
            lr = lr_at(k, case["lr"], case["warmup"], STEPS, case["schedule"])
            for group in opt.param_groups:
                group["lr"] = lr
            opt.step()
            steps.append({"lr": lr, "grad_norm": norm, "params": flat(p.detach() for p in params)})
        c = dict(case)
        c["steps"] = steps
        out["cases"].append(c)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_optim.json")
    with open(path, "w") as f:
        json.dump(out, f)
        f.write("\n")
    print("wrote", path, "torch", torch.__version__)


if __name__ == "__main__":
    main()
