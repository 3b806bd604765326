package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/cmd/zoo/internal/runout"
	"github.com/zoo-dev/zoo/internal/memlimit"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/tokenize"
)

// TestMemoryGuard runs verbs whose memory would not fit and checks each is refused before
// any work, with exit 2 and one line that says how much and what to lower. ZOO_MEMORY_LIMIT
// pins the memory available, so the outcome does not depend on the machine.
func TestMemoryGuard(t *testing.T) {
	// 100000 windows of 512 bytes: a sparse file, so nothing is written.
	big := filepath.Join(t.TempDir(), "big.txt")
	if err := os.WriteFile(big, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, 100000*512); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, limit string
		args        []string
		want        []string
	}{
		{"run batch", "8GiB", []string{"run", "vanilla", "--input", big, "--batch", "100000"},
			[]string{"running vanilla at batch 100000 × 512 tokens needs about", "8.0 GiB of memory is available (" + memlimit.Env + "=8GiB)", "lower --batch to"}},
		{"run window", "64MiB", []string{"run", "vanilla.tiny", "--input", big, "--batch", "1", "--window", "4000"},
			[]string{"batch 1 × 4000 tokens", "lower --window to"}},
		{"show wide", "8GiB", []string{"show", "vanilla", "--set", "d_model=1048576"},
			[]string{"vanilla is too big for this machine: its weights need", "lower d_model with --set"}},
		{"show deep", "8GiB", []string{"show", "vanilla", "--set", "layers=100000000"},
			[]string{"its weights need about", "lower layers with --set"}},
		{"bench batch", "1GiB", []string{"bench", "vanilla.tiny", "--batch", "1,100000", "--seq", "128", "--reps", "1"},
			[]string{"running vanilla.tiny at batch 100000 × 128 tokens", "lower --batch to"}},
		{"run arrays", "90KiB", []string{"run", "testdata/floatin/vit.onnx", "--input", "testdata/floatin/vit-pixels.npy"},
			[]string{"running testdata/floatin/vit.onnx on testdata/floatin/vit-pixels.npy needs about", "activations ", "feed smaller inputs"}},
		{"train window", "50MiB", []string{"train", "vanilla.tiny", "--input", text, "--batch", "4", "--window", "2048", "--set", "max_len=2048", "--steps", "1", "-o", filepath.Join(t.TempDir(), "m.safetensors")},
			[]string{"running the training step of vanilla.tiny at batch 4 × 2048 tokens needs about", "lower --batch to"}},
		{"bad limit", "lots", []string{"show", "vanilla.tiny"},
			[]string{memlimit.Env + `="lots": want a size`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(memlimit.Env, c.limit)
			code, out, errs := zoo(t, c.args...)
			if code != 2 || out != "" || strings.Count(errs, "\n") != 1 {
				t.Fatalf("exit %d, stdout %q, stderr %q: want exit 2, no output and one line", code, out, errs)
			}
			for _, w := range c.want {
				if !strings.Contains(errs, w) {
					t.Errorf("stderr %q lacks %q", errs, w)
				}
			}
		})
	}
}

// TestTrainGuardCountsTheCompiledStep checks that the training guard counts the step as the
// CPU backend compiled it: vanilla.tiny at batch 4 × 2048 needs about 100 MiB there (about
// 160 MB resident, measured), where the graph's own count, which keeps every layer's n×n
// attention probabilities for the backward pass, says 1.1 GiB and refused it under 400 MiB.
func TestTrainGuardCountsTheCompiledStep(t *testing.T) {
	t.Setenv(memlimit.Env, "400MiB")
	out := filepath.Join(t.TempDir(), "m.safetensors")
	code, _, errs := zoo(t, "train", "vanilla.tiny", "--input", text, "--batch", "4", "--window", "2048", "--set", "max_len=2048", "--steps", "1", "-o", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
}

// TestMemoryGuardOff checks that ZOO_MEMORY_LIMIT=off lets a job through that a low limit
// refuses.
func TestMemoryGuardOff(t *testing.T) {
	args := []string{"run", "vanilla.tiny", "--input", text, "--window", "592", "--batch", "1"}
	t.Setenv(memlimit.Env, "1MiB")
	if code, _, errs := zoo(t, args...); code != 2 {
		t.Fatalf("under 1MiB: exit %d (%s), want 2", code, errs)
	}
	t.Setenv(memlimit.Env, "off")
	if code, _, errs := zoo(t, args...); code != 0 {
		t.Fatalf("off: exit %d: %s", code, errs)
	}
}

// TestRunOutputLeavesOnlyTheFile checks that the spill files of a streamed output are gone
// after the run, whether it succeeds or fails.
func TestRunOutputLeavesOnlyTheFile(t *testing.T) {
	for _, ext := range []string{".json", ".npy", ".safetensors"} {
		dir := t.TempDir()
		path := filepath.Join(dir, "out"+ext)
		if code, _, errs := zoo(t, "run", "vanilla.tiny", "--input", text, "--output", path, "--window", "64", "--batch", "3"); code != 0 {
			t.Fatalf("%s: exit %d: %s", ext, code, errs)
		}
		entries, _ := os.ReadDir(dir)
		if len(entries) != 1 || entries[0].Name() != "out"+ext {
			t.Fatalf("%s: directory holds %v, want only out%s", ext, entries, ext)
		}
	}
	// A run that stops half-way (an error, Ctrl-C) closes the sink unfinished; on Linux the
	// spill files have no name from the start, so a killed process leaves nothing either.
	for _, ext := range []string{".json", ".npy", ".safetensors"} {
		dir := t.TempDir()
		sink, err := runout.New(filepath.Join(dir, "out"+ext), "hidden")
		if err != nil {
			t.Fatal(err)
		}
		if err := sink.Begin(runout.Meta{}, 2); err != nil {
			t.Fatal(err)
		}
		b := &tokenize.Batch{B: 1, N: 2, Tokens: []int64{5, 6}, Mask: []bool{false, false}, Lengths: []int{2}, Offsets: []int64{0}}
		h, _ := tensor.FromFloat32([]float32{1, 2, 3, 4, 5, 6}, 1, 2, 3)
		if err := sink.Add(b, map[string]*tensor.Tensor{"hidden": h}); err != nil {
			t.Fatal(err)
		}
		sink.Close()
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Fatalf("%s: an unfinished sink left %v", ext, entries)
		}
	}
}
