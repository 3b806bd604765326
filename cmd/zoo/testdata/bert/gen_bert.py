#!/usr/bin/python3
"""Writes the BERT fixtures of cmd/zoo's real-text tests (run from this folder, PyTorch 1.13).

A BERT encoder written from the paper (Devlin et al. 2019, arXiv:1810.04805): token, position and
segment embeddings summed and layer-normalised, post-LN Transformer layers with GELU (erf) in the
feed-forward block, and the pooler (tanh of a Linear on the first token). Seeded random weights,
the real all-MiniLM-L6-v2 WordPiece vocabulary (30522 ids), small dims. Exported with Hugging
Face's input and output names:

  bert-opset17.onnx   dynamic (batch, seq), opset 17
  bert-opset14.onnx   dynamic (batch, seq), opset 14
  bert-static.onnx    static (2, 64), opset 17: zoo must pad windows and batches to it

and a tiny one for zoo's byte tokenizer (ids 1..256, 0 padding) with zoo-side conventions that a
text model may also have: bytes-int32.onnx takes input_ids as int32, a bool key_padding_mask
(true = padding) and int32 position_ids as an input (windows of 32 bytes, bytes-expected.json).

text.txt is lines 1-24 of zoo/tokenize/testdata/corpus.txt. Its ids are those of Hugging Face's
tokenizers (zoo/tokenize/testdata/minilm.hf.golden.json, one encoding per line): WordPiece never
joins tokens across whitespace, so the text's ids are [CLS], each line's ids without its
[CLS]/[SEP], [SEP]. zoo cuts a long input into windows of the model's maximum length (64, the
position table's rows) holding [CLS] + 62 tokens + [SEP] each (the last one shorter); expected.json
holds, per window, the ids, and PyTorch's last_hidden_state (valid positions), pooler_output and
mean-pooled embedding (mean over attention_mask = 1 positions, as sentence-transformers does).
"""
import json
import math

import torch
from torch import nn

VOCAB, D, HEADS, LAYERS, FF, MAX_POS, TYPES = 30522, 32, 4, 2, 128, 64, 2
BYTES = dict(VOCAB=257, D=16, HEADS=2, LAYERS=1, FF=32, MAX_POS=32, TYPES=2)
EPS = 1e-12
FIRST, LAST = 1, 24  # corpus lines in text.txt


class Layer(nn.Module):
    def __init__(self, D=D, HEADS=HEADS, FF=FF):
        super().__init__()
        self.d, self.heads = D, HEADS
        self.q, self.k, self.v, self.o = (nn.Linear(D, D) for _ in range(4))
        self.ln1 = nn.LayerNorm(D, eps=EPS)
        self.ff1, self.ff2 = nn.Linear(D, FF), nn.Linear(FF, D)
        self.ln2 = nn.LayerNorm(D, eps=EPS)

    def forward(self, x, bias):
        b, n, _ = x.shape
        D, HEADS = self.d, self.heads
        split = lambda t: t.view(b, n, HEADS, D // HEADS).transpose(1, 2)
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(D // HEADS) + bias, dim=-1)
        a = (att @ v).transpose(1, 2).reshape(b, n, D)
        x = self.ln1(x + self.o(a))
        h = self.ff1(x)
        h = 0.5 * h * (1.0 + torch.erf(h / math.sqrt(2.0)))
        return self.ln2(x + self.ff2(h))


class Bert(nn.Module):
    def __init__(self, VOCAB=VOCAB, D=D, HEADS=HEADS, LAYERS=LAYERS, FF=FF, MAX_POS=MAX_POS, TYPES=TYPES):
        super().__init__()
        self.word = nn.Embedding(VOCAB, D)
        self.pos = nn.Embedding(MAX_POS, D)
        self.seg = nn.Embedding(TYPES, D)
        self.ln = nn.LayerNorm(D, eps=EPS)
        self.register_buffer("position_ids", torch.arange(MAX_POS).expand((1, -1)))
        self.layers = nn.ModuleList(Layer(D, HEADS, FF) for _ in range(LAYERS))
        self.pool = nn.Linear(D, D)

    def forward(self, input_ids, attention_mask, token_type_ids):
        n = input_ids.shape[1]
        pos = self.position_ids[:, :n]
        x = self.ln(self.word(input_ids) + self.pos(pos) + self.seg(token_type_ids))
        bias = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        for layer in self.layers:
            x = layer(x, bias)
        return x, torch.tanh(self.pool(x[:, 0]))


class BytesBert(Bert):
    """Bert with int32 ids and positions as inputs and a bool padding mask (true = padding)."""

    def __init__(self):
        super().__init__(**BYTES)

    def forward(self, input_ids, key_padding_mask, position_ids):
        ids, pos = input_ids.long(), position_ids.long()
        x = self.ln(self.word(ids) + self.pos(pos) + self.seg(torch.zeros_like(ids)))
        bias = key_padding_mask[:, None, None, :].to(x.dtype) * torch.finfo(x.dtype).min
        for layer in self.layers:
            x = layer(x, bias)
        return x, torch.tanh(self.pool(x[:, 0]))


def randomize(model):
    with torch.no_grad():
        for p in model.parameters():  # matrices N(0, 0.2), 10x BERT's 0.02, so the layers mix visibly
            if p.dim() > 1:
                p.normal_(0, 0.2)


def bytes_model(text):
    torch.manual_seed(18)
    model = BytesBert().eval()
    randomize(model)
    n = BYTES["MAX_POS"]
    data = text.encode("utf-8")
    out = {"text": "text.txt", "window": n, "windows": []}
    with torch.no_grad():
        for i in range(0, len(data), n):
            ids = torch.tensor([[b + 1 for b in data[i:i + n]]], dtype=torch.int32)
            hidden, pooled = model(ids, torch.zeros(ids.shape, dtype=torch.bool), torch.arange(ids.shape[1], dtype=torch.int32)[None])
            out["windows"].append({"ids": ids[0].tolist(), "pooler_output": [round(v, 7) for v in pooled[0].tolist()],
                                   "embedding": [round(v, 7) for v in hidden[0].mean(0).tolist()]})
        json.dump(out, open("bytes-expected.json", "w"), separators=(",", ":"))
        ex = torch.ones(2, 8, dtype=torch.int32)
        dyn = {k: {0: "batch", 1: "sequence"} for k in ["input_ids", "key_padding_mask", "position_ids", "last_hidden_state"]}
        dyn["pooler_output"] = {0: "batch"}
        torch.onnx.export(model, (ex, torch.zeros(2, 8, dtype=torch.bool), torch.arange(8, dtype=torch.int32).expand(2, -1)),
                          "bytes-int32.onnx", opset_version=17, dynamic_axes=dyn,
                          input_names=["input_ids", "key_padding_mask", "position_ids"],
                          output_names=["last_hidden_state", "pooler_output"])


def main():
    golden = json.load(open("../../../../zoo/tokenize/testdata/minilm.hf.golden.json", encoding="utf-8"))["lines"]
    corpus = open("../../../../zoo/tokenize/testdata/corpus.txt", encoding="utf-8", newline="").read().split("\n")
    lines = corpus[FIRST:LAST + 1]
    with open("text.txt", "w", encoding="utf-8", newline="") as f:
        f.write("\n".join(lines) + "\n")
    body = []
    for g in golden[FIRST:LAST + 1]:
        assert g["ids"][0] == 101 and g["ids"][-1] == 102
        body += g["ids"][1:-1]
    span = MAX_POS - 2
    windows = [[101] + body[i:i + span] + [102] for i in range(0, len(body), span)]

    torch.manual_seed(17)
    model = Bert().eval()
    randomize(model)
    with torch.no_grad():
        out = {"text": "text.txt", "windows": []}
        for w in windows:
            ids = torch.tensor([w])
            mask = torch.ones_like(ids)
            hidden, pooled = model(ids, mask, torch.zeros_like(ids))
            emb = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
            out["windows"].append({
                "ids": w,
                "last_hidden_state": [round(v, 7) for v in hidden[0].flatten().tolist()],
                "pooler_output": [round(v, 7) for v in pooled[0].tolist()],
                "embedding": [round(v, 7) for v in emb[0].tolist()],
            })
        json.dump(out, open("expected.json", "w"), separators=(",", ":"))

        names = dict(input_names=["input_ids", "attention_mask", "token_type_ids"],
                     output_names=["last_hidden_state", "pooler_output"], do_constant_folding=True)
        dyn = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"},
               "token_type_ids": {0: "batch", 1: "sequence"}, "last_hidden_state": {0: "batch", 1: "sequence"},
               "pooler_output": {0: "batch"}}
        ex = torch.ones(2, 8, dtype=torch.long)
        args = (ex, torch.ones_like(ex), torch.zeros_like(ex))
        torch.onnx.export(model, args, "bert-opset17.onnx", opset_version=17, dynamic_axes=dyn, **names)
        torch.onnx.export(model, args, "bert-opset14.onnx", opset_version=14, dynamic_axes=dyn, **names)
        ex = torch.ones(2, MAX_POS, dtype=torch.long)
        torch.onnx.export(model, (ex, torch.ones_like(ex), torch.zeros_like(ex)), "bert-static.onnx", opset_version=17, **names)
    bytes_model("\n".join(lines) + "\n")
    print(f"{len(windows)} windows of ≤{MAX_POS} tokens ({len(body)} text tokens)")


if __name__ == "__main__":
    main()
