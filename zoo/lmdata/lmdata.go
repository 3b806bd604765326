// Package lmdata turns text into language-model batches with targets, for `zoo train` and
// `zoo eval`, and scores a model's logits against them (cross-entropy, accuracy, bits per byte).
//
// The contract (scripts and the parity checks rely on it):
//   - Windows are cut as `zoo run` cuts them: in file order, Window tokens each, no overlap,
//     the last one shorter (ReadWindows, through tokenize.Windower; ByteFile reads the same
//     windows from a file on demand, so that a corpus of any size trains in bounded memory).
//   - Step k (1-based) of a Loader uses the draws j = (k−1)·B … k·B−1, and draw j is window
//     j mod W (W windows), taken cyclically over the file. With Shuffle, pass e = j div W
//     visits the windows in a permutation drawn from the seed for that pass (Fisher–Yates,
//     zoo/initrand), so every window is seen once per pass.
//   - clm: position t's target is token t+1 of the same window; the last position of a
//     window and padding have no target and are not counted. The inputs are unchanged (the
//     variant's causal hyperparameter keeps a position from seeing its target).
//   - mlm, BERT's way: of a window's L valid positions, max(1, round(0.15·L)) are chosen
//     (without replacement); each chosen position becomes the mask id with probability 0.8,
//     a random id (uniform over [RandomLo, RandomHi)) with probability 0.1, or stays, and is
//     counted with its original token as target. The draws for draw j come from the stream
//     initrand.New(Seed, "mlm/j"), so a step's masks depend on the seed and j alone (a resumed
//     run masks as an uninterrupted one). The byte tokenizer's mask id is 0, the pad id:
//     padding is excluded by the key-padding mask, not by the id, so a masked position stays
//     visible to attention and the vocabulary stays 257.
//
// Positions not counted have target IgnoreIndex. Batch.Targets has the tokens' (B, N) layout.
package lmdata

import (
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/zoo-dev/zoo/zoo/initrand"
	"github.com/zoo-dev/zoo/zoo/tokenize"
)

// Objective is the training objective: MLM or CLM.
type Objective string

// The objectives.
const (
	// MLM is masked language modelling (BERT), the default for encoders.
	MLM Objective = "mlm"
	// CLM is causal (next-token) language modelling; it needs the variant's causal on.
	CLM Objective = "clm"
)

// ParseObjective returns the objective named s ("mlm" or "clm"), or an error naming s.
func ParseObjective(s string) (Objective, error) {
	switch Objective(s) {
	case MLM, CLM:
		return Objective(s), nil
	}
	return "", fmt.Errorf("objective %q: want mlm or clm", s)
}

// IgnoreIndex is the target of a position that is not counted (PyTorch's ignore_index
// convention for a value that no class has).
const IgnoreIndex = -100

// MaskFraction is the share of valid positions mlm predicts; MaskReplace and MaskRandom are
// the shares of those that become the mask id and a random id (the rest stay unchanged).
const (
	MaskFraction = 0.15
	MaskReplace  = 0.8
	MaskRandom   = 0.1
)

// ReadWindows cuts r's bytes, tokenized by zoo's byte tokenizer, into windows of window
// tokens, as `zoo run` does. It returns tokenize.ErrEmpty for an empty input and a read error
// wrapped.
func ReadWindows(r io.Reader, window int) ([][]int64, error) {
	wd, err := tokenize.NewWindower(r, window, 1)
	if err != nil {
		return nil, err
	}
	var out [][]int64
	for {
		b, err := wd.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, append([]int64(nil), b.Row(0)...))
	}
}

// Windows cuts ids into windows of window tokens in order, no overlap, the last one shorter;
// it returns an error when window is below 1 or ids is empty.
func Windows(ids []int64, window int) ([][]int64, error) {
	if window < 1 {
		return nil, fmt.Errorf("lmdata: window must be at least 1, got %d", window)
	}
	if len(ids) == 0 {
		return nil, tokenize.ErrEmpty
	}
	var out [][]int64
	for lo := 0; lo < len(ids); lo += window {
		out = append(out, ids[lo:min(lo+window, len(ids))])
	}
	return out, nil
}

// Options configure a Loader.
type Options struct {
	Objective Objective
	// Batch is the number of windows per step (B), at least 1.
	Batch int
	// Shuffle visits the windows of each pass in a seeded permutation instead of file order.
	Shuffle bool
	// Seed drives the shuffle and mlm's masks.
	Seed uint64
	// MaskID replaces mlm's chosen positions (0, the pad id, for the byte tokenizer).
	MaskID int64
	// RandomLo and RandomHi bound the ids mlm's random replacement draws, [RandomLo, RandomHi):
	// 1 and 257 for the byte tokenizer (the 256 byte ids).
	RandomLo, RandomHi int64
	// TokenBytes, when set, gives the bytes of text a target id stands for (bits per byte);
	// nil counts one byte per target, as the byte tokenizer's ids are.
	TokenBytes func(id int64) int
}

// ByteOptions returns Options for zoo's byte tokenizer: mask id 0, random ids 1 … 256.
func ByteOptions(obj Objective, batch int, seed uint64) Options {
	return Options{Objective: obj, Batch: batch, Seed: seed, MaskID: tokenize.PadID, RandomLo: 1, RandomHi: 257}
}

// Source is the windows a Loader draws from: Len of them, none empty, window j's token ids
// read by Window (which may read a file; the Loader does not keep what it returns).
type Source interface {
	Len() int
	Window(j int) ([]int64, error)
}

// sliceSource is windows held in memory.
type sliceSource [][]int64

func (s sliceSource) Len() int                      { return len(s) }
func (s sliceSource) Window(j int) ([]int64, error) { return s[j], nil }

// ByteFile is the windows of zoo's byte tokenizer (id = byte + 1) over a part of a file,
// window bytes each in order and the last one shorter — the windows
// ReadWindows cuts from those bytes — read from R when a batch needs them, so that a text
// of any size is held by the operating system's page cache, not the process.
type ByteFile struct {
	r            io.ReaderAt
	offset, size int64
	window       int
}

// NewByteFile returns the byte tokenizer's windows of window tokens over bytes [offset,
// offset+size) of r; tokenize.ErrEmpty when size is 0.
func NewByteFile(r io.ReaderAt, offset, size int64, window int) (*ByteFile, error) {
	if window < 1 {
		return nil, fmt.Errorf("lmdata: window must be at least 1, got %d", window)
	}
	if size <= 0 {
		return nil, tokenize.ErrEmpty
	}
	return &ByteFile{r: r, offset: offset, size: size, window: window}, nil
}

// Len is the number of windows.
func (f *ByteFile) Len() int { return int((f.size + int64(f.window) - 1) / int64(f.window)) }

// Window reads window j's ids.
func (f *ByteFile) Window(j int) ([]int64, error) {
	lo := int64(j) * int64(f.window)
	n := min(int64(f.window), f.size-lo)
	buf := make([]byte, n)
	if _, err := f.r.ReadAt(buf, f.offset+lo); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF // the file is shorter than it was when the run began
		}
		return nil, fmt.Errorf("read window %d (bytes %d–%d): %w", j, f.offset+lo, f.offset+lo+n-1, err)
	}
	ids := make([]int64, n)
	for i, c := range buf {
		ids[i] = int64(c) + 1
	}
	return ids, nil
}

// Loader draws the batches of a training run or an evaluation from a list of windows.
type Loader struct {
	src   Source
	opt   Options
	perms map[int][]int32 // pass → permutation (Shuffle only), built on demand
}

// NewLoader returns a Loader over windows (at least one, none empty) with opt; bad options are
// an error naming them.
func NewLoader(windows [][]int64, opt Options) (*Loader, error) {
	if len(windows) == 0 {
		return nil, fmt.Errorf("lmdata: no windows")
	}
	for i, w := range windows {
		if len(w) == 0 {
			return nil, fmt.Errorf("lmdata: window %d is empty", i)
		}
	}
	return NewLoaderFrom(sliceSource(windows), opt)
}

// NewLoaderFrom returns a Loader over the windows of src (at least one) with opt; bad
// options are an error naming them.
func NewLoaderFrom(src Source, opt Options) (*Loader, error) {
	if src.Len() == 0 {
		return nil, fmt.Errorf("lmdata: no windows")
	}
	if opt.Objective != MLM && opt.Objective != CLM {
		return nil, fmt.Errorf("lmdata: objective %q: want mlm or clm", opt.Objective)
	}
	if opt.Batch < 1 {
		return nil, fmt.Errorf("lmdata: batch must be at least 1, got %d", opt.Batch)
	}
	if opt.Objective == MLM && opt.RandomHi <= opt.RandomLo {
		return nil, fmt.Errorf("lmdata: mlm's random ids [%d, %d) are empty", opt.RandomLo, opt.RandomHi)
	}
	return &Loader{src: src, opt: opt, perms: map[int][]int32{}}, nil
}

// Windows returns the number of windows W.
func (l *Loader) Windows() int { return l.src.Len() }

// Batch is one step's inputs and targets.
type Batch struct {
	// Batch holds the model's inputs (after mlm's masking), right-padded with the pad id,
	// with the key-padding mask, Lengths and, as Offsets, each row's window index.
	tokenize.Batch
	// Targets has Tokens's (B, N) layout: the target id of a counted position, IgnoreIndex
	// elsewhere.
	Targets []int64
	// Counted is the number of counted positions and TargetBytes the bytes of text their
	// targets stand for.
	Counted, TargetBytes int
}

// Step returns step k's batch (k ≥ 1): draws (k−1)·B … k·B−1, cyclic over the windows.
func (l *Loader) Step(k int) (*Batch, error) {
	if k < 1 {
		return nil, fmt.Errorf("lmdata: step %d: steps count from 1", k)
	}
	first := int64(k-1) * int64(l.opt.Batch)
	draws := make([]int64, l.opt.Batch)
	for i := range draws {
		draws[i] = first + int64(i)
	}
	return l.build(draws)
}

// Sequential returns the batch of draws first … first+count−1 without wrapping past the last
// window (count is cut to the windows left): an evaluation covers the file once with
// Sequential(0, B), Sequential(B, B), … until first reaches Windows(). It returns nil when
// first is out of range or count is below 1, and an error when a window cannot be read.
func (l *Loader) Sequential(first, count int) (*Batch, error) {
	if first < 0 || first >= l.src.Len() || count < 1 {
		return nil, nil
	}
	count = min(count, l.src.Len()-first)
	draws := make([]int64, count)
	for i := range draws {
		draws[i] = int64(first + i)
	}
	return l.build(draws)
}

// window returns the index of the window that draw j takes.
func (l *Loader) window(j int64) int {
	w := int64(l.src.Len())
	pos := int(j % w)
	if !l.opt.Shuffle {
		return pos
	}
	pass := int(j / w)
	p, ok := l.perms[pass]
	if !ok {
		p = make([]int32, w)
		for i := range p {
			p[i] = int32(i)
		}
		r := initrand.New(l.opt.Seed, fmt.Sprintf("shuffle/%d", pass))
		for i := len(p) - 1; i > 0; i-- {
			k := intn(r, i+1)
			p[i], p[k] = p[k], p[i]
		}
		if len(l.perms) > 1 { // a run moves forward: keep this pass and the last (4 bytes a window each)
			clear(l.perms)
		}
		l.perms[pass] = p
	}
	return int(p[pos])
}

func (l *Loader) build(draws []int64) (*Batch, error) {
	rows := len(draws)
	idx := make([]int, rows)
	wins := make([][]int64, rows)
	n := 0
	for i, j := range draws {
		idx[i] = l.window(j)
		w, err := l.src.Window(idx[i])
		if err != nil {
			return nil, err
		}
		if len(w) == 0 {
			return nil, fmt.Errorf("lmdata: window %d is empty", idx[i])
		}
		wins[i] = w
		n = max(n, len(w))
	}
	b := &Batch{Batch: tokenize.Batch{B: rows, N: n, Tokens: make([]int64, rows*n), Mask: make([]bool, rows*n),
		Lengths: make([]int, rows), Offsets: make([]int64, rows)}, Targets: make([]int64, rows*n)}
	for i := range b.Targets {
		b.Targets[i] = IgnoreIndex
		b.Tokens[i] = tokenize.PadID
		b.Mask[i] = true
	}
	for i, w := range idx {
		win := wins[i]
		row, tgt := b.Tokens[i*n:(i+1)*n], b.Targets[i*n:(i+1)*n]
		copy(row, win)
		for t := range win {
			b.Mask[i*n+t] = false
		}
		b.Lengths[i], b.Offsets[i] = len(win), int64(w)
		switch l.opt.Objective {
		case CLM:
			for t := 0; t+1 < len(win); t++ {
				tgt[t] = win[t+1]
			}
		case MLM:
			l.mask(row[:len(win)], tgt, initrand.New(l.opt.Seed, fmt.Sprintf("mlm/%d", draws[i])))
		}
		for t := range win {
			if tgt[t] != IgnoreIndex {
				b.Counted++
				b.TargetBytes += l.bytesOf(tgt[t])
			}
		}
	}
	return b, nil
}

// mask applies mlm's choice to one window's valid tokens in place and sets the targets.
func (l *Loader) mask(row, tgt []int64, r *initrand.Source) {
	L := len(row)
	pick := max(1, int(math.Round(MaskFraction*float64(L))))
	pos := make([]int, L)
	for i := range pos {
		pos[i] = i
	}
	for i := 0; i < pick; i++ { // a partial Fisher–Yates: the first pick positions
		k := i + intn(r, L-i)
		pos[i], pos[k] = pos[k], pos[i]
	}
	for _, t := range pos[:pick] {
		tgt[t] = row[t]
		switch u := r.Float64(); {
		case u < MaskReplace:
			row[t] = l.opt.MaskID
		case u < MaskReplace+MaskRandom:
			row[t] = l.opt.RandomLo + int64(intn(r, int(l.opt.RandomHi-l.opt.RandomLo)))
		}
	}
}

func (l *Loader) bytesOf(id int64) int {
	if l.opt.TokenBytes == nil {
		return 1
	}
	return l.opt.TokenBytes(id)
}

// intn returns a uniform integer in [0, n) for n ≥ 1 (rejection sampling: no modulo bias).
func intn(r *initrand.Source, n int) int {
	if n <= 1 {
		return 0
	}
	limit := math.MaxUint64 - math.MaxUint64%uint64(n)
	for {
		if v := r.Uint64(); v < limit {
			return int(v % uint64(n))
		}
	}
}
