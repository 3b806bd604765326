#!/usr/bin/python3
"""Writes bytelevel-bpe.tokenizer.json: a small RoBERTa-style byte-level BPE tokenizer.json.

The merges are learnt here by plain BPE (most frequent adjacent pair, ties broken by first
occurrence) over corpus.txt's space-separated words mapped through GPT-2's byte-to-unicode table;
only the file layout matters for the test, and the reference ids come from gen_hf.mjs, not from
this script. Run: /usr/bin/python3 gen_bpe.py
"""
import collections
import json


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


b2u = bytes_to_unicode()
text = open("corpus.txt", encoding="utf-8", newline="").read()
words = collections.Counter()
for w in text.split(" "):
    words[tuple(b2u[b] for b in (" " + w).encode("utf-8"))] += 1

specials = ["<s>", "<pad>", "</s>", "<unk>"]
vocab = {t: i for i, t in enumerate(specials)}
for b in range(256):
    vocab[b2u[b]] = len(vocab)
merges = []
corpus = {w: c for w, c in words.items()}
while len(merges) < 700:
    pairs = collections.Counter()
    for w, c in corpus.items():
        for a, b in zip(w, w[1:]):
            pairs[(a, b)] += c
    if not pairs:
        break
    best = max(pairs.items(), key=lambda kv: kv[1])[0]
    merges.append(best)
    vocab.setdefault(best[0] + best[1], len(vocab))
    nc = {}
    for w, c in corpus.items():
        out, i = [], 0
        while i < len(w):
            if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                out.append(w[i] + w[i + 1])
                i += 2
            else:
                out.append(w[i])
                i += 1
        nc[tuple(out)] = nc.get(tuple(out), 0) + c
    corpus = nc
vocab["<mask>"] = len(vocab)
added = [{"id": vocab[t], "content": t, "single_word": False, "lstrip": t == "<mask>", "rstrip": False,
          "normalized": False, "special": True} for t in specials + ["<mask>"]]
tok = {
    "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
    "normalizer": None,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
    "post_processor": {"type": "RobertaProcessing", "sep": ["</s>", vocab["</s>"]], "cls": ["<s>", vocab["<s>"]],
                       "trim_offsets": True, "add_prefix_space": False},
    "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
    "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
              "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
              "vocab": vocab, "merges": [a + " " + b for a, b in merges]},
}
with open("bytelevel-bpe.tokenizer.json", "w", encoding="utf-8") as f:
    json.dump(tok, f, ensure_ascii=False)
print(len(vocab), "tokens,", len(merges), "merges")
