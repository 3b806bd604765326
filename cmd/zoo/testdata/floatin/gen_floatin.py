#!/usr/bin/python3
"""Writes the float-input fixtures of `zoo run --input x.npy|.npz|.safetensors` with PyTorch 1.13:

  vit.onnx    a ViT-style image encoder: Conv2d patch embedding (4x4 patches of a 3x16x16 image),
              a class token, learned positions, 2 pre-LN Transformer layers (GELU), final LayerNorm;
              input pixels float32 (batch, 3, 16, 16); outputs hidden (batch, 17, 32), pooled (batch, 32)
  audio.onnx  a wav2vec-style audio front end: two Conv1d (stride 5 and 2) with GELU, LayerNorm, a
              linear projection and 1 Transformer layer; inputs wave float32 (batch, samples) with a
              dynamic length, gain float32 (batch, 1); output features (batch, frames, 16)

and for each the inputs (x.npy / x.npz / x.safetensors) and PyTorch's outputs (expected.safetensors,
float32). Run from this directory: /usr/bin/python3 gen_floatin.py
"""
import json
import struct

import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(0)


class Layer(nn.Module):
    """A pre-LN Transformer encoder layer written out (PyTorch's fast path is not exportable)."""

    def __init__(self, d, h, ff):
        super().__init__()
        self.h = h
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ff1, self.ff2 = nn.Linear(d, ff), nn.Linear(ff, d)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        split = lambda t: t.reshape(b, n, self.h, d // self.h).transpose(1, 2)
        q, k, v = split(q), split(k), split(v)
        a = torch.softmax(q @ k.transpose(-1, -2) / (d // self.h) ** 0.5, dim=-1) @ v
        x = x + self.out(a.transpose(1, 2).reshape(b, n, d))
        return x + self.ff2(torch.nn.functional.gelu(self.ff1(self.ln2(x))))


class ViT(nn.Module):
    def __init__(self, d=32):
        super().__init__()
        self.patch = nn.Conv2d(3, d, kernel_size=4, stride=4)
        self.cls = nn.Parameter(torch.randn(1, 1, d) * 0.5)
        self.pos = nn.Parameter(torch.randn(1, 17, d) * 0.5)
        self.layers = nn.ModuleList([Layer(d, 4, 64) for _ in range(2)])
        self.ln = nn.LayerNorm(d)

    def forward(self, pixels):
        x = self.patch(pixels).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        for l in self.layers:
            x = l(x)
        x = self.ln(x)
        return x, x[:, 0]


class Audio(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.c1 = nn.Conv1d(1, 8, kernel_size=10, stride=5)
        self.c2 = nn.Conv1d(8, d, kernel_size=3, stride=2)
        self.ln = nn.LayerNorm(d)
        self.proj = nn.Linear(d, d)
        self.layer = Layer(d, 2, 32)

    def forward(self, wave, gain):
        x = (wave * gain).unsqueeze(1)
        x = torch.nn.functional.gelu(self.c2(torch.nn.functional.gelu(self.c1(x))))
        return self.layer(self.proj(self.ln(x.transpose(1, 2))))


def save_safetensors(path, tensors):
    hdr, off, blobs = {}, 0, []
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name], dtype="<f4")
        hdr[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
        off += a.nbytes
        blobs.append(a.tobytes())
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


with torch.no_grad():
    vit = ViT().eval()
    pixels = torch.randn(2, 3, 16, 16)
    torch.onnx.export(vit, (pixels,), "vit.onnx", opset_version=17, input_names=["pixels"],
                      output_names=["hidden", "pooled"], dynamic_axes={"pixels": {0: "batch"}})
    hidden, pooled = vit(pixels)
    np.save("vit-pixels.npy", pixels.numpy())
    # The same pixels as float64: zoo converts them to the input's float32.
    np.save("vit-pixels-f64.npy", pixels.numpy().astype("<f8"))
    save_safetensors("vit-expected.safetensors", {"hidden": hidden.numpy(), "pooled": pooled.numpy()})

    audio = Audio().eval()
    wave, gain = torch.randn(3, 400), torch.rand(3, 1) + 0.5
    torch.onnx.export(audio, (wave, gain), "audio.onnx", opset_version=17, input_names=["wave", "gain"],
                      output_names=["features"], dynamic_axes={"wave": {0: "batch", 1: "samples"}, "gain": {0: "batch"},
                                                              "features": {0: "batch", 1: "frames"}})
    np.savez("audio-inputs.npz", wave=wave.numpy(), gain=gain.numpy())
    save_safetensors("audio-inputs.safetensors", {"wave": wave.numpy(), "gain": gain.numpy()})
    save_safetensors("audio-expected.safetensors", {"features": audio(wave, gain).numpy()})
