package tokenize

import (
	"encoding/json"
	"fmt"
)

// PairEncoder is a Tokenizer that encodes a pair of texts as one sequence, as a
// cross-encoder reads a query and a passage: the texts' raw encodings put into the
// tokenizer's pair template ([CLS] a [SEP] b [SEP] for BERT, <s> a </s></s> b </s> for
// RoBERTa, a tokenizer.json TemplateProcessing's "pair"), with the template's token type ids.
// Hugging Face's tokenizers and tokenizers.js give the same ids and type ids.
type PairEncoder interface {
	// EncodePair encodes a and b. When maxLen is above 0 and the pair would be longer, the
	// texts are cut first as Hugging Face's longest_first truncation cuts them (the longer
	// one loses tokens; both are cut to half the room when the shorter does not fit in half)
	// so that the pair, special tokens included, holds maxLen tokens; a maxLen that leaves
	// no room for the texts is an error.
	EncodePair(a, b string, maxLen int) (ids, types []int64, tokens []string, err error)
}

// pairItem is one piece of a pair template: a special token (its ids) or a text (A or B),
// with its token type id.
type pairItem struct {
	special Encoding
	seq     byte // 'A', 'B', or 0 for a special token
	typeID  int64
}

// pairTemplate is a post-processor's layout of a pair.
type pairTemplate []pairItem

// plainPair is the layout without a post-processor: a then b, type ids 0 and 1.
var plainPair = pairTemplate{{seq: 'A'}, {seq: 'B', typeID: 1}}

// specials counts the template's special tokens.
func (t pairTemplate) specials() int {
	n := 0
	for _, it := range t {
		n += len(it.special.IDs)
	}
	return n
}

// bertPair is BertProcessing's pair: cls a sep (type 0) b sep (type 1).
func bertPair(cls, sep Encoding) pairTemplate {
	return pairTemplate{{special: cls}, {seq: 'A'}, {special: sep}, {seq: 'B', typeID: 1}, {special: sep, typeID: 1}}
}

// robertaPair is RobertaProcessing's pair: cls a sep (type 0) sep b sep (type 1), as
// tokenizers.js lays it out.
func robertaPair(cls, sep Encoding) pairTemplate {
	return pairTemplate{{special: cls}, {seq: 'A'}, {special: sep}, {special: sep, typeID: 1}, {seq: 'B', typeID: 1}, {special: sep, typeID: 1}}
}

// parsePairPost returns the pair template of a tokenizer.json post-processor.
func parsePairPost(raw json.RawMessage) (pairTemplate, error) {
	if isNull(raw) {
		return plainPair, nil
	}
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return nil, fmt.Errorf("post_processor: %v", err)
	}
	tok := func(field json.RawMessage) (Encoding, error) {
		var pr [2]json.RawMessage
		var s string
		var id int64
		if json.Unmarshal(field, &pr) != nil || json.Unmarshal(pr[0], &s) != nil || json.Unmarshal(pr[1], &id) != nil {
			return Encoding{}, fmt.Errorf("post_processor %s: a special token is not [token, id]", head.Type)
		}
		return Encoding{IDs: []int64{id}, Tokens: []string{s}}, nil
	}
	switch head.Type {
	case "BertProcessing", "RobertaProcessing":
		var m struct {
			Sep json.RawMessage `json:"sep"`
			Cls json.RawMessage `json:"cls"`
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("post_processor %s: %v", head.Type, err)
		}
		cls, err := tok(m.Cls)
		if err != nil {
			return nil, err
		}
		sep, err := tok(m.Sep)
		if err != nil {
			return nil, err
		}
		if head.Type == "BertProcessing" {
			return bertPair(cls, sep), nil
		}
		return robertaPair(cls, sep), nil
	case "ByteLevel":
		return plainPair, nil
	case "Sequence":
		var m struct {
			Processors []json.RawMessage `json:"processors"`
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("post_processor Sequence: %v", err)
		}
		out := plainPair
		for _, r := range m.Processors {
			t, err := parsePairPost(r)
			if err != nil {
				return nil, err
			}
			if t.specials() > 0 {
				if out.specials() > 0 {
					return nil, fmt.Errorf("post_processor Sequence: two processors add special tokens to a pair")
				}
				out = t
			}
		}
		return out, nil
	case "TemplateProcessing":
		type piece struct {
			Special *struct {
				ID     string `json:"id"`
				TypeID int64  `json:"type_id"`
			} `json:"SpecialToken"`
			Sequence *struct {
				ID     string `json:"id"`
				TypeID int64  `json:"type_id"`
			} `json:"Sequence"`
		}
		var m struct {
			Pair     []piece `json:"pair"`
			Specials map[string]struct {
				IDs    []int64  `json:"ids"`
				Tokens []string `json:"tokens"`
			} `json:"special_tokens"`
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("post_processor TemplateProcessing: %v", err)
		}
		var t pairTemplate
		seen := map[byte]bool{}
		for _, p := range m.Pair {
			switch {
			case p.Sequence != nil:
				if p.Sequence.ID != "A" && p.Sequence.ID != "B" {
					return nil, fmt.Errorf("post_processor TemplateProcessing: pair sequence %q (want A or B)", p.Sequence.ID)
				}
				id := p.Sequence.ID[0]
				if seen[id] {
					return nil, fmt.Errorf("post_processor TemplateProcessing: pair template has sequence %c twice", id)
				}
				seen[id] = true
				t = append(t, pairItem{seq: id, typeID: p.Sequence.TypeID})
			case p.Special != nil:
				sp, ok := m.Specials[p.Special.ID]
				if !ok || len(sp.IDs) != len(sp.Tokens) {
					return nil, fmt.Errorf("post_processor TemplateProcessing: special token %q is not defined", p.Special.ID)
				}
				t = append(t, pairItem{special: Encoding{IDs: sp.IDs, Tokens: sp.Tokens}, typeID: p.Special.TypeID})
			default:
				return nil, fmt.Errorf("post_processor TemplateProcessing: pair template piece is neither SpecialToken nor Sequence")
			}
		}
		if !seen['A'] || !seen['B'] {
			return nil, fmt.Errorf("post_processor TemplateProcessing: the pair template lacks sequence A or B")
		}
		return t, nil
	}
	return nil, fmt.Errorf("post_processor %q has no pair template zoo knows", head.Type)
}

// TruncatePair returns the lengths two texts of na and nb tokens are cut to so that they
// hold at most room tokens together, as Hugging Face's tokenizers cut a pair with the
// longest_first strategy: the shorter text stays whole and the longer takes the rest when
// the shorter fits in half the room; else both are cut to half (the second text gets the odd
// token).
func TruncatePair(na, nb, room int) (int, int) {
	if na+nb <= room {
		return na, nb
	}
	n1, n2 := na, nb
	swap := n1 > n2
	if swap {
		n1, n2 = n2, n1
	}
	if n1 > room {
		n2 = n1
	} else {
		n2 = max(n1, room-n1)
	}
	if n1+n2 > room {
		n1 = room / 2
		n2 = n1 + room%2
	}
	if swap {
		n1, n2 = n2, n1
	}
	return min(na, n1), min(nb, n2)
}

// EncodePair is PairEncoder's: the raw encodings of a and b in the tokenizer's pair
// template.
func (p *pipeline) EncodePair(a, b string, maxLen int) ([]int64, []int64, []string, error) {
	if p.pairErr != nil {
		return nil, nil, nil, p.pairErr
	}
	ia, ta, err := p.EncodeRaw(a)
	if err != nil {
		return nil, nil, nil, err
	}
	ib, tb, err := p.EncodeRaw(b)
	if err != nil {
		return nil, nil, nil, err
	}
	t := p.pair
	if t == nil {
		if p.pairErr != nil {
			return nil, nil, nil, p.pairErr
		}
		t = plainPair
	}
	if maxLen > 0 && len(ia)+len(ib)+t.specials() > maxLen {
		room := maxLen - t.specials()
		if room < 2 {
			return nil, nil, nil, fmt.Errorf("a pair cut to %d tokens leaves no room for its texts beside %d special tokens", maxLen, t.specials())
		}
		na, nb := TruncatePair(len(ia), len(ib), room)
		ia, ta, ib, tb = ia[:na], ta[:na], ib[:nb], tb[:nb]
	}
	var ids, types []int64
	var toks []string
	for _, it := range t {
		var e Encoding
		switch it.seq {
		case 'A':
			e = Encoding{IDs: ia, Tokens: ta}
		case 'B':
			e = Encoding{IDs: ib, Tokens: tb}
		default:
			e = it.special
		}
		ids = append(ids, e.IDs...)
		toks = append(toks, e.Tokens...)
		for range e.IDs {
			types = append(types, it.typeID)
		}
	}
	return ids, types, toks, nil
}
