#!/usr/bin/python3
"""Writes the fixtures of zoo serve's tests of models with heads of their own (run from this
folder, PyTorch 1.13): a cross-encoder, and a sentence encoder with its own embedding output.

Both are gen_bert.py's BERT (../bert: token, position and segment embeddings, post-LN layers
with GELU, the tanh pooler) with seeded random weights, small dims and the real all-MiniLM-L6-v2
WordPiece vocabulary (30522 ids), exported with Hugging Face's input names (input_ids,
attention_mask, token_type_ids) and dynamic (batch, sequence):

  cross.onnx  BertForSequenceClassification with one label: logits (batch, 1) = a Linear of
              pooler_output. Its pairs are encoded as BERT's pair template does, [CLS] a [SEP]
              b [SEP] with token type ids 0 then 1; their ids are built from Hugging Face's ids
              of each corpus line (../../../../zoo/tokenize/testdata/minilm.hf.golden.json), and
              a pair longer than 64 tokens is cut as Hugging Face's longest_first cuts it.
  bi.onnx     a sentence encoder whose outputs are last_hidden_state, pooler_output and
              sentence_embedding: the attention-masked mean of last_hidden_state, a tanh Linear
              and an L2 norm (sentence-transformers' Pooling, Dense, Normalize).

expected.json holds the query, texts and pairs with their ids, type ids and PyTorch's logits,
and the texts' ids, sentence_embedding and mean-pooled last_hidden_state.
"""
import json
import sys

import torch
from torch import nn

sys.path.insert(0, "../bert")
from gen_bert import Bert, randomize  # noqa: E402

D, HEADS, LAYERS, FF, MAX_POS = 16, 2, 2, 32, 64
QUERY = 31                # corpus line of the query
TEXTS = range(3, 13)      # corpus lines of the passages
LONG = (18, 16)           # a pair over 64 tokens, cut by truncation


class CrossEncoder(Bert):
    def __init__(self):
        super().__init__(D=D, HEADS=HEADS, LAYERS=LAYERS, FF=FF, MAX_POS=MAX_POS)
        self.classifier = nn.Linear(D, 1)

    def forward(self, input_ids, attention_mask, token_type_ids):
        _, pooled = super().forward(input_ids, attention_mask, token_type_ids)
        return self.classifier(pooled)


class BiEncoder(Bert):
    def __init__(self):
        super().__init__(D=D, HEADS=HEADS, LAYERS=LAYERS, FF=FF, MAX_POS=MAX_POS)
        self.dense = nn.Linear(D, D)

    def forward(self, input_ids, attention_mask, token_type_ids):
        hidden, pooled = super().forward(input_ids, attention_mask, token_type_ids)
        m = attention_mask[..., None].to(hidden.dtype)
        mean = (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)
        emb = torch.tanh(self.dense(mean))
        return hidden, pooled, emb / emb.norm(dim=-1, keepdim=True).clamp(min=1e-12)


def truncate_pair(na, nb, room):
    """Hugging Face tokenizers' longest_first: the lengths a pair's texts are cut to."""
    if na + nb <= room:
        return na, nb
    n1, n2, swap = na, nb, na > nb
    if swap:
        n1, n2 = n2, n1
    n2 = n1 if n1 > room else max(n1, room - n1)
    if n1 + n2 > room:
        n1 = room // 2
        n2 = n1 + room % 2
    if swap:
        n1, n2 = n2, n1
    return min(na, n1), min(nb, n2)


def pair(golden, a, b, max_len=0):
    x, y = golden[a]["ids"][1:-1], golden[b]["ids"][1:-1]
    if max_len:
        na, nb = truncate_pair(len(x), len(y), max_len - 3)
        x, y = x[:na], y[:nb]
    ids = [101] + x + [102] + y + [102]
    return ids, [0] * (len(x) + 2) + [1] * (len(y) + 1)


def export(model, path, outputs):
    ex = torch.ones(2, 8, dtype=torch.long)
    dyn = {k: {0: "batch", 1: "sequence"} for k in ["input_ids", "attention_mask", "token_type_ids"]}
    for o in outputs:
        dyn[o] = {0: "batch", 1: "sequence"} if o == "last_hidden_state" else {0: "batch"}
    torch.onnx.export(model, (ex, torch.ones_like(ex), torch.zeros_like(ex)), path, opset_version=17, dynamic_axes=dyn,
                      input_names=["input_ids", "attention_mask", "token_type_ids"], output_names=outputs, do_constant_folding=True)


def rounded(t):
    return [round(v, 7) for v in t.flatten().tolist()]


def main():
    golden = json.load(open("../../../../zoo/tokenize/testdata/minilm.hf.golden.json", encoding="utf-8"))["lines"]
    corpus = open("../../../../zoo/tokenize/testdata/corpus.txt", encoding="utf-8", newline="").read().split("\n")
    out = {"query": corpus[QUERY], "texts": [corpus[i] for i in TEXTS], "pairs": []}
    torch.manual_seed(31)
    cross = CrossEncoder().eval()
    randomize(cross)
    torch.manual_seed(32)
    bi = BiEncoder().eval()
    randomize(bi)
    with torch.no_grad():
        for i in TEXTS:
            ids, types = pair(golden, QUERY, i)
            assert len(ids) <= MAX_POS
            t = torch.tensor([ids])
            logit = cross(t, torch.ones_like(t), torch.tensor([types]))
            out["pairs"].append({"ids": ids, "types": types, "logit": round(logit.item(), 7)})
        a, b = LONG
        full, _ = pair(golden, a, b)
        ids, types = pair(golden, a, b, MAX_POS)
        assert len(full) > MAX_POS and len(ids) == MAX_POS
        t = torch.tensor([ids])
        out["long"] = {"query": corpus[a], "text": corpus[b], "tokens": len(full), "ids": ids, "types": types,
                       "logit": round(cross(t, torch.ones_like(t), torch.tensor([types])).item(), 7)}
        out["embeddings"] = []
        for i in TEXTS:
            t = torch.tensor([golden[i]["ids"]])
            hidden, pooled, emb = bi(t, torch.ones_like(t), torch.zeros_like(t))
            out["embeddings"].append({"ids": golden[i]["ids"], "sentence_embedding": rounded(emb), "mean": rounded(hidden.mean(1)),
                                      "pooler_output": rounded(pooled)})
        json.dump(out, open("expected.json", "w", encoding="utf-8"), separators=(",", ":"), ensure_ascii=False)
        export(cross, "cross.onnx", ["logits"])
        export(bi, "bi.onnx", ["last_hidden_state", "pooler_output", "sentence_embedding"])
    print(f"{len(out['pairs'])} pairs, a long pair of {out['long']['tokens']} tokens cut to {MAX_POS}")


if __name__ == "__main__":
    main()
