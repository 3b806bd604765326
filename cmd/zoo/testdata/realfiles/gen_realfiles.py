#!/usr/bin/python3
"""Writes one small PyTorch export per real-file defect of issue 29, for the real-process
tests of cmd/zoo/realfiles_test.go (zoo run, parity, bench and show on each):

  sliced_table.onnx    token ids -> a Transformer encoder layer, positions added as x + pe[:n]
                       (PyTorch's classic sinusoidal encoding: Shape -> Slice of a 16-row
                       table); zoo took 512 as its maximum length and failed in Add beyond 16.
  gather_range.onnx    the same model with pe[torch.arange(n)] (Gather(table, Range(0, n))),
                       Range's bounds fed as one-element vectors: ONNX Runtime 1.30 loads it, but
                       the Slice its extended optimizer fuses from Range -> Gather fails at run
                       time ("Starts must be a 1-D array"); zoo parity reported that error
                       instead of retrying at level basic.
  float16.onnx         a Hugging Face-style encoder (input_ids, attention_mask) converted to
                       float16 throughout (initializers, casts, constants, output), as a float16
                       conversion of a PyTorch export leaves it; zoo parity crashed on it and zoo
                       bench refused its int64 attention mask.
  external_data.onnx   the same encoder in float32 with every initializer in
                       external_data.onnx.data; zoo parity refused it.

Every vocabulary is 257 rows, zoo's byte tokenizer's. Run with Debian's python3-torch (1.13)
and python3-onnx (1.12):  /usr/bin/python3 gen_realfiles.py
"""
import math
import os

import numpy as np
import onnx
import torch
from onnx import TensorProto, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
VOCAB, D, HEADS, FF, MAX_LEN = 257, 16, 2, 32, 16


def sinusoidal(rows, d):
    pos = torch.arange(rows, dtype=torch.float32).unsqueeze(1)
    div = torch.exp(torch.arange(0, d, 2, dtype=torch.float32) * (-math.log(10000.0) / d))
    pe = torch.zeros(rows, d)
    pe[:, 0::2] = torch.sin(pos * div)
    pe[:, 1::2] = torch.cos(pos * div)
    return pe


class PositionalEncoder(torch.nn.Module):
    """Token embedding, a sinusoidal table of MAX_LEN rows, one encoder layer."""

    def __init__(self, gather):
        super().__init__()
        self.gather = gather
        self.emb = torch.nn.Embedding(VOCAB, D)
        self.register_buffer("pe", sinusoidal(MAX_LEN, D))
        self.layer = torch.nn.TransformerEncoderLayer(D, HEADS, FF, dropout=0.0, batch_first=True)

    def forward(self, ids):
        x = self.emb(ids)
        if self.gather:
            x = x + self.pe[torch.arange(ids.size(1))]
        else:
            x = x + self.pe[: ids.size(1)]
        return self.layer(x)


class HFEncoder(torch.nn.Module):
    """Hugging Face's inputs: ids, an int64 attention mask (1 = keep) that masks the keys."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(VOCAB, D)
        self.pos = torch.nn.Embedding(64, D)
        self.layer = torch.nn.TransformerEncoderLayer(D, HEADS, FF, dropout=0.0, batch_first=True)

    def forward(self, input_ids, attention_mask):
        x = self.emb(input_ids) + self.pos(torch.arange(input_ids.size(1)))
        return self.layer(x, src_key_padding_mask=attention_mask == 0)


def export(model, args, names, path):
    # With gradients on, PyTorch 1.13 skips the encoder layer's fused fast path, which has
    # no ONNX export.
    axes = {n: {0: "batch", 1: "seq"} for n in names}
    axes["hidden"] = {0: "batch", 1: "seq"}
    torch.onnx.export(model, args, path, opset_version=17, input_names=names, output_names=["hidden"],
                      dynamic_axes=axes, do_constant_folding=True)
    m = onnx.load(path)
    onnx.checker.check_model(m)
    return m


def range_of_vectors(m):
    """Feeds m's Range its bounds as one-element vectors (ONNX Runtime's Range takes them as
    scalars): ONNX Runtime's extended optimizer fuses Range -> Gather into a Slice whose
    starts it unsqueezes to (1, 1), and the session fails to load at its default level."""
    g = m.graph
    one = numpy_helper.from_array(np.array([1], dtype=np.int64), "range_vector_shape")
    g.initializer.append(one)
    for n in list(g.node):
        if n.op_type != "Range":
            continue
        for i, name in enumerate(list(n.input)):
            vec = name + "_vector"
            g.node.insert(list(g.node).index(n), onnx.helper.make_node("Reshape", [name, one.name], [vec]))
            n.input[i] = vec
    onnx.checker.check_model(m)
    return m


def to_float16(m):
    """Every float32 tensor of m becomes float16: initializers, Constant values, Cast targets,
    the graph's inputs, outputs and value_info."""
    g = m.graph
    for t in g.initializer:
        if t.data_type == TensorProto.FLOAT:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16), t.name))
    for n in g.node:
        for a in n.attribute:
            if a.name == "to" and a.i == TensorProto.FLOAT:
                a.i = TensorProto.FLOAT16
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == TensorProto.FLOAT:
                a.t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(a.t).astype(np.float16), a.t.name))
    for v in list(g.input) + list(g.output) + list(g.value_info):
        if v.type.tensor_type.elem_type == TensorProto.FLOAT:
            v.type.tensor_type.elem_type = TensorProto.FLOAT16
    onnx.checker.check_model(m)
    return m


def main():
    torch.manual_seed(29)
    ids = torch.randint(1, VOCAB, (2, 7))
    mask = torch.ones(2, 7, dtype=torch.int64)
    mask[1, 5:] = 0
    for name, gather in [("sliced_table", False), ("gather_range", True)]:
        model = PositionalEncoder(gather).eval()
        path = os.path.join(HERE, name + ".onnx")
        m = export(model, (ids,), ["ids"], path)
        if gather:
            onnx.save(range_of_vectors(m), path)
    hf = HFEncoder().eval()
    path = os.path.join(HERE, "float16.onnx")
    m = export(hf, (ids, mask), ["input_ids", "attention_mask"], path)
    onnx.save(to_float16(m), path)
    path = os.path.join(HERE, "external_data.onnx")
    m = export(hf, (ids, mask), ["input_ids", "attention_mask"], path)
    onnx.save(m, path, save_as_external_data=True, all_tensors_to_one_file=True,
              location="external_data.onnx.data", size_threshold=0)


if __name__ == "__main__":
    main()
