package compare

import (
	"os"
	"path/filepath"
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

func TestWindowAndSplit(t *testing.T) {
	lin := Limit{Variant: "linformer", Param: "max_len", MaxLen: 128}
	for _, c := range []struct {
		flag   int
		limits []Limit
		want   int
		err    string
	}{
		{0, nil, 512, ""},
		{0, []Limit{{}, {MaxLen: 1024}, lin}, 128, ""},
		{64, []Limit{lin}, 64, ""},
		{256, []Limit{{MaxLen: 1024}, lin}, 0, "--window 256 is longer than linformer's max_len 128; give --window 128 or less"},
	} {
		got, err := Window(c.flag, c.limits)
		if got != c.want || (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("Window(%d, %v) = %d, %v; want %d, %q", c.flag, c.limits, got, err, c.want, c.err)
		}
	}
	sparse := Limit{Variant: "sparse", Param: "max_len", MaxLen: 512}
	trained, raised, notes := sparse.Split([]int{128, 512, 2048})
	if !slices.Equal(trained, []int{128, 512}) || !slices.Equal(raised, []int{2048}) || notes != nil {
		t.Errorf("raised: %v %v %q", trained, raised, notes)
	}
	if n := sparse.RaisedNote(raised, 2048); n != "n=2048 timed on a build with max_len=2048 (its own is 512; untrained weights)" {
		t.Errorf("note %q", n)
	}
	sparse.Set = true
	trained, raised, notes = sparse.Split([]int{128, 2048})
	if !slices.Equal(trained, []int{128}) || raised != nil || len(notes) != 1 || notes[0] != "n=2048 skipped: longer than its max_len 512 (given by --set)" {
		t.Errorf("set: %v %v %q", trained, raised, notes)
	}
	if trained, raised, _ := (Limit{}).Split([]int{4096}); len(trained) != 1 || raised != nil {
		t.Errorf("no limit: %v %v", trained, raised)
	}
}

func TestSeeds(t *testing.T) {
	for _, c := range []struct {
		n, steps int
		want     []uint64
	}{{0, 300, []uint64{7, 8, 9}}, {0, 1000, []uint64{7, 8, 9}}, {0, 1001, []uint64{7}}, {2, 5000, []uint64{7, 8}}} {
		if got, err := Seeds(c.n, c.steps, 7); err != nil || !slices.Equal(got, c.want) {
			t.Errorf("Seeds(%d, %d, 7) = %v, %v; want %v", c.n, c.steps, got, err, c.want)
		}
	}
	if _, err := Seeds(-1, 300, 0); err == nil {
		t.Error("Seeds(-1): no error")
	}
}

func TestData(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "c.txt")
	if err := os.WriteFile(in, make([]byte, 1000), 0o644); err != nil {
		t.Fatal(err)
	}
	d, desc, err := Data(in, "", 0.1, false)
	if err != nil || d.Train.Size != 900 || d.Held.Offset != 900 || d.Held.Size != 100 || !strings.Contains(desc, "bytes 900–999; training uses bytes 0–899") {
		t.Errorf("%+v %q %v", d, desc, err)
	}
	if CorpusName(d) != "c.txt" {
		t.Errorf("corpus name %q", CorpusName(d))
	}
	for _, c := range []struct {
		frac float64
		eval string
		set  bool
		err  string
	}{{1, "", true, "--holdout must be between 0 and 1"}, {0.1, in, true, "--holdout splits --input"}, {0.1, filepath.Join(dir, "no"), false, "--eval"}} {
		if _, _, err := Data(in, c.eval, c.frac, c.set); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%+v: %v", c, err)
		}
	}
	if err := os.WriteFile(in, make([]byte, 3), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Data(in, "", 0.1, false); err == nil || !strings.Contains(err.Error(), "too few to hold out") {
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
