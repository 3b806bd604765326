package tokenize

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

// model turns one pre-tokenised word into ids, appending to e.
type model interface {
	encodeWord(w string, e *Encoding)
}

// vocab maps tokens to ids and back.
type vocab struct {
	ids    map[string]int64
	tokens []string // by id; "" for holes
}

func newVocab(n int) *vocab { return &vocab{ids: make(map[string]int64, n)} }

func (v *vocab) add(tok string, id int64) {
	v.ids[tok] = id
	for int64(len(v.tokens)) <= id {
		v.tokens = append(v.tokens, "")
	}
	v.tokens[id] = tok
}

// wordPiece is BERT's greedy longest-match-first WordPiece.
type wordPiece struct {
	v        *vocab
	unk      string
	unkID    int64
	prefix   string
	maxChars int
}

func (m *wordPiece) encodeWord(w string, e *Encoding) {
	if utf8.RuneCountInString(w) > m.maxChars {
		e.IDs, e.Tokens = append(e.IDs, m.unkID), append(e.Tokens, m.unk)
		return
	}
	mark := len(e.IDs)
	var stack [128]byte
	buf := stack[:0]
	for start := 0; start < len(w); {
		buf = buf[:0]
		if start > 0 {
			buf = append(buf, m.prefix...)
		}
		pl := len(buf)
		buf = append(buf, w[start:]...)
		end := len(w)
		found := false
		for end > start {
			if id, ok := m.v.ids[string(buf[:pl+end-start])]; ok {
				e.IDs = append(e.IDs, id)
				e.Tokens = append(e.Tokens, m.v.tokens[id])
				found = true
				break
			}
			_, n := utf8.DecodeLastRuneInString(w[start:end])
			end -= n
		}
		if !found {
			e.IDs, e.Tokens = append(e.IDs[:mark], m.unkID), append(e.Tokens[:mark], m.unk)
			return
		}
		start = end
	}
}

// wordLevel maps each word to its id, or to unk.
type wordLevel struct {
	v     *vocab
	unk   string
	unkID int64
}

func (m *wordLevel) encodeWord(w string, e *Encoding) {
	if id, ok := m.v.ids[w]; ok {
		e.IDs, e.Tokens = append(e.IDs, id), append(e.Tokens, w)
		return
	}
	if m.unkID >= 0 {
		e.IDs, e.Tokens = append(e.IDs, m.unkID), append(e.Tokens, m.unk)
	}
}

// bpe is Hugging Face's BPE model: characters (with the continuing-subword prefix and the
// end-of-word suffix), merged pair by pair in rank order, leftmost first on ties.
type bpe struct {
	v            *vocab
	merges       map[uint64]bpeMerge
	unkID        int64 // -1: none
	prefix       string
	suffix       string
	fuseUnk      bool
	byteFallback bool
	ignoreMerges bool

	mu    sync.Mutex
	cache map[string][]int64
}

type bpeMerge struct {
	rank int
	id   int64
}

const bpeCacheMax = 1 << 16

// cacheWordMax is the longest word the word caches keep (Hugging Face's BPE cache does not
// keep longer ones either); a kept word is copied, so that it does not hold the whole text
// it was cut from.
const cacheWordMax = 256

func (m *bpe) encodeWord(w string, e *Encoding) {
	m.mu.Lock()
	ids, ok := m.cache[w]
	m.mu.Unlock()
	if !ok {
		ids = m.merge(w)
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
		e.IDs = append(e.IDs, id)
		e.Tokens = append(e.Tokens, m.v.tokens[id])
	}
}

func (m *bpe) merge(w string) []int64 {
	if m.ignoreMerges {
		if id, ok := m.v.ids[w]; ok {
			return []int64{id}
		}
	}
	var syms []int64
	unk, unkOpen := int64(-1), false
	flushUnk := func() {
		if unkOpen {
			syms = append(syms, unk)
			unkOpen = false
		}
	}
	for i := 0; i < len(w); {
		_, n := utf8.DecodeRuneInString(w[i:])
		s := w[i : i+n]
		if i > 0 && m.prefix != "" {
			s = m.prefix + s
		}
		if i+n == len(w) && m.suffix != "" {
			s += m.suffix
		}
		i += n
		if id, ok := m.v.ids[s]; ok {
			flushUnk()
			syms = append(syms, id)
			continue
		}
		if m.byteFallback {
			bs := make([]int64, 0, len(s))
			for j := 0; j < len(s); j++ {
				id, ok := m.v.ids[fmt.Sprintf("<0x%02X>", s[j])]
				if !ok {
					bs = nil
					break
				}
				bs = append(bs, id)
			}
			if bs != nil {
				syms = append(syms, bs...)
				continue
			}
		}
		if m.unkID >= 0 {
			if unkOpen && !m.fuseUnk {
				flushUnk()
			}
			unk, unkOpen = m.unkID, true
		}
	}
	flushUnk()
	return m.mergeAll(syms)
}

// mergeAll repeatedly merges the lowest-ranked adjacent pair of syms, leftmost first, as
// Hugging Face's Word::merge_all does: the candidate pairs in a heap by (rank, position),
// symbols in a linked list, a popped pair used only if it still stands. O(n log n) in the
// word's length, so that a long word (a line of letters without a space) costs no more than
// its sort.
func (m *bpe) mergeAll(syms []int64) []int64 {
	if len(syms) < 2 {
		return syms
	}
	type sym struct {
		id         int64
		prev, next int32 // -1: none
		gone       bool
	}
	list := make([]sym, len(syms))
	for i, id := range syms {
		list[i] = sym{id: id, prev: int32(i - 1), next: int32(i + 1)}
	}
	list[len(list)-1].next = -1
	var h bpeHeap
	push := func(pos int32) {
		if nx := list[pos].next; nx >= 0 {
			if mg, ok := m.merges[pairKey(list[pos].id, list[nx].id)]; ok {
				h.push(bpeCand{rank: mg.rank, pos: pos, id: mg.id})
			}
		}
	}
	for i := range list {
		push(int32(i))
	}
	for len(h) > 0 {
		top := h.pop()
		l := &list[top.pos]
		if l.gone || l.next < 0 {
			continue
		}
		r := &list[l.next]
		if mg, ok := m.merges[pairKey(l.id, r.id)]; !ok || mg.id != top.id {
			continue // stale: one of the two was merged since
		}
		l.id, l.next = top.id, r.next
		r.gone = true
		if r.next >= 0 {
			list[r.next].prev = top.pos
		}
		if l.prev >= 0 {
			push(l.prev)
		}
		push(top.pos)
	}
	out := syms[:0]
	for i := int32(0); i >= 0; i = list[i].next {
		out = append(out, list[i].id)
	}
	return out
}

// bpeCand is a pair that may merge: its rank, the position of its left symbol and the id it
// merges into.
type bpeCand struct {
	rank int
	pos  int32
	id   int64
}

// bpeHeap is a min-heap of candidates by rank, then position.
type bpeHeap []bpeCand

func (h bpeHeap) less(i, j int) bool {
	if h[i].rank != h[j].rank {
		return h[i].rank < h[j].rank
	}
	return h[i].pos < h[j].pos
}

func (h *bpeHeap) push(c bpeCand) {
	*h = append(*h, c)
	a := *h
	for i := len(a) - 1; i > 0; {
		p := (i - 1) / 2
		if !a.less(i, p) {
			break
		}
		a[i], a[p] = a[p], a[i]
		i = p
	}
}

func (h *bpeHeap) pop() bpeCand {
	a := *h
	top := a[0]
	last := len(a) - 1
	a[0] = a[last]
	a = a[:last]
	for i := 0; ; {
		l, r, best := 2*i+1, 2*i+2, i
		if l < len(a) && a.less(l, best) {
			best = l
		}
		if r < len(a) && a.less(r, best) {
			best = r
		}
		if best == i {
			break
		}
		a[i], a[best] = a[best], a[i]
		i = best
	}
	*h = a
	return top
}

func pairKey(a, b int64) uint64 { return uint64(a)<<32 | uint64(uint32(b)) }

// unigram is a Unigram model decoded by Viterbi, as Hugging Face's and SentencePiece's
// "optimized" encoders do: at each character boundary, every vocabulary piece starting there
// extends the best path; a character no piece covers becomes unk with the lowest score minus 10.
type unigram struct {
	v        *vocab
	scores   []float64 // by id
	trie     byteTrie
	unkID    int64
	unkScore float64
	// userScore, when set, scores user-defined pieces (SentencePiece's bonus); user marks them.
	user      []bool
	maxScore  float64
	fuseUnk   bool // Hugging Face merges consecutive unknown characters into one unk
	byteFback bool
	f32       bool // SentencePiece keeps path scores as float32 (see bestPathViterbi)

	mu    sync.Mutex
	cache map[string]Encoding
	// scratch is the lattice of the last text up to scratchMax bytes, kept for the next:
	// SentencePiece runs Viterbi on whole stream chunks, and a fresh lattice per chunk made a
	// 16 MB text allocate 2.6 GB, which a loaded machine's collector let pile up to 123 MiB
	// resident. A caller that finds it in use (another goroutine) allocates its own.
	scratchMu sync.Mutex
	scratch   uniScratch
	// hfUnkText: Hugging Face reports an unknown piece by its text; SentencePiece by the unk piece.
	hfUnkText bool
}

func newUnigram(v *vocab, scores []float64, unkID int64) *unigram {
	return &unigram{v: v, scores: scores, unkID: unkID, trie: newByteTrie()}
}

// addPiece puts a piece into the lattice's dictionary.
func (u *unigram) addPiece(p string, id int64) {
	if p == "" {
		return
	}
	u.trie.insert(p, id)
}

// byteTrie is a trie over bytes: edges in one map keyed by (node, byte), piece ids per node.
type byteTrie struct {
	edges map[uint64]int32
	root  [256]int32 // the root's children (0: none), the hottest lookups
	ids   []int64    // by node; -1 where no piece ends
}

func newByteTrie() byteTrie { return byteTrie{edges: map[uint64]int32{}, ids: []int64{-1}} }

// child returns the node under node by byte b, or false.
func (t *byteTrie) child(node int32, b byte) (int32, bool) {
	if node == 0 {
		c := t.root[b]
		return c, c != 0
	}
	c, ok := t.edges[uint64(node)<<8|uint64(b)]
	return c, ok
}

func (t *byteTrie) insert(p string, id int64) {
	node := int32(0)
	for i := 0; i < len(p); i++ {
		next, ok := t.child(node, p[i])
		if !ok {
			next = int32(len(t.ids))
			t.ids = append(t.ids, -1)
			if node == 0 {
				t.root[p[i]] = next
			} else {
				t.edges[uint64(node)<<8|uint64(p[i])] = next
			}
		}
		node = next
	}
	t.ids[node] = id
}

func (u *unigram) finish(minScore float64) { u.unkScore = minScore - 10 }

// uniNode is the best path ending at a position: its score, where its last piece starts
// (-1: no path yet) and that piece's id.
type uniNode struct {
	score float64
	start int32
	id    int32
}

// uniPiece is a piece of a Viterbi path: w[lo:hi] with its id.
type uniPiece struct {
	lo, hi int
	id     int64
}

func (u *unigram) encodeWord(w string, e *Encoding) {
	if w == "" {
		return
	}
	if !u.f32 {
		// Hugging Face encodes word by word: cache words (SentencePiece gets one whole text).
		u.mu.Lock()
		c, ok := u.cache[w]
		u.mu.Unlock()
		if ok {
			e.IDs, e.Tokens = append(e.IDs, c.IDs...), append(e.Tokens, c.Tokens...)
			return
		}
		var we Encoding
		u.encodeUncached(w, &we)
		if len(w) <= cacheWordMax {
			u.mu.Lock()
			if u.cache == nil || len(u.cache) >= bpeCacheMax {
				u.cache = make(map[string]Encoding, 1024)
			}
			u.cache[strings.Clone(w)] = we
			u.mu.Unlock()
		}
		e.IDs, e.Tokens = append(e.IDs, we.IDs...), append(e.Tokens, we.Tokens...)
		return
	}
	u.encodeUncached(w, e)
}

func (u *unigram) encodeUncached(w string, e *Encoding) {
	sc := new(uniScratch)
	if len(w) <= scratchMax && u.scratchMu.TryLock() {
		defer u.scratchMu.Unlock()
		sc = &u.scratch
	}
	rev := u.bestPathViterbi(w, sc)
	e.IDs, e.Tokens = slices.Grow(e.IDs, len(rev)), slices.Grow(e.Tokens, len(rev))
	for i := len(rev) - 1; i >= 0; i-- {
		p := rev[i]
		if p.id == u.unkID && u.fuseUnk {
			for i > 0 && rev[i-1].id == u.unkID {
				i--
				p.hi = rev[i].hi
			}
		}
		if p.id == u.unkID && u.byteFback {
			txt := w[p.lo:p.hi]
			bs := make([]int64, 0, len(txt))
			for j := 0; j < len(txt); j++ {
				id, ok := u.v.ids[fmt.Sprintf("<0x%02X>", txt[j])]
				if !ok {
					bs = nil
					break
				}
				bs = append(bs, id)
			}
			if bs != nil {
				for _, id := range bs {
					e.IDs, e.Tokens = append(e.IDs, id), append(e.Tokens, u.v.tokens[id])
				}
				continue
			}
		}
		tok := u.v.tokens[p.id]
		if p.id == u.unkID && u.hfUnkText {
			tok = w[p.lo:p.hi]
		}
		e.IDs, e.Tokens = append(e.IDs, p.id), append(e.Tokens, tok)
	}
}

// bestPathViterbi is the "optimized" Viterbi of Hugging Face and SentencePiece: the best path
// ending at each byte position, the first candidate winning ties; in f64 for Hugging Face, with
// SentencePiece's float rounding when f32 is set (near ties depend on it). It returns the path
// from its end to its start, in sc's storage (valid until sc is used again).
func (u *unigram) bestPathViterbi(w string, sc *uniScratch) []uniPiece {
	if cap(sc.best) < len(w)+1 {
		sc.best = make([]uniNode, len(w)+1)
	}
	best := sc.best[:len(w)+1]
	best[0] = uniNode{}
	for i := 1; i < len(best); i++ {
		best[i] = uniNode{start: -1}
	}
	for start := 0; start < len(w); {
		_, mblen := utf8.DecodeRuneInString(w[start:])
		here := best[start].score
		single := false
		node := int32(0)
		for end := start + 1; end <= len(w); end++ {
			next, ok := u.trie.child(node, w[end-1])
			if !ok {
				break
			}
			node = next
			if id := u.trie.ids[node]; id >= 0 {
				sc := u.scores[id]
				if u.user != nil && u.user[id] {
					sc = float64(float32(end-start)*float32(u.maxScore)) - 0.1
				}
				// SentencePiece: a double sum (the user-symbol bonus makes the score a
				// double), compared in double, stored as a float.
				cand := here + sc
				if t := &best[end]; t.start < 0 || cand > t.score {
					if u.f32 {
						cand = float64(float32(cand))
					}
					*t = uniNode{score: cand, start: int32(start), id: int32(id)}
				}
				if end-start == mblen {
					single = true
				}
			}
		}
		if !single {
			cand := here + u.unkScore
			if u.f32 {
				// SentencePiece: float + float, rounded before the comparison.
				cand = float64(float32(here) + float32(u.unkScore))
			}
			if t := &best[start+mblen]; t.start < 0 || cand > t.score {
				*t = uniNode{score: cand, start: int32(start), id: int32(u.unkID)}
			}
		}
		start += mblen
	}
	rev := sc.rev[:0]
	for end := len(w); end > 0; {
		n := best[end]
		rev = append(rev, uniPiece{int(n.start), end, int64(n.id)})
		end = int(n.start)
	}
	sc.rev = rev
	return rev
}

// uniScratch holds a Viterbi lattice and path for reuse.
type uniScratch struct {
	best []uniNode
	rev  []uniPiece
}

// scratchMax bounds the text whose lattice a unigram model keeps (16 bytes a byte, so at most
// 8 MiB): the longest run the streamer hands over once normalization has written each space
// as "▁" (three bytes), so one huge text never stays resident.
const scratchMax = 2 * StreamMaxRun
