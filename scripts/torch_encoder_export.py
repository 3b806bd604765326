#!/usr/bin/python3
"""Export PyTorch's own nn.TransformerEncoder at the seed's base size (6 layers, d_model 512,
8 heads, d_ff 2048, ReLU, post-LN, batch_first, dropout 0) to ONNX, for
BenchmarkTorchExportVsORT: how fast zoo runs a graph it did not build, next to ONNX
Runtime on the same file. The weights (about 75 MB per file) are random and seeded, so
the files are not committed; regenerate them with Debian's python3-torch (1.13):

    /usr/bin/python3 scripts/torch_encoder_export.py DIR

writes DIR/torch_base_op14.onnx (PyTorch 1.13's default opset: LayerNorm written out in
elementary ops) and DIR/torch_base_op17.onnx (LayerNormalization), with inputs src
(batch, seq, 512) float32 and src_key_padding_mask (batch, seq) bool, output out.
"""
import os
import sys

import torch
from torch import nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(512, 8, 2048, dropout=0.0, activation="relu", batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 6, enable_nested_tensor=False)

    def forward(self, src, src_key_padding_mask):
        return self.enc(src, src_key_padding_mask=src_key_padding_mask)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: torch_encoder_export.py DIR")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(1)
    model = Encoder().eval()
    with torch.no_grad():  # the layers are deep copies: make them differ
        for p in model.parameters():
            p.add_(0.02 * torch.randn_like(p))
    src = torch.randn(1, 128, 512)
    mask = torch.zeros(1, 128, dtype=torch.bool)
    for opset in (14, 17):
        path = os.path.join(out, f"torch_base_op{opset}.onnx")
        # Grad stays enabled: under no_grad PyTorch takes the fused fast path, which does
        # not export.
        torch.onnx.export(
            model, (src, mask), path,
            input_names=["src", "src_key_padding_mask"], output_names=["out"],
            dynamic_axes={"src": {0: "batch", 1: "seq"},
                          "src_key_padding_mask": {0: "batch", 1: "seq"},
                          "out": {0: "batch", 1: "seq"}},
            opset_version=opset, do_constant_folding=True)
        print(path)


if __name__ == "__main__":
    main()
