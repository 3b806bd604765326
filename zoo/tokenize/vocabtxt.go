package tokenize

import (
	"strings"
	"unicode/utf8"
)

// loadVocabTxt reads a BERT vocab.txt (one token per line, the line number is the id) and
// builds the tokenizer BERT's defaults give it: BertNormalizer (clean text, Chinese characters,
// lowercase and strip accents), BertPreTokenizer, WordPiece with "##" and [UNK], and
// [CLS] … [SEP] around each sequence.
func loadVocabTxt(name string, data []byte) (Tokenizer, error) {
	if !utf8.Valid(data) {
		return nil, formatErr(name, "vocab.txt is not UTF-8 text")
	}
	text := strings.TrimSuffix(string(data), "\n")
	if text == "" {
		return nil, formatErr(name, "vocab.txt is empty")
	}
	lines := strings.Split(text, "\n")
	v := newVocab(len(lines))
	for i, l := range lines {
		l = strings.TrimRight(l, " \t\r")
		if strings.ContainsRune(l, 0) {
			return nil, formatErr(name, "line %d holds a NUL byte: not a vocab.txt", i+1)
		}
		if _, dup := v.ids[l]; !dup {
			v.add(l, int64(i))
		} else {
			for int64(len(v.tokens)) <= int64(i) {
				v.tokens = append(v.tokens, "")
			}
			v.tokens[i] = l
		}
	}
	p := &pipeline{kind: "vocab.txt WordPiece", norm: &bertNorm{Clean: true, Chinese: true, Lower: true}, pre: bertPre{}}
	unk, ok := v.ids["[UNK]"]
	if !ok {
		return nil, formatErr(name, "vocab.txt has no [UNK] token (not a BERT vocabulary?)")
	}
	p.model = &wordPiece{v: v, unk: "[UNK]", unkID: unk, prefix: "##", maxChars: 100}
	p.special = findSpecial(v)
	cls, ok1 := v.ids["[CLS]"]
	sep, ok2 := v.ids["[SEP]"]
	if !ok1 || !ok2 {
		return nil, formatErr(name, "vocab.txt lacks [CLS] or [SEP]")
	}
	p.prefix = Encoding{IDs: []int64{cls}, Tokens: []string{"[CLS]"}}
	p.suffix = Encoding{IDs: []int64{sep}, Tokens: []string{"[SEP]"}}
	p.pair = bertPair(p.prefix, p.suffix)
	p.added = addedSet{byFirst: new([256][]addedTok), content: map[int64]string{}}
	for _, s := range []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"} {
		if id, ok := v.ids[s]; ok {
			p.added.byFirst['['] = append(p.added.byFirst['['], addedTok{s: s, id: id})
			p.added.content[id] = s
		}
	}
	p.size = len(v.tokens)
	p.cut = pipelineCuts(p.norm, p.pre, nil)
	return p, nil
}
