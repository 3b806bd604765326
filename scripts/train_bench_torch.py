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
import signal
import statistics
import subprocess
import sys
import tempfile
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


class TorchSteps:
    """The PyTorch side: the seed's model, its optimizer and its batches, kept warm between blocks."""

    def __init__(self, a):
        torch.set_num_threads(a.threads)
        torch.manual_seed(0)
        self.gen = torch.Generator().manual_seed(0)
        self.model = seed_module.Transformer(257, max_len=max(512, a.window)).train()
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
        self.data = torch.from_numpy(windows(a.input, a.window))
        self.batch = a.batch
        self.k = 0
        self.loss = float("nan")

    def run(self, steps):
        """Trains steps steps; returns the seconds they took and the tokens they held."""
        timed, tokens = 0.0, 0
        for _ in range(steps):
            rows = [(self.k * self.batch + i) % len(self.data) for i in range(self.batch)]
            self.k += 1
            x, y = mask_batch(self.data[rows], self.gen)
            t0 = time.perf_counter()
            _, logits = self.model(x)
            loss = F.cross_entropy(logits.reshape(-1, 257), y.reshape(-1), ignore_index=-100)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            self.opt.step()
            timed += time.perf_counter() - t0
            tokens += x.numel()
            self.loss = float(loss)
        return timed, tokens


class ZooSteps:
    """The zoo side: one `zoo train` process, stopped (SIGSTOP) between its blocks and resumed
    (SIGCONT) for the next, so that it stays warm (compiled, allocated) and both sides meet the
    same load. A block of k steps waits for k + 1 new lines of zoo's --log and counts the last k:
    the first is the step a SIGSTOP cut, whose time holds the pause."""

    def __init__(self, a, tmp):
        self.log = os.path.join(tmp, "zoo.jsonl")
        cmd = [a.zoo, "train", "vanilla", "--input", a.input, "--window", str(a.window), "--batch", str(a.batch),
               "--threads", str(a.threads), "--steps", "100000000", "--set", "dropout=0.1", "--schedule", "constant",
               "--log", self.log, "-o", os.path.join(tmp, "zoo.safetensors")]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.seen = 0

    def _lines(self):
        try:
            with open(self.log) as f:
                return [json.loads(l) for l in f if l.endswith("\n") and '"tokens_per_s"' in l]
        except FileNotFoundError:
            return []

    def run(self, steps, tokens_per_step, first=False):
        """Lets zoo train steps more steps; returns the seconds the counted ones took (each
        step's tokens over its logged tokens/s) and their tokens. The first call waits for
        the warm-up steps of a fresh process and counts them all."""
        if not first:
            os.kill(self.proc.pid, signal.SIGCONT)
        want = self.seen + steps + (0 if first else 1)
        while True:
            if self.proc.poll() is not None:
                raise SystemExit("zoo train ended: " + self.proc.stderr.read().decode(errors="replace"))
            lines = self._lines()
            if len(lines) >= want:
                break
            time.sleep(0.002)
        os.kill(self.proc.pid, signal.SIGSTOP)
        block = lines[want - steps:want]
        self.seen = want
        return sum(tokens_per_step / l["tokens_per_s"] for l in block), steps * tokens_per_step

    def close(self):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.kill()
            self.proc.wait()


def paired(a):
    """Alternates blocks of --block-steps steps of zoo and of PyTorch, --blocks pairs, each
    side warmed by --skip steps first, the order within a pair alternating (zoo first, then
    PyTorch first); prints the tokens/s of each block, the ratio of each pair, and the median
    ratio with its spread."""
    tokens_per_step = a.batch * a.window
    with tempfile.TemporaryDirectory() as tmp:
        z = ZooSteps(a, tmp)
        try:
            t = TorchSteps(a)
            z.run(a.skip, tokens_per_step, first=True)
            t.run(a.skip)
            pairs = []
            for i in range(a.blocks):
                def zoo_block():
                    sec, tok = z.run(a.block_steps, tokens_per_step)
                    return tok / sec

                def torch_block():
                    sec, tok = t.run(a.block_steps)
                    return tok / sec

                if i % 2 == 0:
                    zt = zoo_block()
                    pt = torch_block()
                else:
                    pt = torch_block()
                    zt = zoo_block()
                pairs.append({"zoo_tokens_per_s": zt, "torch_tokens_per_s": pt, "ratio": zt / pt})
        finally:
            z.close()
    ratios = sorted(p["ratio"] for p in pairs)
    med = statistics.median(ratios)
    return {"peer": f"pytorch {torch.__version__}", "blas": blas(), "window": a.window, "batch": a.batch, "threads": a.threads,
            "blocks": a.blocks, "block_steps": a.block_steps, "skip": a.skip, "pairs": pairs,
            "zoo_tokens_per_s": statistics.median(p["zoo_tokens_per_s"] for p in pairs),
            "torch_tokens_per_s": statistics.median(p["torch_tokens_per_s"] for p in pairs),
            "ratio_median": med, "ratio_min": ratios[0], "ratio_max": ratios[-1],
            "ratio_iqr": [statistics.quantiles(ratios, n=4, method="inclusive")[0], statistics.quantiles(ratios, n=4, method="inclusive")[2]] if len(ratios) > 1 else [med, med]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--input", default=os.path.join(ROOT, "examples", "corpus", "kjv-genesis-exodus.txt"))
    ap.add_argument("--window", type=int, default=128)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--skip", type=int, default=2)
    ap.add_argument("--zoo", help="a zoo binary: alternate blocks of its steps with PyTorch's (paired mode)")
    ap.add_argument("--blocks", type=int, default=6, help="paired mode: pairs of blocks")
    ap.add_argument("--block-steps", type=int, default=3, help="paired mode: steps per block")
    ap.add_argument("--profile", action="store_true", help="profile one step with torch.profiler after --skip warm-up steps: "
                    "the ops by self CPU time, as `zoo profile --train` lists zoo's")
    a = ap.parse_args()
    if a.profile:
        t = TorchSteps(a)
        t.run(a.skip)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            t.run(1)
        print(f"pytorch {torch.__version__} ({blas()}), vanilla base, one training step of batch {a.batch} x {a.window} tokens, {a.threads} threads")
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15))
        return
    if a.zoo:
        print(json.dumps(paired(a)))
        return
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
