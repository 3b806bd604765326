package tokenize

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"unicode/utf8"
)

// pipeline is a tokenizer built from parts: a Hugging Face tokenizer.json or a vocab.txt.
type pipeline struct {
	kind    string
	norm    normalizer
	pre     preTokenizer
	model   model
	added   addedSet
	prefix  Encoding
	suffix  Encoding
	pair    pairTemplate // the post-processor's pair layout (nil: pairErr says why there is none)
	pairErr error
	special Special
	size    int
	// cut: where a text may be cut without changing its encoding (see Stream).
	cut cutRule
}

func (p *pipeline) Encode(text string) ([]int64, []string, error) {
	ids, toks, err := p.EncodeRaw(text)
	return wrap(p, ids, toks, err)
}

func (p *pipeline) EncodeRaw(text string) ([]int64, []string, error) {
	if err := invalidUTF8(text); err != nil {
		return nil, nil, err
	}
	var e Encoding
	var words []string
	p.added.split(text, func(seg string, tok int64, first bool) {
		if tok >= 0 {
			e.IDs, e.Tokens = append(e.IDs, tok), append(e.Tokens, p.added.content[tok])
			return
		}
		if p.norm != nil {
			seg = p.norm.normalize(seg)
		}
		words = words[:0]
		if p.pre != nil {
			words = p.pre.split(seg, first, words)
		} else if seg != "" {
			words = append(words, seg)
		}
		for _, w := range words {
			if w != "" {
				p.model.encodeWord(w, &e)
			}
		}
	})
	return e.IDs, e.Tokens, nil
}

func (p *pipeline) Affixes() (prefix, suffix Encoding) { return p.prefix, p.suffix }
func (p *pipeline) VocabSize() int                     { return p.size }
func (p *pipeline) Special() Special                   { return p.special }
func (p *pipeline) Kind() string                       { return p.kind }

// StreamSafe reports whether the tokenizer has safe cut points (see Stream).
func (p *pipeline) StreamSafe() bool { return p.cut.at != nil }

func (p *pipeline) cuts() cutRule { return p.cut }

// addedSet finds added tokens in raw text (leftmost, longest first), as Hugging Face's added
// vocabulary does for tokens that are not normalised.
type addedSet struct {
	byFirst *[256][]addedTok // by first byte, longest first; nil when there are none
	content map[int64]string
}

type addedTok struct {
	s          string
	id         int64
	lstrip     bool
	rstrip     bool
	singleWord bool
}

// split calls fn for each piece of text in order: an added token (tok ≥ 0) or a text segment
// (tok = -1; first reports that it starts the text).
func (a *addedSet) split(text string, fn func(seg string, tok int64, first bool)) {
	if a.byFirst == nil {
		fn(text, -1, true)
		return
	}
	segStart := 0
	for i := 0; i < len(text); i++ {
		cands := a.byFirst[text[i]]
		for _, t := range cands {
			if !strings.HasPrefix(text[i:], t.s) {
				continue
			}
			end := i + len(t.s)
			if t.singleWord && (i > 0 && isWordChar(lastRune(text[:i])) || end < len(text) && isWordChar(firstRune(text[end:]))) {
				continue
			}
			lo, hi := i, end
			if t.lstrip {
				for lo > segStart && isSpace(rune(text[lo-1])) {
					lo--
				}
			}
			if t.rstrip {
				for hi < len(text) && isSpace(rune(text[hi])) {
					hi++
				}
			}
			if lo > segStart {
				fn(text[segStart:lo], -1, segStart == 0)
			}
			fn("", t.id, false)
			segStart = hi
			i = hi - 1
			break
		}
	}
	if segStart < len(text) {
		fn(text[segStart:], -1, segStart == 0)
	}
}

func lastRune(s string) rune {
	r, _ := utf8.DecodeLastRuneInString(s)
	return r
}

func firstRune(s string) rune {
	for _, r := range s {
		return r
	}
	return 0
}

func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || bytes.Equal(t, []byte("null"))
}

type hfFile struct {
	Version       string          `json:"version"`
	AddedTokens   []hfAdded       `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Model         json.RawMessage `json:"model"`
	Padding       json.RawMessage `json:"padding"`
	Truncation    json.RawMessage `json:"truncation"`
}

type hfAdded struct {
	ID         *int64 `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

// loadHF parses a Hugging Face tokenizer.json.
func loadHF(name string, data []byte) (Tokenizer, error) {
	var f hfFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, formatErr(name, "not a valid tokenizer.json (%v)", err)
	}
	if isNull(f.Model) {
		return nil, formatErr(name, "tokenizer.json has no model")
	}
	p := &pipeline{special: noSpecial()}
	var err error
	var v *vocab
	var modelType string
	p.model, v, modelType, err = parseModel(f.Model)
	if err != nil {
		return nil, formatErr(name, "%v", err)
	}
	p.kind = "tokenizer.json " + modelType
	if p.norm, err = parseNormalizer(f.Normalizer); err != nil {
		return nil, formatErr(name, "%v", err)
	}
	if p.pre, err = parsePreTokenizer(f.PreTokenizer); err != nil {
		return nil, formatErr(name, "%v", err)
	}
	p.added = addedSet{content: map[int64]string{}}
	if len(f.AddedTokens) > 0 {
		p.added.byFirst = new([256][]addedTok)
	}
	for i, a := range f.AddedTokens {
		if a.ID == nil || *a.ID < 0 || *a.ID > math.MaxInt32 || a.Content == "" {
			return nil, formatErr(name, "added_tokens[%d] has no valid id or content", i)
		}
		// Hugging Face matches normalised added tokens in normalised text; zoo matches every
		// added token in the raw text, which agrees whenever the normaliser leaves the token's
		// characters alone (markers such as <mask> or [CLS]).
		t := addedTok{s: a.Content, id: *a.ID, lstrip: a.LStrip, rstrip: a.RStrip, singleWord: a.SingleWord}
		p.added.byFirst[a.Content[0]] = append(p.added.byFirst[a.Content[0]], t)
		p.added.content[*a.ID] = a.Content
		if _, ok := v.ids[a.Content]; !ok || v.tokens[*a.ID] == "" {
			v.add(a.Content, *a.ID)
		}
	}
	if p.added.byFirst != nil {
		for _, l := range p.added.byFirst {
			sort.SliceStable(l, func(i, j int) bool { return len(l[i].s) > len(l[j].s) })
		}
	}
	if p.prefix, p.suffix, err = parsePost(f.PostProcessor, v); err != nil {
		return nil, formatErr(name, "%v", err)
	}
	// A tokenizer without a pair template still encodes single texts; EncodePair says why not.
	if p.pair, p.pairErr = parsePairPost(f.PostProcessor); p.pairErr != nil {
		p.pairErr = formatErr(name, "%v", p.pairErr)
	}
	p.size = len(v.tokens)
	for _, id := range append(append([]int64(nil), p.prefix.IDs...), p.suffix.IDs...) {
		if id < 0 || id > math.MaxInt32 {
			return nil, formatErr(name, "post_processor: special token id %d is out of range", id)
		}
		p.size = max(p.size, int(id)+1)
	}
	p.special = findSpecial(v)
	if u, ok := p.model.(interface{ unkToken() int64 }); ok {
		if id := u.unkToken(); id >= 0 {
			p.special.UNK = id
		}
	}
	if !isNull(f.Padding) {
		var pad struct {
			PadID *int64 `json:"pad_id"`
		}
		if json.Unmarshal(f.Padding, &pad) == nil && pad.PadID != nil && *pad.PadID >= 0 && *pad.PadID < int64(p.size) {
			p.special.Pad = *pad.PadID
		}
	}
	p.cut = pipelineCuts(p.norm, p.pre, f.AddedTokens)
	return p, nil
}

func (m *wordPiece) unkToken() int64 { return m.unkID }
func (m *wordLevel) unkToken() int64 { return m.unkID }
func (m *bpe) unkToken() int64       { return m.unkID }
func (m *unigram) unkToken() int64   { return m.unkID }

// Where a pipeline may be cut (see Stream): just before a space, tab, CR or LF, when
// the normalizers work one character at a time (ASCII whitespace then starts a normalization
// segment of every Unicode form, and stays whitespace) and the pre-tokenizer starts a new word
// there whatever follows.

// preKind sorts pre-tokenizers by where they always end a word.
type preKind int

const (
	preNone      preKind = iota // no safe cut known
	preWS                       // words never span whitespace, which is dropped
	preByteLevel                // GPT-2's regex: before whitespace followed by a non-space
	preSpace                    // Metaspace: before a space
)

func preKindOf(p preTokenizer) preKind {
	switch t := p.(type) {
	case bertPre, whitespacePre, whitespaceSplit:
		return preWS
	case preSeq:
		// Every stage after one that drops whitespace works within a word.
		if len(t) > 0 && preKindOf(t[0]) == preWS {
			return preWS
		}
	case *byteLevelPre:
		if !t.AddPrefixSpace && t.UseRegex {
			return preByteLevel
		}
	case *metaspace:
		if t.doSplit && t.repl != " " {
			return preSpace
		}
	}
	return preNone
}

// perChar reports whether n normalizes each character alone; strips tells whether it may also
// trim whitespace at the ends (Strip), which only a pre-tokenizer that drops whitespace
// tolerates.
func perChar(n normalizer) (ok, strips bool) {
	switch t := n.(type) {
	case nil, *bertNorm, lowercase, stripAccents, unorm:
		return true, false
	case strip:
		return true, true
	case normSeq:
		for _, m := range t {
			o, s := perChar(m)
			if !o {
				return false, false
			}
			strips = strips || s
		}
		return true, strips
	}
	return false, false
}

// pipelineCuts returns the cut rule of a pipeline with these parts and added tokens.
func pipelineCuts(n normalizer, p preTokenizer, added []hfAdded) cutRule {
	ok, strips := perChar(n)
	kind := preKindOf(p)
	if !ok || kind == preNone || (strips && kind != preWS) {
		return cutRule{}
	}
	// A cut never falls inside an added token (one that holds the whitespace); with byte-level
	// BPE and Metaspace, an added token that strips the whitespace beside it must not lose it
	// to a cut either.
	var inToken, lstripFirst, rstripLast [256]bool
	anyRstrip := false
	// \v and \f are control characters to BertNormalizer's clean_text, which drops them: a
	// cut there would split the word they join.
	inToken['\v'], inToken['\f'] = true, true
	for _, a := range added {
		for i := 0; i < len(a.Content); i++ {
			if isASCIISpace(a.Content[i]) {
				inToken[a.Content[i]] = true
			}
		}
		if a.Content == "" {
			continue
		}
		if a.LStrip {
			lstripFirst[a.Content[0]] = true
		}
		if a.RStrip {
			rstripLast[a.Content[len(a.Content)-1]] = true
			anyRstrip = true
		}
	}
	if kind == preWS {
		return cutRule{at: func(b []byte, i int) bool { return !inToken[b[i]] }}
	}
	// GPT-2's pattern ends a token before whitespace that is followed by a non-space (the
	// space joins the next word; a longer run ends one character early), and starts afresh
	// there; Metaspace starts a word at each space. Whitespace beside the cut must not be
	// lost to an added token that strips it on one side only.
	guard := func(b []byte, i int) bool {
		if inToken[b[i]] || lstripFirst[b[i+1]] || (anyRstrip && (isASCIISpace(b[i-1]) || rstripLast[b[i-1]])) {
			return false
		}
		r, _ := utf8.DecodeRune(b[i+1:])
		return r != utf8.RuneError && !isSpace(r)
	}
	if kind == preSpace {
		if anyRstrip {
			return cutRule{}
		}
		return cutRule{at: func(b []byte, i int) bool { return b[i] == ' ' && guard(b, i) }}
	}
	return cutRule{at: guard}
}

func findSpecial(v *vocab) Special {
	s := noSpecial()
	look := func(dst *int64, names ...string) {
		for _, n := range names {
			if id, ok := v.ids[n]; ok {
				*dst = id
				return
			}
		}
	}
	look(&s.Pad, "[PAD]", "<pad>")
	look(&s.CLS, "[CLS]", "<s>", "<cls>")
	look(&s.SEP, "[SEP]", "</s>", "<sep>")
	look(&s.Mask, "[MASK]", "<mask>")
	look(&s.UNK, "[UNK]", "<unk>")
	look(&s.BOS, "<s>", "<bos>", "<|begin_of_text|>")
	look(&s.EOS, "</s>", "<eos>", "<|endoftext|>", "<|end_of_text|>")
	return s
}

func parseModel(raw json.RawMessage) (model, *vocab, string, error) {
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return nil, nil, "", fmt.Errorf("model: %v", err)
	}
	if head.Type == "" {
		// Old files omit the type; tell the models apart by their fields.
		var probe map[string]json.RawMessage
		_ = json.Unmarshal(raw, &probe)
		switch {
		case probe["merges"] != nil:
			head.Type = "BPE"
		case probe["continuing_subword_prefix"] != nil && probe["max_input_chars_per_word"] != nil:
			head.Type = "WordPiece"
		case probe["unk_id"] != nil:
			head.Type = "Unigram"
		}
	}
	switch head.Type {
	case "WordPiece":
		var m struct {
			Vocab    map[string]int64 `json:"vocab"`
			Unk      string           `json:"unk_token"`
			Prefix   *string          `json:"continuing_subword_prefix"`
			MaxChars *int             `json:"max_input_chars_per_word"`
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, nil, "", fmt.Errorf("model WordPiece: %v", err)
		}
		v, err := mapVocab(m.Vocab)
		if err != nil {
			return nil, nil, "", fmt.Errorf("model WordPiece: %v", err)
		}
		wp := &wordPiece{v: v, unk: m.Unk, prefix: "##", maxChars: 100}
		if m.Prefix != nil {
			wp.prefix = *m.Prefix
		}
		if m.MaxChars != nil {
			wp.maxChars = *m.MaxChars
		}
		if wp.unk == "" {
			wp.unk = "[UNK]"
		}
		id, ok := v.ids[wp.unk]
		if !ok {
			return nil, nil, "", fmt.Errorf("model WordPiece: unk_token %q is not in the vocabulary", wp.unk)
		}
		wp.unkID = id
		return wp, v, "WordPiece", nil
	case "WordLevel":
		var m struct {
			Vocab map[string]int64 `json:"vocab"`
			Unk   string           `json:"unk_token"`
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, nil, "", fmt.Errorf("model WordLevel: %v", err)
		}
		v, err := mapVocab(m.Vocab)
		if err != nil {
			return nil, nil, "", fmt.Errorf("model WordLevel: %v", err)
		}
		wl := &wordLevel{v: v, unk: m.Unk, unkID: -1}
		if id, ok := v.ids[m.Unk]; ok {
			wl.unkID = id
		}
		return wl, v, "WordLevel", nil
	case "BPE":
		var m struct {
			Vocab        map[string]int64  `json:"vocab"`
			Merges       []json.RawMessage `json:"merges"`
			Unk          *string           `json:"unk_token"`
			Prefix       *string           `json:"continuing_subword_prefix"`
			Suffix       *string           `json:"end_of_word_suffix"`
			FuseUnk      bool              `json:"fuse_unk"`
			ByteFallback bool              `json:"byte_fallback"`
			IgnoreMerges bool              `json:"ignore_merges"`
			Dropout      *float64          `json:"dropout"`
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, nil, "", fmt.Errorf("model BPE: %v", err)
		}
		if m.Dropout != nil && *m.Dropout > 0 {
			return nil, nil, "", fmt.Errorf("model BPE: dropout %g is random; zoo tokenizes deterministically", *m.Dropout)
		}
		v, err := mapVocab(m.Vocab)
		if err != nil {
			return nil, nil, "", fmt.Errorf("model BPE: %v", err)
		}
		b := &bpe{v: v, unkID: -1, fuseUnk: m.FuseUnk, byteFallback: m.ByteFallback, ignoreMerges: m.IgnoreMerges,
			merges: make(map[uint64]bpeMerge, len(m.Merges))}
		if m.Prefix != nil {
			b.prefix = *m.Prefix
		}
		if m.Suffix != nil {
			b.suffix = *m.Suffix
		}
		if m.Unk != nil {
			id, ok := v.ids[*m.Unk]
			if !ok {
				return nil, nil, "", fmt.Errorf("model BPE: unk_token %q is not in the vocabulary", *m.Unk)
			}
			b.unkID = id
		}
		for rank, r := range m.Merges {
			var a, c string
			var s string
			if json.Unmarshal(r, &s) == nil {
				var ok bool
				a, c, ok = strings.Cut(s, " ")
				if !ok {
					return nil, nil, "", fmt.Errorf("model BPE: merge %d %q is not two tokens", rank, s)
				}
			} else {
				var pair []string
				if err := json.Unmarshal(r, &pair); err != nil || len(pair) != 2 {
					return nil, nil, "", fmt.Errorf("model BPE: merge %d is neither \"a b\" nor [a, b]", rank)
				}
				a, c = pair[0], pair[1]
			}
			ia, ok1 := v.ids[a]
			ic, ok2 := v.ids[c]
			in, ok3 := v.ids[a+c]
			if !ok1 || !ok2 || !ok3 {
				return nil, nil, "", fmt.Errorf("model BPE: merge %d (%q %q) uses a token missing from the vocabulary", rank, a, c)
			}
			k := pairKey(ia, ic)
			if _, dup := b.merges[k]; !dup {
				b.merges[k] = bpeMerge{rank: rank, id: in}
			}
		}
		return b, v, "BPE", nil
	case "Unigram":
		var m struct {
			Vocab        [][2]json.RawMessage `json:"vocab"`
			UnkID        *int64               `json:"unk_id"`
			ByteFallback bool                 `json:"byte_fallback"`
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, nil, "", fmt.Errorf("model Unigram: %v", err)
		}
		if len(m.Vocab) == 0 {
			return nil, nil, "", fmt.Errorf("model Unigram: empty vocabulary")
		}
		v := newVocab(len(m.Vocab))
		scores := make([]float64, len(m.Vocab))
		minScore := math.Inf(1)
		for i, e := range m.Vocab {
			var tok string
			if err := json.Unmarshal(e[0], &tok); err != nil {
				return nil, nil, "", fmt.Errorf("model Unigram: vocab[%d]: %v", i, err)
			}
			if err := json.Unmarshal(e[1], &scores[i]); err != nil {
				return nil, nil, "", fmt.Errorf("model Unigram: vocab[%d] score: %v", i, err)
			}
			v.add(tok, int64(i))
			minScore = math.Min(minScore, scores[i])
		}
		unk := int64(-1)
		if m.UnkID != nil {
			if *m.UnkID < 0 || *m.UnkID >= int64(len(m.Vocab)) {
				return nil, nil, "", fmt.Errorf("model Unigram: unk_id %d is outside the vocabulary", *m.UnkID)
			}
			unk = *m.UnkID
		}
		u := newUnigram(v, scores, unk)
		for i, t := range v.tokens {
			u.addPiece(t, int64(i))
		}
		u.finish(minScore)
		u.fuseUnk, u.byteFback, u.hfUnkText = true, m.ByteFallback, true
		if unk < 0 {
			return nil, nil, "", fmt.Errorf("model Unigram: no unk_id (zoo needs one for characters outside the vocabulary)")
		}
		return u, v, "Unigram", nil
	case "":
		return nil, nil, "", fmt.Errorf("model has no type")
	}
	return nil, nil, "", fmt.Errorf("unsupported model type %q (want WordPiece, BPE, Unigram or WordLevel)", head.Type)
}

func mapVocab(m map[string]int64) (*vocab, error) {
	if len(m) == 0 {
		return nil, fmt.Errorf("empty vocabulary")
	}
	v := newVocab(len(m))
	for t, id := range m {
		if id < 0 || id > math.MaxInt32 {
			return nil, fmt.Errorf("token %q has id %d", t, id)
		}
		v.add(t, id)
	}
	return v, nil
}

// parsePost returns the special tokens the post-processor puts around a single sequence.
func parsePost(raw json.RawMessage, v *vocab) (prefix, suffix Encoding, err error) {
	return parsePostAt(raw, v, 0)
}

// parsePostAt is parsePost for a post-processor inside depth Sequences.
func parsePostAt(raw json.RawMessage, v *vocab, depth int) (prefix, suffix Encoding, err error) {
	if isNull(raw) {
		return
	}
	var head struct {
		Type string `json:"type"`
	}
	if err = json.Unmarshal(raw, &head); err != nil {
		err = fmt.Errorf("post_processor: %v", err)
		return
	}
	pairTok := func(field json.RawMessage, what string) (Encoding, error) {
		var pr [2]json.RawMessage
		var s string
		var id int64
		if json.Unmarshal(field, &pr) != nil || json.Unmarshal(pr[0], &s) != nil || json.Unmarshal(pr[1], &id) != nil {
			return Encoding{}, fmt.Errorf("post_processor %s: %s is not [token, id]", head.Type, what)
		}
		return Encoding{IDs: []int64{id}, Tokens: []string{s}}, nil
	}
	switch head.Type {
	case "BertProcessing", "RobertaProcessing":
		var m struct {
			Sep json.RawMessage `json:"sep"`
			Cls json.RawMessage `json:"cls"`
		}
		if err = json.Unmarshal(raw, &m); err != nil {
			err = fmt.Errorf("post_processor %s: %v", head.Type, err)
			return
		}
		if prefix, err = pairTok(m.Cls, "cls"); err != nil {
			return
		}
		suffix, err = pairTok(m.Sep, "sep")
		return
	case "ByteLevel":
		return
	case "Sequence":
		var m struct {
			Processors []json.RawMessage `json:"processors"`
		}
		if depth >= maxNesting {
			err = fmt.Errorf("post_processor: Sequence nested more than %d deep", maxNesting)
			return
		}
		if err = json.Unmarshal(raw, &m); err != nil {
			err = fmt.Errorf("post_processor Sequence: %v", err)
			return
		}
		// Each processor wraps what the ones before it made: the prefixes come in reverse
		// order (gathered first, so that a long Sequence is not quadratic).
		var prefixes []Encoding
		for _, r := range m.Processors {
			var p, s Encoding
			if p, s, err = parsePostAt(r, v, depth+1); err != nil {
				return
			}
			prefixes = append(prefixes, p)
			suffix.IDs, suffix.Tokens = append(suffix.IDs, s.IDs...), append(suffix.Tokens, s.Tokens...)
		}
		for i := len(prefixes) - 1; i >= 0; i-- {
			prefix.IDs, prefix.Tokens = append(prefix.IDs, prefixes[i].IDs...), append(prefix.Tokens, prefixes[i].Tokens...)
		}
		return
	case "TemplateProcessing":
		var m struct {
			Single []struct {
				Special *struct {
					ID string `json:"id"`
				} `json:"SpecialToken"`
				Sequence *struct {
					ID string `json:"id"`
				} `json:"Sequence"`
			} `json:"single"`
			Specials map[string]struct {
				IDs    []int64  `json:"ids"`
				Tokens []string `json:"tokens"`
			} `json:"special_tokens"`
		}
		if err = json.Unmarshal(raw, &m); err != nil {
			err = fmt.Errorf("post_processor TemplateProcessing: %v", err)
			return
		}
		seen := false
		for _, piece := range m.Single {
			switch {
			case piece.Sequence != nil:
				if seen {
					err = fmt.Errorf("post_processor TemplateProcessing: single template has the sequence twice")
					return
				}
				seen = true
			case piece.Special != nil:
				sp, ok := m.Specials[piece.Special.ID]
				if !ok || len(sp.IDs) != len(sp.Tokens) {
					err = fmt.Errorf("post_processor TemplateProcessing: special token %q is not defined", piece.Special.ID)
					return
				}
				dst := &prefix
				if seen {
					dst = &suffix
				}
				dst.IDs = append(dst.IDs, sp.IDs...)
				dst.Tokens = append(dst.Tokens, sp.Tokens...)
			default:
				err = fmt.Errorf("post_processor TemplateProcessing: template piece is neither SpecialToken nor Sequence")
				return
			}
		}
		if !seen {
			err = fmt.Errorf("post_processor TemplateProcessing: single template has no sequence")
		}
		return
	case "":
		err = fmt.Errorf("post_processor has no type")
		return
	}
	err = fmt.Errorf("unsupported post_processor %q", head.Type)
	return
}
