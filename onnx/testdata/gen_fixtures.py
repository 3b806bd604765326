#!/usr/bin/python3
"""Regenerate zoo's PyTorch ONNX fixtures (run from anywhere):

    /usr/bin/python3 onnx/testdata/gen_fixtures.py

Needs Debian's python3-torch (1.13) and python3-onnx (1.12); the python3 on PATH may be
another interpreter that does not see them, hence /usr/bin/python3.

For each activation (relu, gelu) and opset (11 to 17) it exports PyTorch's own
nn.TransformerEncoder (batch_first, 2 layers, d_model 64, 4 heads, d_ff 128, dropout 0,
post-LN, enable_nested_tensor=False) with dynamic batch/seq axes to
torch/enc_<act>_op<opset>.onnx, and writes next to it
  .src.npy   float32 (2, 37, 64)  the input
  .mask.npy  bool    (2, 37)      src_key_padding_mask, True = padding (row 1 has 8 pads)
  .out.npy   float32 (2, 37, 64)  PyTorch's output (padded positions are unspecified)
It also writes tiny_layer_op17.onnx (in this folder), one nn.TransformerEncoderLayer (d_model 8, 2 heads,
d_ff 16) with a padding mask, as a small seed for FuzzImport.
Inputs are named src and src_key_padding_mask, the output out. The weights depend only on
the seed, so all opsets of one activation hold the same model.
"""
import os

import numpy as np
import onnx
import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "torch")
B, N, D, H, FF, LAYERS = 2, 37, 64, 4, 128, 2
PADS = 8  # padded positions at the end of row 1


class Encoder(nn.Module):
    def __init__(self, activation):
        super().__init__()
        layer = nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, activation=activation, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False)

    def forward(self, src, src_key_padding_mask):
        return self.enc(src, src_key_padding_mask=src_key_padding_mask)


def main():
    os.makedirs(OUT, exist_ok=True)
    for act in ("relu", "gelu"):
        torch.manual_seed(1234 if act == "relu" else 5678)
        model = Encoder(act).eval()
        with torch.no_grad():  # the layers are deep copies: make them differ (and LayerNorm non-trivial)
            for p in model.parameters():
                p.add_(0.05 * torch.randn_like(p))
        src = torch.randn(B, N, D)
        mask = torch.zeros(B, N, dtype=torch.bool)
        mask[1, N - PADS:] = True
        # Grad stays enabled: under no_grad PyTorch takes the fused fast path
        # (aten::_transformer_encoder_layer_fwd), which does not export.
        out = model(src, mask).detach()
        for opset in (11, 12, 13, 14, 15, 16, 17):
            base = os.path.join(OUT, f"enc_{act}_op{opset}")
            torch.onnx.export(
                model, (src, mask), base + ".onnx",
                input_names=["src", "src_key_padding_mask"], output_names=["out"],
                dynamic_axes={"src": {0: "batch", 1: "seq"},
                              "src_key_padding_mask": {0: "batch", 1: "seq"},
                              "out": {0: "batch", 1: "seq"}},
                opset_version=opset, do_constant_folding=True)
            m = onnx.load(base + ".onnx")
            onnx.checker.check_model(m, full_check=True)
            np.save(base + ".src.npy", src.numpy().astype(np.float32))
            np.save(base + ".mask.npy", mask.numpy())
            np.save(base + ".out.npy", out.numpy().astype(np.float32))
            ops = sorted({n.op_type for n in m.graph.node})
            print(f"{base}.onnx: ir {m.ir_version}, opset {opset}, {len(m.graph.node)} nodes, ops {' '.join(ops)}")

    torch.manual_seed(42)
    tiny = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True).eval()
    src = torch.randn(1, 5, 8)
    mask = torch.zeros(1, 5, dtype=torch.bool)
    mask[0, 4] = True
    path = os.path.join(HERE, "tiny_layer_op17.onnx")
    torch.onnx.export(tiny, (src, None, mask), path, input_names=["src", "src_key_padding_mask"],
                      output_names=["out"], dynamic_axes={"src": {0: "batch", 1: "seq"},
                                                          "src_key_padding_mask": {0: "batch", 1: "seq"}},
                      opset_version=17)
    onnx.checker.check_model(onnx.load(path), full_check=True)
    print(f"{path}: {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
