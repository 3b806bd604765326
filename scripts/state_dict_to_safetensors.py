#!/usr/bin/python3
"""Converts a PyTorch checkpoint (torch.save of a state_dict) to a .safetensors file that
`zoo run|eval|train|show|parity|bench --weights FILE` loads by name.

    /usr/bin/python3 scripts/state_dict_to_safetensors.py model.pt model.safetensors [--key state_dict] [--strip module.]

--key picks the state_dict out of a checkpoint that holds more (e.g. {"state_dict": ..., "optimizer": ...});
--strip removes a prefix from every name (nn.DataParallel saves "module.layers.0..."). Float tensors keep
their dtype (F32, F16, BF16, F64: zoo converts the last three to F32 when it loads them); integer and
bool tensors are written as I64, I32 and BOOL. It needs only torch (Debian's python3-torch 1.13 has no
safetensors package): the format is an 8-byte little-endian header length, a JSON header and the data.
"""
import argparse
import json
import os
import struct

import torch

CODES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64",
         torch.int64: "I64", torch.int32: "I32", torch.bool: "BOOL"}


def tensor_bytes(t):
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:  # numpy has no bfloat16: the same 16 bits as int16
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def write_safetensors(path, tensors, metadata=None):
    """Writes {name: tensor} (sorted by name) and optional string metadata to path."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name]
        if t.dtype not in CODES:
            raise SystemExit(f"{name}: dtype {t.dtype} has no safetensors code zoo reads")
        data = tensor_bytes(t)
        header[name] = {"dtype": CODES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    if metadata:
        header["__metadata__"] = metadata
    hb = json.dumps(header, sort_keys=True).encode()
    hb += b" " * (-len(hb) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)) + hb + b"".join(blobs))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint")
    ap.add_argument("output")
    ap.add_argument("--key", help="entry of the checkpoint that holds the state_dict")
    ap.add_argument("--strip", default="", help="prefix to remove from every name")
    a = ap.parse_args()
    obj = torch.load(a.checkpoint, map_location="cpu")
    if a.key:
        obj = obj[a.key]
    if hasattr(obj, "state_dict"):
        obj = obj.state_dict()
    state = {(k[len(a.strip):] if a.strip and k.startswith(a.strip) else k): v for k, v in obj.items()}
    write_safetensors(a.output, state, {"converted_from": os.path.basename(a.checkpoint)})
    print(f"wrote {a.output}: {len(state)} tensors")


if __name__ == "__main__":
    main()
