package tokenize

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// SentencePiece piece types (sentencepiece_model.proto).
const (
	spNormal      = 1
	spUnknown     = 2
	spControl     = 3
	spUserDefined = 4
	spUnused      = 5
	spByte        = 6
)

// spModel is a SentencePiece ModelProto: its normaliser and its Unigram or BPE model, encoding
// as SentencePieceProcessor.encode does (no BOS/EOS: encode adds them only when asked).
type spModel struct {
	v      *vocab
	types  []int32
	scores []float64
	kind   string // "Unigram" or "BPE"

	// normaliser
	cm            *charsmap
	addDummy      bool
	removeExtraWS bool
	escapeWS      bool
	user          []string // user-defined symbols, longest first

	// model
	pieces       map[string]int64 // normal, user-defined and unused pieces
	reserved     map[string]int64 // control, unknown and byte pieces
	unkID        int64
	byteFallback bool
	uni          *unigram
	// wordSplit: no piece holds ▁ past its first byte, so BPE merges never cross the ▁ that
	// starts a word and each word can be merged (and cached) alone.
	wordSplit bool
	mu        sync.Mutex
	cache     map[string][]int64

	special Special
	// cutAt: the ASCII whitespace bytes a text may be cut just before (see Stream).
	cutAt *[256]bool
}

type spPiece struct {
	piece string
	score float32
	typ   int32
}

// loadSentencePiece parses a SentencePiece .model (a serialised ModelProto).
func loadSentencePiece(name string, data []byte) (Tokenizer, error) {
	m, err := parseSP(data)
	if err != nil {
		return nil, formatErr(name, "SentencePiece model: %v", err)
	}
	return m, nil
}

type spSpecs struct {
	modelType            int64
	byteFallback         bool
	whitespaceSuffix     bool
	unkID, bosID, eosID  int64
	padID                int64
	normName             string
	charsmap             []byte
	addDummy, rmWS, escW bool
	hasNormalizer        bool
}

func parseSP(data []byte) (*spModel, error) {
	if len(data) == 0 {
		return nil, fmt.Errorf("file is empty")
	}
	var pieces []spPiece
	sp := spSpecs{modelType: 1, unkID: 0, bosID: 1, eosID: 2, padID: -1, addDummy: true, rmWS: true, escW: true}
	err := eachField(data, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		switch num {
		case 1:
			if typ != protowire.BytesType {
				return fmt.Errorf("pieces: wrong wire type")
			}
			p := spPiece{typ: spNormal}
			if err := eachField(v, func(n protowire.Number, t protowire.Type, b []byte, x uint64) error {
				switch {
				case n == 1 && t == protowire.BytesType:
					p.piece = string(b)
				case n == 2 && t == protowire.Fixed32Type:
					p.score = math.Float32frombits(uint32(x))
				case n == 3 && t == protowire.VarintType:
					p.typ = int32(x)
				}
				return nil
			}); err != nil {
				return fmt.Errorf("piece %d: %v", len(pieces), err)
			}
			pieces = append(pieces, p)
		case 2:
			if typ != protowire.BytesType {
				return fmt.Errorf("trainer_spec: wrong wire type")
			}
			return eachField(v, func(n protowire.Number, t protowire.Type, _ []byte, x uint64) error {
				if t != protowire.VarintType {
					return nil
				}
				switch n {
				case 3:
					sp.modelType = int64(x)
				case 35:
					sp.byteFallback = x != 0
				case 24:
					sp.whitespaceSuffix = x != 0
				case 40:
					sp.unkID = int64(int32(x))
				case 41:
					sp.bosID = int64(int32(x))
				case 42:
					sp.eosID = int64(int32(x))
				case 43:
					sp.padID = int64(int32(x))
				}
				return nil
			})
		case 3:
			if typ != protowire.BytesType {
				return fmt.Errorf("normalizer_spec: wrong wire type")
			}
			sp.hasNormalizer = true
			return eachField(v, func(n protowire.Number, t protowire.Type, b []byte, x uint64) error {
				switch {
				case n == 1 && t == protowire.BytesType:
					sp.normName = string(b)
				case n == 2 && t == protowire.BytesType:
					sp.charsmap = append([]byte(nil), b...)
				case n == 3 && t == protowire.VarintType:
					sp.addDummy = x != 0
				case n == 4 && t == protowire.VarintType:
					sp.rmWS = x != 0
				case n == 5 && t == protowire.VarintType:
					sp.escW = x != 0
				}
				return nil
			})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(pieces) == 0 {
		return nil, fmt.Errorf("no pieces (not a SentencePiece model, or truncated)")
	}
	m := &spModel{v: newVocab(len(pieces)), types: make([]int32, len(pieces)), scores: make([]float64, len(pieces)),
		pieces: map[string]int64{}, reserved: map[string]int64{}, unkID: -1,
		addDummy: sp.addDummy, removeExtraWS: sp.rmWS, escapeWS: sp.escW}
	switch sp.modelType {
	case 1:
		m.kind = "Unigram"
	case 2:
		m.kind = "BPE"
	case 3, 4:
		return nil, fmt.Errorf("model type %s is not supported (want Unigram or BPE)", map[int64]string{3: "WORD", 4: "CHAR"}[sp.modelType])
	default:
		return nil, fmt.Errorf("unknown model type %d", sp.modelType)
	}
	if sp.whitespaceSuffix {
		return nil, fmt.Errorf("treat_whitespace_as_suffix is not supported")
	}
	hasBytes := false
	for i, p := range pieces {
		id := int64(i)
		if p.piece == "" {
			return nil, fmt.Errorf("piece %d is empty", i)
		}
		if !utf8.ValidString(p.piece) {
			return nil, fmt.Errorf("piece %d is not UTF-8", i)
		}
		m.v.add(p.piece, id)
		m.types[i] = p.typ
		m.scores[i] = float64(p.score)
		dst := m.reserved
		switch p.typ {
		case spNormal, spUserDefined, spUnused:
			dst = m.pieces
		case spUnknown:
			if m.unkID >= 0 {
				return nil, fmt.Errorf("pieces %d and %d are both the unknown piece", m.unkID, i)
			}
			m.unkID = id
		case spControl:
		case spByte:
			hasBytes = true
		default:
			return nil, fmt.Errorf("piece %d has unknown type %d", i, p.typ)
		}
		if _, dup := m.pieces[p.piece]; dup {
			return nil, fmt.Errorf("piece %q appears twice", p.piece)
		}
		if _, dup := m.reserved[p.piece]; dup {
			return nil, fmt.Errorf("piece %q appears twice", p.piece)
		}
		dst[p.piece] = id
		if p.typ == spUserDefined {
			m.user = append(m.user, p.piece)
		}
	}
	if m.unkID < 0 {
		return nil, fmt.Errorf("no unknown piece")
	}
	if m.kind == "BPE" {
		for i, p := range pieces {
			if p.typ == spUnused {
				// SentencePiece re-splits merged unused pieces by their merge history, which
				// zoo does not rebuild.
				return nil, fmt.Errorf("BPE model with unused piece %d (%q) is not supported", i, p.piece)
			}
		}
	}
	if hasBytes && !sp.byteFallback {
		return nil, fmt.Errorf("byte pieces without byte_fallback")
	}
	m.byteFallback = sp.byteFallback
	// Longest user-defined symbol first, for prefix matching.
	for i := 1; i < len(m.user); i++ {
		for j := i; j > 0 && len(m.user[j]) > len(m.user[j-1]); j-- {
			m.user[j], m.user[j-1] = m.user[j-1], m.user[j]
		}
	}
	if m.cm, err = parseCharsmap(sp.charsmap); err != nil {
		return nil, err
	}
	if m.cm == nil && sp.normName != "" && sp.normName != "identity" {
		return nil, fmt.Errorf("normalizer %q has no precompiled charsmap; zoo cannot rebuild it from the rule name", sp.normName)
	}
	if m.kind == "Unigram" {
		u := newUnigram(m.v, m.scores, m.unkID)
		minScore, maxScore := math.Inf(1), math.Inf(-1)
		u.user = make([]bool, len(pieces))
		for i, p := range pieces {
			switch p.typ {
			case spNormal:
				minScore = math.Min(minScore, float64(p.score))
				maxScore = math.Max(maxScore, float64(p.score))
				u.addPiece(p.piece, int64(i))
			case spUserDefined:
				u.user[i] = true
				u.addPiece(p.piece, int64(i))
			}
		}
		if math.IsInf(minScore, 1) {
			minScore, maxScore = 0, 0
		}
		u.finish(minScore)
		u.maxScore = maxScore
		u.byteFback = m.byteFallback
		u.fuseUnk = true // SentencePiece reports a run of unknown characters as one unk
		u.f32 = true     // and stores path scores as floats
		m.uni = u
	}
	m.special = noSpecial()
	m.special.UNK = m.unkID
	for _, f := range []struct {
		dst *int64
		id  int64
	}{{&m.special.BOS, sp.bosID}, {&m.special.EOS, sp.eosID}, {&m.special.Pad, sp.padID}} {
		if f.id >= 0 && f.id < int64(len(pieces)) {
			*f.dst = f.id
		}
	}
	m.special.CLS, m.special.SEP = m.special.BOS, m.special.EOS
	if id, ok := m.reserved["<mask>"]; ok {
		m.special.Mask = id
	} else if id, ok := m.pieces["<mask>"]; ok {
		m.special.Mask = id
	}
	m.wordSplit = m.escapeWS
	for p := range m.pieces {
		if len(p) > 1 && strings.Contains(p[1:], "\u2581") {
			m.wordSplit = false
		}
	}
	m.cutAt = m.checkCuts()
	return m, nil
}

// eachField walks the fields of one protobuf message; v holds a bytes field's payload, x a
// varint or fixed value.
func eachField(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("corrupted protobuf (%v)", protowire.ParseError(n))
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.Fixed32Type:
			var y uint32
			y, n = protowire.ConsumeFixed32(b)
			x = uint64(y)
		case protowire.Fixed64Type:
			x, n = protowire.ConsumeFixed64(b)
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return fmt.Errorf("corrupted or truncated protobuf (%v)", protowire.ParseError(n))
		}
		b = b[n:]
		if err := fn(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}

// normalizePrefix is SentencePiece's Normalizer::NormalizePrefix: a user-defined symbol at the
// start of s is kept as is; otherwise the longest charsmap rule, or one character unchanged.
func (m *spModel) normalizePrefix(s string) (string, int) {
	for _, u := range m.user {
		if strings.HasPrefix(s, u) {
			return s[:len(u)], len(u)
		}
	}
	if m.cm != nil {
		if r, n := m.cm.longest(s); n > 0 {
			return r, n
		}
	}
	_, n := utf8.DecodeRuneInString(s)
	return s[:n], n
}

// normalize is SentencePiece's Normalizer::Normalize (without treat_whitespace_as_suffix).
func (m *spModel) normalize(in string) string {
	if m.removeExtraWS {
		for in != "" {
			r, n := m.normalizePrefix(in)
			if r != " " {
				break
			}
			in = in[n:]
		}
	}
	if in == "" {
		return ""
	}
	var sb strings.Builder
	sb.Grow(len(in) * 3 / 2)
	space := " "
	if m.escapeWS {
		space = "\u2581"
	}
	if m.addDummy {
		sb.WriteString(space)
	}
	prevSpace := m.removeExtraWS
	for in != "" {
		r, n := m.normalizePrefix(in)
		if prevSpace {
			r = strings.TrimLeft(r, " ")
		}
		if r != "" {
			for i := 0; i < len(r); i++ {
				if m.escapeWS && r[i] == ' ' {
					sb.WriteString(space)
				} else {
					sb.WriteByte(r[i])
				}
			}
			prevSpace = m.removeExtraWS && r[len(r)-1] == ' '
		}
		in = in[n:]
	}
	out := sb.String()
	if m.removeExtraWS {
		for strings.HasSuffix(out, space) {
			out = out[:len(out)-len(space)]
		}
	}
	return out
}

func (m *spModel) EncodeRaw(text string) ([]int64, []string, error) {
	if err := invalidUTF8(text); err != nil {
		return nil, nil, err
	}
	norm := m.normalize(text)
	var e Encoding
	if m.uni != nil {
		m.uni.encodeWord(norm, &e)
		return e.IDs, e.Tokens, nil
	}
	if !m.wordSplit {
		m.bpeEncode(norm, &e)
		return e.IDs, e.Tokens, nil
	}
	for lo := 0; lo < len(norm); {
		hi := strings.Index(norm[lo+1:], "\u2581")
		if hi < 0 {
			hi = len(norm)
		} else {
			hi += lo + 1
		}
		m.bpeWord(norm[lo:hi], &e)
		lo = hi
	}
	return e.IDs, e.Tokens, nil
}

// bpeWord is bpeEncode through a cache of recent words.
func (m *spModel) bpeWord(w string, e *Encoding) {
	m.mu.Lock()
	ids, ok := m.cache[w]
	m.mu.Unlock()
	if !ok {
		var we Encoding
		m.bpeEncode(w, &we)
		ids = we.IDs
		if len(w) <= cacheWordMax {
			m.mu.Lock()
			if m.cache == nil || len(m.cache) >= bpeCacheMax {
				m.cache = make(map[string][]int64, 1024)
			}
			m.cache[strings.Clone(w)] = ids
			m.mu.Unlock()
		}
	}
	for _, id := range ids {
		e.IDs, e.Tokens = append(e.IDs, id), append(e.Tokens, m.v.tokens[id])
	}
}

// bpeEncode is SentencePiece's bpe::Model::Encode: characters (user-defined symbols whole and
// frozen), then repeatedly the adjacent pair whose concatenation is the highest-scoring piece,
// leftmost on ties; pieces not in the vocabulary become unk, or bytes with byte fallback.
func (m *spModel) bpeEncode(s string, e *Encoding) {
	var syms []spSym
	for i := 0; i < len(s); {
		n := 0
		frozen := false
		for _, u := range m.user {
			if strings.HasPrefix(s[i:], u) {
				n, frozen = len(u), true
				break
			}
		}
		if n == 0 {
			_, n = utf8.DecodeRuneInString(s[i:])
		}
		syms = append(syms, spSym{lo: i, hi: i + n, prev: len(syms) - 1, next: len(syms) + 1, frozen: frozen})
		i += n
	}
	if len(syms) > 0 {
		syms[len(syms)-1].next = -1
	}
	h := &spHeap{}
	push := func(l, r int) {
		if l < 0 || r < 0 || syms[l].frozen || syms[r].frozen {
			return
		}
		if id, ok := m.pieces[s[syms[l].lo:syms[r].hi]]; ok {
			h.push(spPair{score: m.scores[id], left: l, right: r, size: syms[r].hi - syms[l].lo})
		}
	}
	for i := 1; i < len(syms); i++ {
		push(i-1, i)
	}
	for h.len() > 0 {
		top := h.pop()
		l, r := &syms[top.left], &syms[top.right]
		// Skip pairs made stale by an earlier merge.
		if l.hi == l.lo || r.hi == r.lo || r.hi-l.lo != top.size || l.next != top.right {
			continue
		}
		l.hi = r.hi
		r.lo = r.hi // emptied
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = top.left
		}
		push(l.prev, top.left)
		push(top.left, l.next)
	}
	for i := 0; i >= 0 && i < len(syms); i = syms[i].next {
		p := s[syms[i].lo:syms[i].hi]
		id, ok := m.reserved[p]
		if !ok {
			if id, ok = m.pieces[p]; !ok {
				id = m.unkID
			}
		}
		if id == m.unkID && m.byteFallback {
			for j := 0; j < len(p); j++ {
				bid, ok := m.v.ids[fmt.Sprintf("<0x%02X>", p[j])]
				if !ok {
					bid = m.unkID
				}
				e.IDs, e.Tokens = append(e.IDs, bid), append(e.Tokens, m.v.tokens[bid])
			}
			continue
		}
		e.IDs, e.Tokens = append(e.IDs, id), append(e.Tokens, m.v.tokens[id])
	}
}

type spSym struct {
	lo, hi     int
	prev, next int
	frozen     bool
}

type spPair struct {
	score       float64
	left, right int
	size        int
}

// spHeap is a max-heap on score, then the leftmost pair (SentencePiece's agenda order).
type spHeap struct{ a []spPair }

func (h *spHeap) len() int { return len(h.a) }

func (h *spHeap) less(i, j int) bool {
	if h.a[i].score != h.a[j].score {
		return h.a[i].score > h.a[j].score
	}
	return h.a[i].left < h.a[j].left
}

func (h *spHeap) push(p spPair) {
	h.a = append(h.a, p)
	for i := len(h.a) - 1; i > 0; {
		parent := (i - 1) / 2
		if !h.less(i, parent) {
			break
		}
		h.a[i], h.a[parent] = h.a[parent], h.a[i]
		i = parent
	}
}

func (h *spHeap) pop() spPair {
	top := h.a[0]
	last := len(h.a) - 1
	h.a[0] = h.a[last]
	h.a = h.a[:last]
	for i := 0; ; {
		l, r, best := 2*i+1, 2*i+2, i
		if l < len(h.a) && h.less(l, best) {
			best = l
		}
		if r < len(h.a) && h.less(r, best) {
			best = r
		}
		if best == i {
			break
		}
		h.a[i], h.a[best] = h.a[best], h.a[i]
		i = best
	}
	return top
}

// checkCuts returns the ASCII whitespace bytes a text may be cut just before: those the
// normaliser turns into a word boundary (a space, dropped at the ends of a piece and collapsed
// inside one), in no user-defined symbol, when no piece holds an inner word boundary. nil when
// there are none.
//
// A Unigram model has none: SentencePiece runs one Viterbi over the whole text with float path
// scores, so where two segmentations of a word tie, rounding at the magnitude the running score
// has reached decides, and that depends on everything before the word.
func (m *spModel) checkCuts() *[256]bool {
	if m.kind == "Unigram" || !m.escapeWS || !m.addDummy || !m.removeExtraWS || !m.wordSplit {
		return nil
	}
	var at [256]bool
	found := false
	for c := byte(0); c < 0x80; c++ {
		if !isASCIISpace(c) {
			continue
		}
		s := string(c)
		inUser := false
		for _, u := range m.user {
			inUser = inUser || strings.Contains(u, s)
		}
		if inUser || m.normalize("x"+s+"y") != m.normalize("x")+m.normalize(s+"y") ||
			m.normalize("x"+s+s+"y") != m.normalize("x"+s)+m.normalize(s+"y") ||
			m.normalize("x "+s+"y") != m.normalize("x ")+m.normalize(s+"y") {
			continue
		}
		at[c], found = true, true
	}
	if !found {
		return nil
	}
	return &at
}

func (m *spModel) Encode(text string) ([]int64, []string, error) { return m.EncodeRaw(text) }

// Affixes is empty: SentencePiece's encode adds BOS/EOS only when asked.
func (m *spModel) Affixes() (prefix, suffix Encoding) { return Encoding{}, Encoding{} }
func (m *spModel) VocabSize() int                     { return len(m.v.tokens) }
func (m *spModel) Special() Special                   { return m.special }
func (m *spModel) Kind() string                       { return "SentencePiece " + m.kind }

// StreamSafe reports whether the model has safe cut points (see Stream).
func (m *spModel) StreamSafe() bool { return m.cutAt != nil }

func (m *spModel) cuts() cutRule {
	if m.cutAt == nil {
		return cutRule{}
	}
	at := m.cutAt
	return cutRule{at: func(b []byte, i int) bool { return at[b[i]] }}
}
