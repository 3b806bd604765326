package lmdata

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/zoo/tensorio"
	"github.com/zoo-dev/zoo/zoo/tokenize"
)

func TestReadWindowsAsRun(t *testing.T) {
	text := []byte("abcdefghij") // 10 bytes, window 4: 4, 4, 2
	ws, err := ReadWindows(bytes.NewReader(text), 4)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]int64{{98, 99, 100, 101}, {102, 103, 104, 105}, {106, 107}}
	if !reflect.DeepEqual(ws, want) {
		t.Errorf("windows %v, want %v", ws, want)
	}
	same, _ := Windows(tokenize.Encode(text), 4)
	if !reflect.DeepEqual(same, want) {
		t.Errorf("Windows(ids) %v, want %v", same, want)
	}
	if _, err := ReadWindows(bytes.NewReader(nil), 4); err != tokenize.ErrEmpty {
		t.Errorf("empty input: %v", err)
	}
}

func windowsOf(lengths ...int) [][]int64 {
	var out [][]int64
	id := int64(1)
	for _, l := range lengths {
		w := make([]int64, l)
		for i := range w {
			w[i] = id
			id++
		}
		out = append(out, w)
	}
	return out
}

func TestStepsAreCyclicAndCLMTargets(t *testing.T) {
	ws := windowsOf(4, 4, 2) // ids 1..10
	l, err := NewLoader(ws, ByteOptions(CLM, 2, 0))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		step    int
		windows []int64
	}{{1, []int64{0, 1}}, {2, []int64{2, 0}}, {3, []int64{1, 2}}, {4, []int64{0, 1}}} {
		b, err := l.Step(tc.step)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(b.Offsets, tc.windows) {
			t.Errorf("step %d takes windows %v, want %v", tc.step, b.Offsets, tc.windows)
		}
	}
	b, _ := l.Step(2) // windows 2 (ids 9, 10) and 0 (ids 1..4): N = 4
	wantTok := []int64{9, 10, 0, 0, 1, 2, 3, 4}
	wantTgt := []int64{10, IgnoreIndex, IgnoreIndex, IgnoreIndex, 2, 3, 4, IgnoreIndex}
	wantMask := []bool{false, false, true, true, false, false, false, false}
	if !reflect.DeepEqual(b.Tokens, wantTok) || !reflect.DeepEqual(b.Targets, wantTgt) || !reflect.DeepEqual(b.Mask, wantMask) {
		t.Errorf("step 2: tokens %v targets %v mask %v\nwant %v %v %v", b.Tokens, b.Targets, b.Mask, wantTok, wantTgt, wantMask)
	}
	if b.Counted != 4 || b.TargetBytes != 4 {
		t.Errorf("counted %d, bytes %d; want 4, 4", b.Counted, b.TargetBytes)
	}
	if _, err := l.Step(0); err == nil {
		t.Error("step 0 accepted")
	}
	// Sequential covers the file once, the last batch shorter.
	if s, _ := l.Sequential(2, 2); s.B != 1 || s.Offsets[0] != 2 {
		t.Errorf("Sequential(2, 2): %d rows from %v", s.B, s.Offsets)
	}
	if s, _ := l.Sequential(3, 2); s != nil {
		t.Error("Sequential past the end returned a batch")
	}
}

func TestShuffleIsAPermutationPerPass(t *testing.T) {
	ws := windowsOf(1, 1, 1, 1, 1, 1, 1)
	opt := ByteOptions(CLM, 7, 42)
	opt.Shuffle = true
	l, _ := NewLoader(ws, opt)
	b1, _ := l.Step(1)
	b2, _ := l.Step(2)
	for _, b := range []*Batch{b1, b2} {
		seen := map[int64]bool{}
		for _, w := range b.Offsets {
			seen[w] = true
		}
		if len(seen) != 7 {
			t.Errorf("a pass visits %v, not every window once", b.Offsets)
		}
	}
	if reflect.DeepEqual(b1.Offsets, b2.Offsets) || reflect.DeepEqual(b1.Offsets, []int64{0, 1, 2, 3, 4, 5, 6}) {
		t.Errorf("passes %v and %v: want two different shuffles", b1.Offsets, b2.Offsets)
	}
	l2, _ := NewLoader(ws, opt)
	again, _ := l2.Step(2) // a fresh loader (a resumed run) draws the same
	if !reflect.DeepEqual(again.Offsets, b2.Offsets) {
		t.Errorf("step 2 of a fresh loader %v, want %v", again.Offsets, b2.Offsets)
	}
}

func TestMLMBertMasking(t *testing.T) {
	const L = 200
	ws := [][]int64{}
	for w := 0; w < 50; w++ {
		win := make([]int64, L)
		for i := range win {
			win[i] = 1 + int64((w*L+i)%256)
		}
		ws = append(ws, win)
	}
	l, _ := NewLoader(ws, ByteOptions(MLM, 50, 7))
	b, _ := l.Step(1)
	var masked, random, kept int
	for i, y := range b.Targets {
		orig := ws[i/L][i%L]
		if y == IgnoreIndex {
			if b.Tokens[i] != orig {
				t.Fatalf("position %d changed but is not counted", i)
			}
			continue
		}
		if y != orig {
			t.Fatalf("position %d: target %d, want the original %d", i, y, orig)
		}
		switch tok := b.Tokens[i]; {
		case tok == 0:
			masked++
		case tok == orig:
			kept++
		default:
			if tok < 1 || tok > 256 {
				t.Fatalf("random id %d outside 1..256", tok)
			}
			random++
		}
	}
	if b.Counted != 50*30 || masked+random+kept != b.Counted { // round(0.15·200) = 30 per window
		t.Errorf("counted %d (%d+%d+%d), want 1500", b.Counted, masked, random, kept)
	}
	// 1500 draws: 80 % ± 4σ, 10 % ± 4σ (a random id equals the original 1 time in 256).
	if f := float64(masked) / 1500; math.Abs(f-0.8) > 0.042 {
		t.Errorf("masked share %.3f, want 0.8", f)
	}
	if f := float64(random) / 1500; math.Abs(f-0.1) > 0.032 {
		t.Errorf("random share %.3f, want 0.1", f)
	}
	for _, m := range b.Mask {
		if m {
			t.Fatal("mlm marked a valid position as padding")
		}
	}
	// Deterministic from the seed and the step; another seed masks elsewhere.
	again, _ := NewLoader(ws, ByteOptions(MLM, 50, 7))
	b2, _ := again.Step(1)
	other, _ := NewLoader(ws, ByteOptions(MLM, 50, 8))
	b3, _ := other.Step(1)
	if !reflect.DeepEqual(b.Tokens, b2.Tokens) || reflect.DeepEqual(b.Targets, b3.Targets) {
		t.Error("mlm masks are not a function of the seed")
	}
	// A one-token window still predicts one position.
	one, _ := NewLoader([][]int64{{5}}, ByteOptions(MLM, 1, 0))
	if s, _ := one.Step(1); s.Counted != 1 {
		t.Errorf("one-token window: %d counted, want 1", s.Counted)
	}
}

func TestNewLoaderErrors(t *testing.T) {
	for _, tc := range []struct {
		ws   [][]int64
		opt  Options
		want string
	}{
		{nil, ByteOptions(MLM, 1, 0), "no windows"},
		{[][]int64{{}}, ByteOptions(MLM, 1, 0), "window 0 is empty"},
		{[][]int64{{1}}, ByteOptions("xlm", 1, 0), "want mlm or clm"},
		{[][]int64{{1}}, ByteOptions(CLM, 0, 0), "batch must be at least 1"},
		{[][]int64{{1}}, Options{Objective: MLM, Batch: 1}, "random ids"},
	} {
		if _, err := NewLoader(tc.ws, tc.opt); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err %v, want %q", tc.opt, err, tc.want)
		}
	}
}

// TestScoreMatchesTorch checks the loss, with and without label smoothing and with ignored
// positions, against F.cross_entropy (testdata/gen_loss.py).
func TestScoreMatchesTorch(t *testing.T) {
	data, err := os.ReadFile("testdata/cross_entropy.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	list, _, err := tensorio.ReadSafetensors(data)
	if err != nil {
		t.Fatal(err)
	}
	get := func(name string) []float32 { return tensorio.Lookup(list, name).F32 }
	logits, targets := tensorio.Lookup(list, "logits"), tensorio.Lookup(list, "targets").I64
	vocab := logits.Shape[2]
	for _, eps := range []struct {
		v    float64
		name string
	}{{0, "loss_0.0"}, {0.1, "loss_0.1"}, {0.3, "loss_0.3"}} {
		s := Score{Smoothing: eps.v}
		if err := s.Add(logits.F32, vocab, targets, 9); err != nil {
			t.Fatal(err)
		}
		want := float64(get(eps.name)[0])
		if rel := math.Abs(s.MeanLoss()-want) / want; rel > 1e-6 {
			t.Errorf("ε=%v: loss %.9g, torch %.9g (rel %.2g)", eps.v, s.MeanLoss(), want, rel)
		}
		if nll := float64(get("nll_sum")[0]); math.Abs(s.NLL-nll)/nll > 1e-6 {
			t.Errorf("ε=%v: summed NLL %.9g, torch %.9g", eps.v, s.NLL, nll)
		}
		if s.Tokens != 9 || int64(s.Correct) != tensorio.Lookup(list, "correct").I64[0] {
			t.Errorf("ε=%v: %d tokens, %d correct; torch 9, %d", eps.v, s.Tokens, s.Correct, tensorio.Lookup(list, "correct").I64[0])
		}
		if bpb := s.BitsPerByte(); math.Abs(bpb-s.NLL/9/math.Ln2) > 1e-12 || math.Abs(s.Perplexity()-math.Exp(s.NLL/9)) > 1e-9 {
			t.Errorf("bits per byte %v, perplexity %v", bpb, s.Perplexity())
		}
	}
	var s Score
	if err := s.Add(logits.F32[:10], vocab, targets, 0); err == nil {
		t.Error("mismatched sizes accepted")
	}
	if err := s.Add(make([]float32, 4), 2, []int64{0, 2}, 0); err == nil || !strings.Contains(err.Error(), "outside the vocabulary") {
		t.Errorf("target beyond vocab: %v", err)
	}
}

// TestByteFileAsReadWindows: the windows ByteFile reads on demand from a part of a file are
// the ones ReadWindows cuts from those bytes, and a loader over them draws the same batches
// (shuffled, masked) as one over the windows in memory.
func TestByteFileAsReadWindows(t *testing.T) {
	text := []byte(strings.Repeat("In the beginning God created the heaven and the earth. ", 20))
	for _, tc := range []struct {
		off, size int64
		window    int
	}{{0, int64(len(text)), 24}, {7, 500, 24}, {100, 1, 8}, {3, 64, 64}, {0, int64(len(text)), 1000}} {
		part := text[tc.off : tc.off+tc.size]
		want, err := ReadWindows(bytes.NewReader(part), tc.window)
		if err != nil {
			t.Fatal(err)
		}
		src, err := NewByteFile(bytes.NewReader(text), tc.off, tc.size, tc.window)
		if err != nil {
			t.Fatal(err)
		}
		if src.Len() != len(want) {
			t.Fatalf("%+v: %d windows, ReadWindows %d", tc, src.Len(), len(want))
		}
		for j := range want {
			got, err := src.Window(j)
			if err != nil || fmt.Sprint(got) != fmt.Sprint(want[j]) {
				t.Fatalf("%+v: window %d: %v (%v), want %v", tc, j, got, err, want[j])
			}
		}
		opt := ByteOptions(MLM, 3, 5)
		opt.Shuffle = true
		a, _ := NewLoader(want, opt)
		b, _ := NewLoaderFrom(src, opt)
		for k := 1; k <= 7; k++ {
			x, _ := a.Step(k)
			y, err := b.Step(k)
			if err != nil || fmt.Sprint(x.Tokens, x.Targets, x.Mask) != fmt.Sprint(y.Tokens, y.Targets, y.Mask) {
				t.Fatalf("%+v: step %d differs (%v)", tc, k, err)
			}
		}
	}
	if _, err := NewByteFile(bytes.NewReader(text), 0, 0, 8); !errors.Is(err, tokenize.ErrEmpty) {
		t.Errorf("an empty part: %v", err)
	}
}
