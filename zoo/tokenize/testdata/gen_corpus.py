#!/usr/bin/python3
"""Writes corpus.txt: the committed test text for the tokenizer references (gen_hf.mjs, gen_spm.py).

Deterministic (fixed seed, no network). Lines mix English with accents, CJK, emoji (with ZWJ and
skin tones), control characters, zero-width characters and very long words, so that each
normaliser and pre-tokeniser path is exercised. Run: /usr/bin/python3 gen_corpus.py
"""
import random

rng = random.Random(17)
base = open("../../../examples/text.txt", encoding="utf-8").read().split()
pieces = [
    "café", "naïve", "résumé", "Ångström", "Œuvre", "jalapeño", "façade", "Zürich", "São Paulo",
    "Dvořák", "Łódź", "İstanbul", "straße", "ĳssel", "ﬁnance", "Ⅻ", "①", "½", "x²", "ｆｕｌｌｗｉｄｔｈ",
    "東京", "北京大学", "日本語のテキスト", "한국어 문장", "中文分词测试", "漢字かなカナ",
    "😀", "👍🏽", "👩‍💻", "🇫🇷", "❤️", "🤖🤖🤖", "✨",
    "zero\u200bwidth", "join\u200dme", "non\u200cjoin", "bom\ufeffhere", "soft\u00adhyphen",
    "tab\there", "bell\u0007ring", "nul\u0000byte", "esc\u001b[0m", "del\u007fete", "cr\rlf",
    "nb\u00a0sp", "em\u2003space", "ideo\u3000space", "line\u2028sep",
    "Pneumonoultramicroscopicsilicovolcanoconiosis",
    "Donaudampfschifffahrtselektrizitätenhauptbetriebswerkbauunterbeamtengesellschaft",
    "a" * 120, "ab" * 60, "123456789012345678901234567890", "3.14159", "1,000,000", "$42.50",
    "don't", "it's", "we're", "they've", "I'm", "you'll", "he'd", "O'Neill",
    "e-mail", "state-of-the-art", "U.S.A.", "(parenthesised)", "[bracketed]", "\"quoted\"",
    "#hashtag", "@mention", "https://example.com/path?q=1&r=2", "foo_bar_baz", "CamelCaseWord",
    "Ελληνικά", "Σίσυφος", "русский текст", "עברית", "العربية", "हिन्दी", "ไทย", "Tiếng Việt",
    "e\u0301", "n\u0303", "A\u030a", "ﬀ", "™", "…", "—", "«guillemets»", "¿Qué?", "¡Hola!",
]
lines = []
for i in range(240):
    n = rng.randint(3, 14)
    words = []
    for _ in range(n):
        words.append(rng.choice(pieces) if rng.random() < 0.4 else rng.choice(base))
    sep = rng.choice([" ", " ", " ", "  ", " \t", ", "])
    line = sep.join(words)
    if i % 17 == 0:
        line = "   " + line + "   "
    if i % 23 == 0:
        line = line.upper()
    if i % 29 == 0:
        line = ""
    lines.append(line)
# Special tokens written in the text are matched as added tokens (lstrip on <mask>, for one).
lines += [
    "Paris is the [MASK] of France.", "[CLS] leading and trailing [SEP]", "hello <mask> world",
    "<s>inline</s> markers", "an <unk> here and [UNK] there", "[PAD][PAD] twice",
    "Ǆ ǅ ǆ titlecase", "tabs\t\tand\u000bvertical\u000cfeed",
    "next\u0085line and\u00a0nbsp", "a\U0001F600b\U0001F600\U0001F600c", "x" * 300,
]
with open("corpus.txt", "w", encoding="utf-8", newline="\n") as f:
    f.write("\n".join(lines) + "\n")
