package tokenize

import (
	"encoding/binary"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/rivo/uniseg"
)

// charsmap is SentencePiece's precompiled normalisation map: a darts-clone double-array trie
// over UTF-8 byte strings whose values are offsets of NUL-terminated replacements in a string
// pool. The same blob is the "precompiled_charsmap" of a tokenizer.json Precompiled normalizer.
type charsmap struct {
	units []uint32
	pool  []byte
}

// parseCharsmap decodes the blob: a little-endian uint32 trie size in bytes, the trie, then
// the pool. An empty blob gives nil (no normalisation); a malformed one an error.
func parseCharsmap(blob []byte) (*charsmap, error) {
	if len(blob) == 0 {
		return nil, nil
	}
	if len(blob) < 4 {
		return nil, fmt.Errorf("precompiled charsmap of %d bytes is truncated", len(blob))
	}
	n := binary.LittleEndian.Uint32(blob)
	if n%4 != 0 || uint64(n) > uint64(len(blob)-4) || n == 0 {
		return nil, fmt.Errorf("precompiled charsmap: trie size %d does not fit the %d-byte blob", n, len(blob))
	}
	units := make([]uint32, n/4)
	for i := range units {
		units[i] = binary.LittleEndian.Uint32(blob[4+4*i:])
	}
	pool := blob[4+n:]
	cm := &charsmap{units: units, pool: pool}
	return cm, nil
}

// prefixes calls fn(length, value) for every key of the trie that is a prefix of key, shortest
// first, and stops early when fn returns false. Out-of-range nodes (a corrupted trie) end the
// search; so does a NUL byte when stopAtNUL is set (Hugging Face's search treats NUL as the end
// of the key, SentencePiece's, given a length, does not).
func (c *charsmap) prefixes(key string, stopAtNUL bool, fn func(length int, value uint32) bool) {
	u := c.units
	if len(u) == 0 {
		return
	}
	pos := uint32(0)
	pos ^= dartsOffset(u[0])
	for i := 0; i < len(key); i++ {
		if stopAtNUL && key[i] == 0 {
			return
		}
		b := uint32(key[i])
		pos ^= b
		if pos >= uint32(len(u)) {
			return
		}
		unit := u[pos]
		if unit&((1<<31)|0xFF) != b { // label
			return
		}
		pos ^= dartsOffset(unit)
		if (unit>>8)&1 == 1 { // has leaf
			if pos >= uint32(len(u)) {
				return
			}
			if !fn(i+1, u[pos]&((1<<31)-1)) {
				return
			}
		}
	}
}

func dartsOffset(unit uint32) uint32 { return (unit >> 10) << ((unit & (1 << 9)) >> 6) }

// replacement returns the NUL-terminated pool string at off ("" and false when off is outside
// the pool).
func (c *charsmap) replacement(off uint32) (string, bool) {
	if uint64(off) >= uint64(len(c.pool)) {
		return "", false
	}
	p := c.pool[off:]
	for i, b := range p {
		if b == 0 {
			return string(p[:i]), true
		}
	}
	return string(p), true
}

// longest is SentencePiece's NormalizePrefix lookup: the longest rule matching the start of s,
// as (replacement, consumed bytes); consumed is 0 when no rule matches.
func (c *charsmap) longest(s string) (string, int) {
	var best int
	var val uint32
	c.prefixes(s, false, func(l int, v uint32) bool {
		if l > best {
			best, val = l, v
		}
		return true
	})
	if best == 0 {
		return "", 0
	}
	r, ok := c.replacement(val)
	if !ok {
		return "", 0
	}
	return r, best
}

// first is Hugging Face's Precompiled::transform: the first (shortest) rule that is a prefix
// of chunk, whatever its length.
func (c *charsmap) first(chunk string) (string, bool) {
	var out string
	var found bool
	c.prefixes(chunk, true, func(_ int, v uint32) bool {
		out, found = c.replacement(v)
		return false
	})
	return out, found
}

// hfPrecompiled is the tokenizer.json Precompiled normalizer, as Hugging Face applies it: per
// extended grapheme cluster, the whole cluster if it is shorter than 6 bytes and a rule
// matches, else each character alone.
type hfPrecompiled struct{ cm *charsmap }

func (p *hfPrecompiled) normalize(s string) string {
	var sb strings.Builder
	sb.Grow(len(s))
	g := uniseg.NewGraphemes(s)
	for g.Next() {
		gr := g.Str()
		if len(gr) < 6 {
			if r, ok := p.cm.first(gr); ok {
				sb.WriteString(r)
				continue
			}
		}
		for i := 0; i < len(gr); {
			_, n := utf8.DecodeRuneInString(gr[i:])
			ch := gr[i : i+n]
			if r, ok := p.cm.first(ch); ok {
				sb.WriteString(r)
			} else {
				sb.WriteString(ch)
			}
			i += n
		}
	}
	return sb.String()
}
