#!/usr/bin/python3
"""Writes seed_training.safetensors: five steps of torch.optim on the seed's module, on zoo's batches.

Run from the repository root with Debian's Python (torch 1.13):

    /usr/bin/python3 cmd/zoo/testdata/train/gen_seed_training.py

(ZOO_BIN=path/to/zoo uses a prebuilt zoo for the initial weights instead of `go run ./cmd/zoo`.)

For each case it takes zoo's initial weights (`zoo export vanilla --weights`), loads them into the
seed's Transformer (variants/vanilla/testdata/gen_fixtures.py) with strict=True, and trains five
steps on the batches zoo train feeds (zoo's data pipeline, written by
`go run ./cmd/zoo/testdata/train/batches`): F.cross_entropy with ignore_index and label
smoothing, torch.nn.utils.clip_grad_norm_, and torch.optim.AdamW or SGD with the learning rate
of zoo's schedule set on the param group before each step. Dropout is off (model.eval()), as it is
in zoo train with --set dropout=0. It records each step's loss, gradient norm (before clipping)
and learning rate, and the parameters after the last step. The Go test TestSeedTrainingParity runs
zoo train with the same settings and compares (losses and weights at 1e-5).
"""
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "variants", "internal", "fixtures"))
sys.path.insert(0, os.path.join(ROOT, "variants", "vanilla", "testdata"))
import zoofixtures as zf  # noqa: E402
import gen_fixtures as seed_module  # noqa: E402

SETS = {"d_model": 32, "heads": 2, "layers": 2, "d_ff": 64, "max_len": 64}
SEED = 3  # zoo train has one --seed: the initial weights and the masks
DATA = {"input": "examples/text.txt", "window": 24, "batch": 3, "objective": "mlm", "seed": SEED, "steps": 5}
CASES = {
    "adamw": dict(optimizer="adamw", lr=1e-3, betas=[0.9, 0.999], eps=1e-8, weight_decay=0.01, momentum=0.0,
                  warmup=2, schedule="linear", label_smoothing=0.1, clip=1.0),
    "sgd": dict(optimizer="sgd", lr=0.05, betas=[0.9, 0.999], eps=1e-8, weight_decay=0.01, momentum=0.9,
                warmup=0, schedule="constant", label_smoothing=0.0, clip=1.0),
}


def lr_at(k, c, steps):
    if k <= c["warmup"]:
        return c["lr"] * k / c["warmup"]
    if c["schedule"] == "constant":
        return c["lr"]
    if c["schedule"] == "linear":
        return c["lr"] * (steps - k) / (steps - c["warmup"])
    return c["lr"] * 0.5 * (1 + math.cos(math.pi * (k - c["warmup"]) / (steps - c["warmup"])))


def zoo_batches():
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "b.safetensors")
        cmd = ["go", "run", "./cmd/zoo/testdata/train/batches"]
        for k, v in DATA.items():
            cmd += [f"-{k}", str(v)]
        subprocess.run(cmd + [out], cwd=ROOT, check=True)
        tensors, meta, _ = zf.read_safetensors(out)
        return tensors


def main():
    torch.set_num_threads(1)
    state, meta, digest = zf.export_weights("vanilla", SETS, SEED)
    cfg = json.loads(meta["config"])
    batches = zoo_batches()
    out = {name: t.numpy() for name, t in batches.items()}
    steps = DATA["steps"]
    for name, c in CASES.items():
        model = seed_module.build(cfg)
        model.load_state_dict(state, strict=True)
        model.eval()  # dropout off
        params = list(model.parameters())
        if c["optimizer"] == "adamw":
            opt = torch.optim.AdamW(params, lr=c["lr"], betas=tuple(c["betas"]), eps=c["eps"], weight_decay=c["weight_decay"])
        else:
            opt = torch.optim.SGD(params, lr=c["lr"], momentum=c["momentum"], weight_decay=c["weight_decay"])
        losses, norms, lrs = [], [], []
        for k in range(1, steps + 1):
            tokens, mask, targets = (batches[f"step{k}.{n}"] for n in ("tokens", "key_padding_mask", "targets"))
            opt.zero_grad()
            _, logits = model(tokens, mask)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-100,
                                   label_smoothing=c["label_smoothing"])
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(params, c["clip"])
            lr = lr_at(k, c, steps)
            for g in opt.param_groups:
                g["lr"] = lr
            opt.step()
            losses.append(loss.item())
            norms.append(norm.item())
            lrs.append(lr)
        out[f"{name}.loss"] = np.array(losses, dtype=np.float32)
        out[f"{name}.grad_norm"] = np.array(norms, dtype=np.float32)
        for pname, p in model.named_parameters():
            out[f"{name}.final.{pname}"] = p.detach().numpy().copy()
        print(f"{name}: losses {['%.6f' % x for x in losses]}, grad norms {['%.4f' % x for x in norms]}")
    md = {"set": json.dumps(SETS, sort_keys=True), "seed": str(SEED), "weights_sha256": digest, "torch": torch.__version__,
          "data": json.dumps(DATA, sort_keys=True), "cases": json.dumps(CASES, sort_keys=True)}
    path = os.path.join(HERE, "seed_training.safetensors")
    zf.write_safetensors(path, out, md)
    print(f"wrote {os.path.relpath(path, ROOT)}")


if __name__ == "__main__":
    main()
