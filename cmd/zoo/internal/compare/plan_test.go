package compare

import (
	"slices"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	isONNX := func(s string) bool { return strings.HasSuffix(s, ".onnx") }
	ok := Flags{Input: "in.txt", Seq: "128,512", Reps: 5, Warmup: 1}
	with := func(f func(*Flags)) Flags { g := ok; f(&g); return g }
	for _, c := range []struct {
		names []string
		f     Flags
		err   string
	}{
		{[]string{"vanilla", "linear"}, ok, ""},
		{nil, ok, "want the variants to compare"},
		{[]string{"m.onnx"}, ok, "m.onnx is an ONNX file"},
		{[]string{"vanilla", "vanilla"}, ok, "vanilla is named twice"},
		{[]string{"vanilla"}, with(func(f *Flags) { f.Input = "" }), "--input FILE is required"},
		{[]string{"vanilla"}, with(func(f *Flags) { f.Seq = "a" }), `--seq "a"`},
		{[]string{"vanilla"}, with(func(f *Flags) { f.Reps = 0 }), "(got 0, 1, 0)"},
		{[]string{"vanilla"}, with(func(f *Flags) { f.EvalEvery = -1 }), "--eval-every must not be negative, got -1"},
	} {
		seqs, err := Check(c.names, isONNX, c.f)
		if c.err == "" {
			if err != nil || !slices.Equal(seqs, []int{128, 512}) {
				t.Errorf("%v: %v, %v", c.names, seqs, err)
			}
		} else if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%v %+v: error %v, want %q", c.names, c.f, err, c.err)
		}
	}
}

func TestWindowAndLengths(t *testing.T) {
	for _, c := range []struct {
		flag    int
		maxLens []int
		want    int
	}{{0, nil, 512}, {0, []int{0, 1024, 128}, 128}, {64, []int{32}, 64}} {
		if got := Window(c.flag, c.maxLens); got != c.want {
			t.Errorf("Window(%d, %v) = %d, want %d", c.flag, c.maxLens, got, c.want)
		}
	}
	lengths, notes := Lengths([]int{128, 512, 2048}, 512)
	if !slices.Equal(lengths, []int{128, 512}) || len(notes) != 1 || notes[0] != "n=2048 skipped: longer than its max_len 512" {
		t.Errorf("lengths %v, notes %q", lengths, notes)
	}
	if lengths, notes := Lengths([]int{4096}, 0); len(lengths) != 1 || notes != nil {
		t.Errorf("no limit: %v, %q", lengths, notes)
	}
}

func TestMaxLen(t *testing.T) {
	for _, c := range []struct {
		mine, longest int
		set           bool
		want          int
		raise         string
	}{
		{128, 2048, false, 2048, "max_len=2048"},
		{128, 2048, true, 128, ""},
		{4096, 2048, false, 4096, ""},
	} {
		got, raise, note := MaxLen("max_len", c.mine, c.longest, c.set)
		if got != c.want || raise != c.raise || (raise == "") != (note == "") {
			t.Errorf("MaxLen(%d, %d, %v) = %d, %q, %q", c.mine, c.longest, c.set, got, raise, note)
		}
	}
}

func TestHoldout(t *testing.T) {
	cut, desc, err := Holdout("c.txt", 1000, 0.1)
	if err != nil || cut != 900 || desc != "the last 10 % of --input c.txt (bytes 900–999; training uses bytes 0–899)" {
		t.Errorf("cut %d, %q, %v", cut, desc, err)
	}
	if _, _, err := Holdout("c.txt", 1000, 1); err == nil || !strings.Contains(err.Error(), "--holdout must be between 0 and 1") {
		t.Errorf("frac 1: %v", err)
	}
	if _, _, err := Holdout("c.txt", 3, 0.1); err == nil || !strings.Contains(err.Error(), "too few to hold out") {
		t.Errorf("3 bytes: %v", err)
	}
}

func TestCommandLine(t *testing.T) {
	got := CommandLine([]string{"vanilla", "linear"}, []Flag{
		{Name: "input", Values: []string{"my corpus.txt"}}, {Name: "set", Values: []string{"d_model=64", "layers=2"}}, {Name: "shuffle", Bool: true},
	})
	want := `zoo compare vanilla linear --input "my corpus.txt" --set d_model=64 --set layers=2 --shuffle`
	if got != want {
		t.Errorf("command line\n%s\nwant\n%s", got, want)
	}
}
