#!/usr/bin/env python3
"""Compare two `zoo run --output FILE.json` results (e.g. CUDA and CPU) on valid positions.

    python3 scripts/gpu/compare_runs.py gpu.json cpu.json [--tol 1e-4]

Prints each file's backend, and per output the largest |a-b| / max(1, |b|) over the valid
(unpadded) positions given by "lengths"; exits 1 above the tolerance.
"""

import argparse
import json
import sys

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--tol", type=float, default=1e-4)
    args = ap.parse_args()
    a, b = (json.load(open(p)) for p in (args.a, args.b))
    print(f"{args.a}: backend {a['backend']}; {args.b}: backend {b['backend']}")
    bad = False
    for name, ob in b["outputs"].items():
        oa = a["outputs"][name]
        if oa["shape"] != ob["shape"]:
            print(f"{name}: shape {oa['shape']} vs {ob['shape']}")
            bad = True
            continue
        xa = np.asarray(oa["data"], dtype=np.float64).reshape(oa["shape"])
        xb = np.asarray(ob["data"], dtype=np.float64).reshape(ob["shape"])
        worst = 0.0
        for i, n in enumerate(b["lengths"]):
            d = np.abs(xa[i, :n] - xb[i, :n]) / np.maximum(1.0, np.abs(xb[i, :n]))
            worst = max(worst, float(d.max()) if d.size else 0.0)
        ok = worst <= args.tol
        bad |= not ok
        print(f"{name} {ob['shape']}: max rel diff {worst:.3g} ({'ok' if ok else 'ABOVE'} tolerance {args.tol:g})")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
