#!/usr/bin/python3
"""Trains small SentencePiece models on corpus.txt and writes SentencePiece's own ids as goldens.

Reference: Debian's python3-sentencepiece (apt-get install -y python3-sentencepiece), run with
/usr/bin/python3 from this folder. For each model NAME.model it writes NAME.spm.golden.json:
{"lines": [{"ids", "tokens"}, ...], "whole": {"ids", "tokens"}} from sp.encode (no BOS/EOS, as
encode does by default). It also writes spm-unigram.tokenizer.json, the Unigram model in Hugging
Face's tokenizer.json layout (Metaspace, Unigram vocabulary with scores, </s> appended), as Hugging
Face's converter lays it out but with an NFKC normaliser where the converter puts a Precompiled one:
the JS reference replaces Precompiled by an NFKC approximation, so a Precompiled file would test
that approximation, not Hugging Face. (Precompiled's trie is checked through the .model goldens.)
"""
import io
import json
import sentencepiece as spm

MODELS = {
    # name: trainer options
    "spm-unigram": dict(model_type="unigram", vocab_size=700, normalization_rule_name="nmt_nfkc"),
    "spm-bpe": dict(model_type="bpe", vocab_size=900, byte_fallback=True, normalization_rule_name="nmt_nfkc"),
    "spm-unigram-bytes": dict(model_type="unigram", vocab_size=800, byte_fallback=True,
                              normalization_rule_name="identity", add_dummy_prefix=False,
                              remove_extra_whitespaces=False),
}

corpus = open("corpus.txt", encoding="utf-8", newline="").read()
lines = corpus.split("\n")
if lines and lines[-1] == "":
    lines.pop()

for name, opts in MODELS.items():
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=model,
                                   hard_vocab_limit=False, num_threads=1, seed_sentencepiece_size=20000,
                                   character_coverage=0.995, minloglevel=2, **opts)
    with open(name + ".model", "wb") as f:
        f.write(model.getvalue())
    sp = spm.SentencePieceProcessor(model_proto=model.getvalue())

    def enc(s):
        ids = sp.encode(s)
        return {"ids": ids, "tokens": [sp.id_to_piece(i) for i in ids]}

    out = {"source": "python3-sentencepiece %s on corpus.txt" % spm.__version__,
           "lines": [enc(l) for l in lines], "whole": enc(corpus)}
    with open(name + ".spm.golden.json", "w", encoding="utf-8") as f:
        f.write(json.dumps(out, ensure_ascii=False) + "\n")
    print(name, sp.get_piece_size(), "pieces,", len(out["whole"]["ids"]), "ids")


# The Unigram model as a tokenizer.json, laid out as transformers' SpmConverter does.
sp = spm.SentencePieceProcessor(model_file="spm-unigram.model")
vocab = [[sp.id_to_piece(i), sp.get_score(i)] for i in range(sp.get_piece_size())]
tok = {
    "version": "1.0", "truncation": None, "padding": None,
    "added_tokens": [
        {"id": i, "content": sp.id_to_piece(i), "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True} for i in range(sp.get_piece_size()) if sp.is_control(i) or sp.is_unknown(i)],
    "normalizer": {"type": "Sequence", "normalizers": [
        {"type": "NFKC"},
        {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]},
    "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
    "post_processor": {"type": "TemplateProcessing",
                       "single": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "</s>", "type_id": 0}}],
                       "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}},
                                {"SpecialToken": {"id": "</s>", "type_id": 1}}],
                       "special_tokens": {"</s>": {"id": "</s>", "ids": [sp.piece_to_id("</s>")], "tokens": ["</s>"]}}},
    "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
    "model": {"type": "Unigram", "unk_id": sp.unk_id(), "vocab": vocab, "byte_fallback": False},
}
with open("spm-unigram.tokenizer.json", "w", encoding="utf-8") as f:
    json.dump(tok, f, ensure_ascii=False)
