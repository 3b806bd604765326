package tokenize

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// normalizer rewrites text before pre-tokenisation, as a Hugging Face normalizer does (without
// the offset bookkeeping, which zoo does not need).
type normalizer interface {
	normalize(s string) string
}

type normSeq []normalizer

func (q normSeq) normalize(s string) string {
	for _, n := range q {
		s = n.normalize(s)
	}
	return s
}

// maxNesting bounds how deep Sequence normalizers, pre-tokenizers and post-processors nest:
// real files nest one or two deep, and each level costs one more pass over the JSON below it,
// so the bound keeps loading linear in the file.
const maxNesting = 16

// parseNormalizer builds a normalizer from its tokenizer.json object (nil for JSON null).
func parseNormalizer(raw json.RawMessage) (normalizer, error) {
	return parseNormalizerAt(raw, 0)
}

// parseNormalizerAt parses a normalizer inside depth Sequences; nested Sequences are
// flattened into one.
func parseNormalizerAt(raw json.RawMessage, depth int) (normalizer, error) {
	if isNull(raw) {
		return nil, nil
	}
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return nil, fmt.Errorf("normalizer: %v", err)
	}
	switch head.Type {
	case "Sequence":
		var v struct {
			Normalizers []json.RawMessage `json:"normalizers"`
		}
		if depth >= maxNesting {
			return nil, fmt.Errorf("normalizer: Sequence nested more than %d deep", maxNesting)
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("normalizer Sequence: %v", err)
		}
		var q normSeq
		for _, r := range v.Normalizers {
			n, err := parseNormalizerAt(r, depth+1)
			if err != nil {
				return nil, err
			}
			if inner, ok := n.(normSeq); ok {
				q = append(q, inner...)
			} else if n != nil {
				q = append(q, n)
			}
		}
		return q, nil
	case "BertNormalizer":
		v := bertNorm{Clean: true, Chinese: true, Lower: true}
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("normalizer BertNormalizer: %v", err)
		}
		return &v, nil
	case "Lowercase":
		return lowercase{}, nil
	case "StripAccents":
		return stripAccents{}, nil
	case "NFC":
		return unorm{norm.NFC}, nil
	case "NFD":
		return unorm{norm.NFD}, nil
	case "NFKC":
		return unorm{norm.NFKC}, nil
	case "NFKD":
		return unorm{norm.NFKD}, nil
	case "Strip":
		v := strip{Left: true, Right: true}
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("normalizer Strip: %v", err)
		}
		return v, nil
	case "Prepend":
		var v prepend
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("normalizer Prepend: %v", err)
		}
		return v, nil
	case "Replace":
		var v struct {
			Pattern pattern `json:"pattern"`
			Content string  `json:"content"`
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("normalizer Replace: %v", err)
		}
		re, err := v.Pattern.compile()
		if err != nil {
			return nil, fmt.Errorf("normalizer Replace: %v", err)
		}
		return replace{re: re, with: v.Content}, nil
	case "Precompiled":
		var v struct {
			Charsmap string `json:"precompiled_charsmap"`
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("normalizer Precompiled: %v", err)
		}
		blob, err := base64.StdEncoding.DecodeString(v.Charsmap)
		if err != nil {
			return nil, fmt.Errorf("normalizer Precompiled: precompiled_charsmap is not base64: %v", err)
		}
		cm, err := parseCharsmap(blob)
		if err != nil {
			return nil, fmt.Errorf("normalizer Precompiled: %v", err)
		}
		if cm == nil {
			return nil, nil
		}
		return &hfPrecompiled{cm}, nil
	case "":
		return nil, fmt.Errorf("normalizer has no type")
	}
	return nil, fmt.Errorf("unsupported normalizer %q", head.Type)
}

// pattern is a tokenizer.json pattern: {"String": "..."} (literal) or {"Regex": "..."}.
type pattern struct {
	String *string `json:"String"`
	Regex  *string `json:"Regex"`
}

func (p pattern) compile() (*regexp.Regexp, error) {
	switch {
	case p.String != nil:
		if *p.String == "" {
			return nil, fmt.Errorf("empty pattern")
		}
		return regexp.Compile(regexp.QuoteMeta(*p.String))
	case p.Regex != nil:
		re, err := regexp.Compile(*p.Regex)
		if err != nil {
			// Oniguruma syntax Go's RE2 lacks (look-around, possessive quantifiers): refuse it
			// rather than tokenise differently.
			return nil, fmt.Errorf("regex %q is not supported by zoo (%v)", *p.Regex, err)
		}
		return re, nil
	}
	return nil, fmt.Errorf("pattern has neither String nor Regex")
}

// bertNorm is Hugging Face's BertNormalizer. StripAccents nil means "as Lower".
type bertNorm struct {
	Clean        bool  `json:"clean_text"`
	Chinese      bool  `json:"handle_chinese_chars"`
	StripAccents *bool `json:"strip_accents"`
	Lower        bool  `json:"lowercase"`
}

func (b *bertNorm) normalize(s string) string {
	if b.Clean {
		s = cleanText(s)
	}
	if b.Chinese {
		s = padChinese(s)
	}
	strip := b.Lower
	if b.StripAccents != nil {
		strip = *b.StripAccents
	}
	// Accents are stripped before lowercasing, as Hugging Face's Rust code does.
	if strip {
		s = stripMn(s)
	}
	if b.Lower {
		s = lowerChars(s)
	}
	return s
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// cleanText drops NUL, U+FFFD and "other" characters (Cc, Cf, Cs, Co, Cn, except \t \n \r)
// and turns whitespace into a space.
func cleanText(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 0x80 || c < 0x20 || c == 0x7f {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var sb strings.Builder
	sb.Grow(len(s))
	for _, r := range s {
		switch {
		case r == 0 || r == utf8.RuneError || isOther(r):
		case r == '\t' || r == '\n' || r == '\r' || unicode.IsSpace(r):
			sb.WriteByte(' ')
		default:
			sb.WriteRune(r)
		}
	}
	return sb.String()
}

// isOther reports Unicode general category C (Cc, Cf, Cs, Co, Cn) except \t, \n, \r.
func isOther(r rune) bool {
	if r == '\t' || r == '\n' || r == '\r' {
		return false
	}
	if r < 0x80 {
		return r < 0x20 || r == 0x7f
	}
	if unicode.Is(unicode.C, r) {
		return true
	}
	// Cn: unassigned code points belong to no category.
	return !unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Z)
}

func isChinese(r rune) bool {
	return (r >= 0x4E00 && r <= 0x9FFF) || (r >= 0x3400 && r <= 0x4DBF) || (r >= 0x20000 && r <= 0x2A6DF) ||
		(r >= 0x2A700 && r <= 0x2B73F) || (r >= 0x2B740 && r <= 0x2B81F) || (r >= 0x2B820 && r <= 0x2CEAF) ||
		(r >= 0xF900 && r <= 0xFAFF) || (r >= 0x2F800 && r <= 0x2FA1F)
}

func padChinese(s string) string {
	if isASCII(s) {
		return s
	}
	var sb strings.Builder
	sb.Grow(len(s) + 16)
	for _, r := range s {
		if isChinese(r) {
			sb.WriteByte(' ')
			sb.WriteRune(r)
			sb.WriteByte(' ')
		} else {
			sb.WriteRune(r)
		}
	}
	return sb.String()
}

// stripMn decomposes (NFD) and drops non-spacing marks, as BertNormalizer's strip_accents.
func stripMn(s string) string {
	if isASCII(s) {
		return s
	}
	d := norm.NFD.String(s)
	var sb strings.Builder
	sb.Grow(len(d))
	for _, r := range d {
		if !unicode.Is(unicode.Mn, r) {
			sb.WriteRune(r)
		}
	}
	return sb.String()
}

// lowerChars lowercases each character alone (Rust's char::to_lowercase, no final-sigma rule).
func lowerChars(s string) string {
	if isASCII(s) {
		for i := 0; i < len(s); i++ {
			if c := s[i]; c >= 'A' && c <= 'Z' {
				return strings.ToLower(s)
			}
		}
		return s
	}
	var sb strings.Builder
	sb.Grow(len(s))
	for _, r := range s {
		if r == 0x130 { // İ lowercases to i + combining dot above in Unicode's full mapping
			sb.WriteString("i\u0307")
			continue
		}
		sb.WriteRune(unicode.ToLower(r))
	}
	return sb.String()
}

type lowercase struct{}

func (lowercase) normalize(s string) string { return lowerChars(s) }

// stripAccents is the StripAccents normalizer: it drops combining marks (it decomposes
// nothing itself; tokenizer.json files put NFD before it).
type stripAccents struct{}

func (stripAccents) normalize(s string) string {
	if isASCII(s) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if unicode.Is(unicode.M, r) {
			return -1
		}
		return r
	}, s)
}

type unorm struct{ f norm.Form }

func (u unorm) normalize(s string) string { return u.f.String(s) }

type strip struct {
	Left  bool `json:"strip_left"`
	Right bool `json:"strip_right"`
}

func (p strip) normalize(s string) string {
	if p.Left {
		s = strings.TrimLeftFunc(s, unicode.IsSpace)
	}
	if p.Right {
		s = strings.TrimRightFunc(s, unicode.IsSpace)
	}
	return s
}

type prepend struct {
	Prepend string `json:"prepend"`
}

func (p prepend) normalize(s string) string {
	if s == "" {
		return s
	}
	return p.Prepend + s
}

type replace struct {
	re   *regexp.Regexp
	with string
}

func (r replace) normalize(s string) string { return r.re.ReplaceAllLiteralString(s, r.with) }
