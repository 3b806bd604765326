#!/usr/bin/python3
"""PyTorch's cross-entropy for lmdata.Score's test (zoo/lmdata/loss_test.go).

    /usr/bin/python3 zoo/lmdata/testdata/gen_loss.py

Logits (3, 7, 257) drawn N(0, 3²) from torch.manual_seed(5), with a row of large logits to test the
log-sum-exp; targets in [0, 257) with -100 (ignore_index) at a third of the positions. For label
smoothing 0, 0.1 and 0.3 it records F.cross_entropy(reduction="mean", ignore_index=-100) and the
summed plain cross-entropy and argmax hits over counted positions.
"""
import os
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "variants", "internal", "fixtures"))
import zoofixtures as zf  # noqa: E402


def main():
    torch.manual_seed(5)
    B, N, V = 3, 7, 257
    logits = torch.randn(B, N, V) * 3
    logits[1, 2] += 80  # exp would overflow without the max shift
    targets = torch.randint(0, V, (B, N))
    targets[torch.rand(B, N) < 0.33] = -100
    targets[2, :] = -100  # a row with nothing counted
    targets[0, 0] = int(logits[0, 0].argmax())  # at least one hit
    flat, tgt = logits.reshape(-1, V), targets.reshape(-1)
    out = {"logits": logits.numpy(), "targets": targets.numpy()}
    counted = tgt != -100
    nll = F.cross_entropy(flat, tgt, ignore_index=-100, reduction="sum")
    out["nll_sum"] = nll.double().reshape(1).numpy()
    out["correct"] = (flat.argmax(-1)[counted] == tgt[counted]).sum().reshape(1).numpy()
    for eps in (0.0, 0.1, 0.3):
        loss = F.cross_entropy(flat, tgt, ignore_index=-100, label_smoothing=eps)
        out[f"loss_{eps}"] = loss.double().reshape(1).numpy()
    zf.write_safetensors(os.path.join(HERE, "cross_entropy.safetensors"),
                         {k: (v.astype("float32") if v.dtype.kind == "f" else v.astype("int64")) for k, v in out.items()},
                         {"torch": torch.__version__, "counted": str(int(counted.sum()))})
    print("wrote cross_entropy.safetensors:", int(counted.sum()), "counted positions")


if __name__ == "__main__":
    main()
