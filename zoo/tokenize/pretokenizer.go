package tokenize

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// preTokenizer splits normalised text into words, as a Hugging Face pre-tokenizer does. first
// is true when s starts the sequence (Metaspace's prepend_scheme "first" needs it). It appends
// to dst and returns it.
type preTokenizer interface {
	split(s string, first bool, dst []string) []string
}

type preSeq []preTokenizer

func (q preSeq) split(s string, first bool, dst []string) []string {
	cur := []string{s}
	var next []string
	for _, p := range q {
		next = next[:0]
		for i, w := range cur {
			next = p.split(w, first && i == 0, next)
		}
		cur, next = next, cur
	}
	return append(dst, cur...)
}

func parsePreTokenizer(raw json.RawMessage) (preTokenizer, error) {
	return parsePreTokenizerAt(raw, 0)
}

// parsePreTokenizerAt parses a pre-tokenizer inside depth Sequences; nested Sequences are
// flattened into one (each stage splits every word of the one before, so nesting groups
// nothing).
func parsePreTokenizerAt(raw json.RawMessage, depth int) (preTokenizer, error) {
	if isNull(raw) {
		return nil, nil
	}
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return nil, fmt.Errorf("pre_tokenizer: %v", err)
	}
	switch head.Type {
	case "Sequence":
		var v struct {
			Pre []json.RawMessage `json:"pretokenizers"`
		}
		if depth >= maxNesting {
			return nil, fmt.Errorf("pre_tokenizer: Sequence nested more than %d deep", maxNesting)
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("pre_tokenizer Sequence: %v", err)
		}
		var q preSeq
		for _, r := range v.Pre {
			p, err := parsePreTokenizerAt(r, depth+1)
			if err != nil {
				return nil, err
			}
			if inner, ok := p.(preSeq); ok {
				q = append(q, inner...)
			} else if p != nil {
				q = append(q, p)
			}
		}
		return q, nil
	case "BertPreTokenizer":
		return bertPre{}, nil
	case "Whitespace":
		return whitespacePre{}, nil
	case "WhitespaceSplit":
		return whitespaceSplit{}, nil
	case "ByteLevel":
		v := byteLevelPre{AddPrefixSpace: true, UseRegex: true}
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("pre_tokenizer ByteLevel: %v", err)
		}
		return &v, nil
	case "Metaspace":
		var v struct {
			Replacement    string `json:"replacement"`
			PrependScheme  string `json:"prepend_scheme"`
			AddPrefixSpace *bool  `json:"add_prefix_space"`
			Split          *bool  `json:"split"`
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("pre_tokenizer Metaspace: %v", err)
		}
		m := &metaspace{repl: "\u2581", scheme: "always", doSplit: true}
		if v.Replacement != "" {
			m.repl = v.Replacement
		}
		if v.Split != nil {
			m.doSplit = *v.Split
		}
		switch {
		case v.PrependScheme != "":
			m.scheme = v.PrependScheme
		case v.AddPrefixSpace != nil && !*v.AddPrefixSpace:
			m.scheme = "never"
		}
		if m.scheme != "always" && m.scheme != "first" && m.scheme != "never" {
			return nil, fmt.Errorf("pre_tokenizer Metaspace: unknown prepend_scheme %q", m.scheme)
		}
		return m, nil
	case "Punctuation":
		var v struct {
			Behavior string `json:"behavior"`
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("pre_tokenizer Punctuation: %v", err)
		}
		if v.Behavior == "" {
			v.Behavior = "Isolated"
		}
		if err := checkBehavior(v.Behavior); err != nil {
			return nil, fmt.Errorf("pre_tokenizer Punctuation: %v", err)
		}
		return funcSplit{isPunct, v.Behavior}, nil
	case "Digits":
		var v struct {
			Individual bool `json:"individual_digits"`
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("pre_tokenizer Digits: %v", err)
		}
		if v.Individual {
			return funcSplit{unicode.IsDigit, "Isolated"}, nil
		}
		return funcSplit{unicode.IsDigit, "Contiguous"}, nil
	case "Split":
		var v struct {
			Pattern  pattern `json:"pattern"`
			Behavior string  `json:"behavior"`
			Invert   bool    `json:"invert"`
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("pre_tokenizer Split: %v", err)
		}
		re, err := v.Pattern.compile()
		if err != nil {
			return nil, fmt.Errorf("pre_tokenizer Split: %v", err)
		}
		if err := checkBehavior(v.Behavior); err != nil {
			return nil, fmt.Errorf("pre_tokenizer Split: %v", err)
		}
		return regexSplit{re, v.Behavior, v.Invert}, nil
	case "":
		return nil, fmt.Errorf("pre_tokenizer has no type")
	}
	return nil, fmt.Errorf("unsupported pre_tokenizer %q", head.Type)
}

func checkBehavior(b string) error {
	switch b {
	case "Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous":
		return nil
	}
	return fmt.Errorf("unknown split behavior %q", b)
}

// splitSpans cuts s at the matched spans [lo, hi) (sorted, disjoint) by Hugging Face's
// SplitDelimiterBehavior, dropping empty pieces.
func splitSpans(s string, spans [][2]int, behavior string, dst []string) []string {
	type piece struct {
		lo, hi int
		match  bool
	}
	var ps []piece
	at := 0
	for _, m := range spans {
		if m[0] > at {
			ps = append(ps, piece{at, m[0], false})
		}
		if m[1] > m[0] {
			ps = append(ps, piece{m[0], m[1], true})
		}
		at = m[1]
	}
	if at < len(s) {
		ps = append(ps, piece{at, len(s), false})
	}
	switch behavior {
	case "Removed":
		for _, p := range ps {
			if !p.match {
				dst = append(dst, s[p.lo:p.hi])
			}
		}
	case "Isolated":
		for _, p := range ps {
			dst = append(dst, s[p.lo:p.hi])
		}
	case "Contiguous":
		for i := 0; i < len(ps); {
			j := i + 1
			hi := ps[i].hi
			for j < len(ps) && ps[i].match && ps[j].match {
				hi = ps[j].hi
				j++
			}
			dst = append(dst, s[ps[i].lo:hi])
			i = j
		}
	case "MergedWithPrevious":
		lo := -1
		for _, p := range ps {
			if lo < 0 {
				lo = p.lo
			}
			if p.match {
				dst = append(dst, s[lo:p.hi])
				lo = -1
			}
		}
		if lo >= 0 {
			dst = append(dst, s[lo:])
		}
	case "MergedWithNext":
		lo := 0
		for i, p := range ps {
			if p.match && p.lo > lo && i > 0 {
				dst = append(dst, s[lo:p.lo])
				lo = p.lo
			}
		}
		if lo < len(s) {
			dst = append(dst, s[lo:])
		}
	}
	return dst
}

// funcSplit matches each character for which f holds as its own span.
type funcSplit struct {
	f        func(rune) bool
	behavior string
}

func (p funcSplit) split(s string, _ bool, dst []string) []string {
	var spans [][2]int
	for i, r := range s {
		if p.f(r) {
			spans = append(spans, [2]int{i, i + utf8.RuneLen(r)})
		}
	}
	if len(spans) == 0 {
		return append(dst, s)
	}
	return splitSpans(s, spans, p.behavior, dst)
}

type regexSplit struct {
	re       *regexp.Regexp
	behavior string
	invert   bool
}

func (p regexSplit) split(s string, _ bool, dst []string) []string {
	idx := p.re.FindAllStringIndex(s, -1)
	spans := make([][2]int, 0, len(idx))
	if p.invert {
		at := 0
		for _, m := range idx {
			if m[0] > at {
				spans = append(spans, [2]int{at, m[0]})
			}
			at = m[1]
		}
		if at < len(s) {
			spans = append(spans, [2]int{at, len(s)})
		}
	} else {
		for _, m := range idx {
			spans = append(spans, [2]int{m[0], m[1]})
		}
	}
	return splitSpans(s, spans, p.behavior, dst)
}

// isPunct is BERT's punctuation: ASCII punctuation or a Unicode P* character.
func isPunct(r rune) bool {
	if r < 0x80 {
		return (r >= 33 && r <= 47) || (r >= 58 && r <= 64) || (r >= 91 && r <= 96) || (r >= 123 && r <= 126)
	}
	return unicode.IsPunct(r)
}

func isSpace(r rune) bool {
	if r < 0x80 {
		return r == ' ' || (r >= '\t' && r <= '\r')
	}
	return unicode.IsSpace(r)
}

// bertPre splits on whitespace (removed) and isolates each punctuation character.
type bertPre struct{}

func (bertPre) split(s string, _ bool, dst []string) []string {
	start := -1
	for i := 0; i < len(s); {
		r, n := rune(s[i]), 1
		if r >= 0x80 {
			r, n = utf8.DecodeRuneInString(s[i:])
		}
		switch {
		case isSpace(r):
			if start >= 0 {
				dst = append(dst, s[start:i])
				start = -1
			}
		case isPunct(r):
			if start >= 0 {
				dst = append(dst, s[start:i])
				start = -1
			}
			dst = append(dst, s[i:i+n])
		default:
			if start < 0 {
				start = i
			}
		}
		i += n
	}
	if start >= 0 {
		dst = append(dst, s[start:])
	}
	return dst
}

// whitespacePre is the Whitespace pre-tokenizer, the regex \w+|[^\w\s]+ (Unicode \w).
type whitespacePre struct{}

func isWordChar(r rune) bool {
	return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.M, r) || unicode.Is(unicode.Pc, r)
}

func (whitespacePre) split(s string, _ bool, dst []string) []string {
	start, kind := -1, 0 // kind 1: word, 2: other non-space
	for i, r := range s {
		k := 2
		switch {
		case isSpace(r):
			k = 0
		case isWordChar(r):
			k = 1
		}
		if k != kind && start >= 0 {
			dst = append(dst, s[start:i])
			start = -1
		}
		if k != 0 && start < 0 {
			start = i
		}
		kind = k
	}
	if start >= 0 {
		dst = append(dst, s[start:])
	}
	return dst
}

type whitespaceSplit struct{}

func (whitespaceSplit) split(s string, _ bool, dst []string) []string {
	return append(dst, strings.FieldsFunc(s, isSpace)...)
}

// metaspace replaces spaces with the replacement (▁), prepends one as its scheme says, and
// splits before each replacement when split is set.
type metaspace struct {
	repl    string
	scheme  string // always, first, never
	doSplit bool
}

func (m *metaspace) split(s string, first bool, dst []string) []string {
	s = strings.ReplaceAll(s, " ", m.repl)
	if (m.scheme == "always" || (m.scheme == "first" && first)) && !strings.HasPrefix(s, m.repl) {
		s = m.repl + s
	}
	if !m.doSplit {
		return append(dst, s)
	}
	// Split(replacement, MergedWithNext): each replacement starts a word; the text before
	// the first one is a word of its own.
	lo := 0
	for {
		from := lo
		if strings.HasPrefix(s[lo:], m.repl) {
			from += len(m.repl)
		}
		j := strings.Index(s[from:], m.repl)
		if j < 0 {
			break
		}
		at := from + j
		dst = append(dst, s[lo:at])
		lo = at
	}
	if lo < len(s) {
		dst = append(dst, s[lo:])
	}
	return dst
}

// byteLevelPre is GPT-2's ByteLevel pre-tokenizer: optional prefix space, GPT-2's regex split,
// then each byte mapped to its printable stand-in.
type byteLevelPre struct {
	AddPrefixSpace bool `json:"add_prefix_space"`
	UseRegex       bool `json:"use_regex"`
}

func (b *byteLevelPre) split(s string, first bool, dst []string) []string {
	if b.AddPrefixSpace && !strings.HasPrefix(s, " ") {
		s = " " + s
	}
	if !b.UseRegex {
		return append(dst, byteLevelMap(s))
	}
	for len(s) > 0 {
		n := gpt2Next(s)
		dst = append(dst, byteLevelMap(s[:n]))
		s = s[n:]
	}
	return dst
}

// gpt2Next returns the length of the first match of GPT-2's pattern
// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ at the start of s.
func gpt2Next(s string) int {
	if s[0] == '\'' && len(s) > 1 {
		switch s[1] {
		case 's', 't', 'm', 'd':
			return 2
		case 'r':
			if len(s) > 2 && s[2] == 'e' {
				return 3
			}
		case 'v':
			if len(s) > 2 && s[2] == 'e' {
				return 3
			}
		case 'l':
			if len(s) > 2 && s[2] == 'l' {
				return 3
			}
		}
	}
	i := 0
	if s[0] == ' ' {
		i = 1
	}
	if i < len(s) {
		r, n := decode(s[i:])
		cls := charClass(r)
		if cls != clsSpace {
			j := i + n
			for j < len(s) {
				r2, n2 := decode(s[j:])
				if charClass(r2) != cls {
					break
				}
				j += n2
			}
			return j
		}
	}
	// Whitespace run (s[0] is whitespace here).
	j := 0
	last := 0
	for j < len(s) {
		r, n := decode(s[j:])
		if !isSpace(r) {
			break
		}
		last = n
		j += n
	}
	if j == len(s) || j == last {
		return j // the run ends the text, or is one character before a non-space
	}
	return j - last
}

const (
	clsSpace = iota
	clsLetter
	clsNumber
	clsOther
)

func charClass(r rune) int {
	switch {
	case r < 0x80:
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
			return clsLetter
		case r >= '0' && r <= '9':
			return clsNumber
		case r == ' ' || (r >= '\t' && r <= '\r'):
			return clsSpace
		}
		return clsOther
	case unicode.IsLetter(r):
		return clsLetter
	case unicode.IsNumber(r):
		return clsNumber
	case unicode.IsSpace(r):
		return clsSpace
	}
	return clsOther
}

func decode(s string) (rune, int) {
	if s[0] < 0x80 {
		return rune(s[0]), 1
	}
	return utf8.DecodeRuneInString(s)
}

// byteRune is GPT-2's bytes_to_unicode table; runeByte its inverse.
var byteRune, runeByte = func() ([256]string, map[rune]byte) {
	var t [256]string
	inv := make(map[rune]byte, 256)
	n := 0
	for b := 0; b < 256; b++ {
		var r rune
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			r = rune(b)
		} else {
			r = rune(256 + n)
			n++
		}
		t[b] = string(r)
		inv[r] = byte(b)
	}
	return t, inv
}()

func byteLevelMap(s string) string {
	var sb strings.Builder
	sb.Grow(len(s) * 2)
	for i := 0; i < len(s); i++ {
		sb.WriteString(byteRune[s[i]])
	}
	return sb.String()
}
