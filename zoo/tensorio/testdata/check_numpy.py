#!/usr/bin/python3
"""Checks that numpy reads files written by zoo/tensorio (run by TestNumpyReadsOurFiles).

Usage: check_numpy.py DIR. DIR holds NAME.npy and NAME.safetensors files, each with
NAME.json = {"dtype": "float32", "shape": [...], "data": [...]} (safetensors: a JSON object of
such entries plus "__metadata__"). Exits non-zero with a message on the first mismatch.
"""
import json
import os
import struct
import sys

import numpy as np

DT = {"F32": "<f4", "I32": "<i4", "I64": "<i8", "BOOL": "|b1"}


def same(name, arr, want):
    exp = np.array(want["data"], dtype=want["dtype"]).reshape(want["shape"])
    if arr.dtype != exp.dtype or arr.shape != exp.shape or arr.tobytes() != exp.tobytes():
        sys.exit(f"{name}: numpy read {arr.dtype}{arr.shape} {arr.ravel()[:8]}, want {exp.dtype}{exp.shape} {exp.ravel()[:8]}")


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    body = data[8 + n :]
    meta = header.pop("__metadata__", None)
    out = {}
    for k, v in header.items():
        b, e = v["data_offsets"]
        out[k] = np.frombuffer(body[b:e], dtype=DT[v["dtype"]]).reshape(v["shape"])
    return out, meta


def main():
    d = sys.argv[1]
    checked = 0
    for f in sorted(os.listdir(d)):
        stem, ext = os.path.splitext(f)
        if ext not in (".npy", ".safetensors"):
            continue
        with open(os.path.join(d, stem + ".json")) as jf:
            want = json.load(jf)
        path = os.path.join(d, f)
        if ext == ".npy":
            same(f, np.load(path, allow_pickle=False), want)
        else:
            tensors, meta = read_safetensors(path)
            wmeta = want.pop("__metadata__", None)
            if meta != wmeta:
                sys.exit(f"{f}: metadata {meta}, want {wmeta}")
            if sorted(tensors) != sorted(want):
                sys.exit(f"{f}: tensors {sorted(tensors)}, want {sorted(want)}")
            for k in want:
                same(f + ":" + k, tensors[k], want[k])
        checked += 1
    print(f"numpy read {checked} files")


main()
