package main

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	zooroot "github.com/zoo-dev/zoo"
	"github.com/zoo-dev/zoo/zoo/tensorio"
)

// TestLibraryEmbedMatchesRun: the library's embeddings are zoo run --pool mean's and zoo
// embed's, bit for bit (the same windows, feeds, program and pooling), for the byte tokenizer
// and for a real tokenizer.json.
func TestLibraryEmbedMatchesRun(t *testing.T) {
	texts := []string{"The cat sat on the mat.", "A dog slept in the sun, far from the noisy street."}
	for _, tc := range []struct {
		name string
		args []string
		opts zooroot.LoadOptions
	}{
		{"bytes", nil, zooroot.LoadOptions{}},
		{"tokenizer.json", []string{"--tokenizer", minilm}, zooroot.LoadOptions{Tokenizer: minilm}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			m, err := zooroot.Load(context.Background(), "vanilla.tiny", tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			enc, err := m.NewEncoder(zooroot.EncoderOptions{Pool: zooroot.PoolMean, Normalize: true})
			if err != nil {
				t.Fatal(err)
			}
			lib, err := enc.Embed(context.Background(), texts...)
			if err != nil {
				t.Fatal(err)
			}
			lines := filepath.Join(dir, "lines.txt")
			os.WriteFile(lines, []byte(strings.Join(texts, "\n")+"\n"), 0o644)
			embedOut := filepath.Join(dir, "embed.npy")
			if code, _, errs := zoo(t, append([]string{"embed", "vanilla.tiny", "-i", lines, "--normalize", "-o", embedOut}, tc.args...)...); code != 0 {
				t.Fatalf("zoo embed: exit %d: %s", code, errs)
			}
			got := readNPY(t, embedOut)
			for i, text := range texts {
				in := filepath.Join(dir, "one.txt")
				os.WriteFile(in, []byte(text), 0o644)
				out := filepath.Join(dir, "run.npy")
				if code, _, errs := zoo(t, append([]string{"run", "vanilla.tiny", "-i", in, "--pool", "mean", "--normalize", "-o", out}, tc.args...)...); code != 0 {
					t.Fatalf("zoo run: exit %d: %s", code, errs)
				}
				run := readNPY(t, out)
				d := len(lib[i])
				for k := range d {
					if math.Float32bits(run[k]) != math.Float32bits(lib[i][k]) {
						t.Fatalf("text %d: zoo run --pool mean [%d] = %v, library %v", i, k, run[k], lib[i][k])
					}
					if math.Float32bits(got[i*d+k]) != math.Float32bits(lib[i][k]) {
						t.Fatalf("text %d: zoo embed [%d] = %v, library %v", i, k, got[i*d+k], lib[i][k])
					}
				}
			}
		})
	}
}

func readNPY(t *testing.T, path string) []float32 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a, err := tensorio.ReadNPY(f)
	if err != nil {
		t.Fatal(err)
	}
	return a.F32
}

// TestEmbedBadInput: a line longer than the window names the line and the limit; empty
// input and a bad output format are one line each, exit 2.
func TestEmbedBadInput(t *testing.T) {
	dir := t.TempDir()
	lines := filepath.Join(dir, "lines.txt")
	os.WriteFile(lines, []byte("short\n\nthis line is much longer than sixteen bytes\n"), 0o644)
	empty := filepath.Join(dir, "empty.txt")
	os.WriteFile(empty, []byte("\n\n"), 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"embed", "vanilla.tiny", "-i", lines, "--window", "16"}, "line 3 is longer than the window of 16 tokens"},
		{[]string{"embed", "vanilla.tiny", "-i", empty}, "every line is empty"},
		{[]string{"embed", "vanilla.tiny", "-i", lines, "-o", filepath.Join(dir, "x.csv")}, `unknown format ".csv"`},
		{[]string{"embed", "vanilla.tiny", "-i", lines, "--pool", "none"}, "--pool mean or cls"},
	} {
		code, _, errs := zoo(t, tc.args...)
		if code != 2 || !strings.Contains(errs, tc.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", tc.args, code, errs, tc.want)
		}
	}
	if code, out, errs := zoo(t, "embed", "vanilla.tiny", "-i", lines, "--window", "16", "--truncate"); code != 0 || !strings.Contains(out, "2 embeddings of 64") {
		t.Errorf("--truncate: exit %d, %q %q", code, out, errs)
	}
}

// TestOptionFlags: every option name the library's messages carry renders as a flag.
func TestOptionFlags(t *testing.T) {
	for _, name := range zooroot.OptionNames() {
		if got := flagNames("bad " + name + " value"); !strings.Contains(got, "bad --") {
			t.Errorf("%s renders as %q, want a flag", name, got)
		}
	}
}
