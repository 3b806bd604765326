package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/cmd/zoo/internal/runout"
	"github.com/zoo-dev/zoo/onnx/ort"
)

// zooProcess runs the CLI as its own process (this test binary, which runs the CLI when
// ZOO_BENCH_TEST_CLI=1) and returns its exit code, stdout and stderr.
func zooProcess(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Skipf("cannot find the test binary: %v", err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), "ZOO_BENCH_TEST_CLI=1")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("zoo %v: %v", args, err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

// TestRealFileDefects runs zoo run, parity, bench and show, each as a real process, on one
// PyTorch export per defect that real files showed (testdata/realfiles, written by
// gen_realfiles.py): a position table sliced to the length (x + pe[:n]), the table indexed
// by Gather(Range(0, n)) that ONNX Runtime's extended optimizer fails to run, a file in
// float16 throughout, and a file with external data. A 229-token text is windowed at the
// table's rows (it failed in Add with a broadcast error), parity runs on each and names
// ONNX Runtime's fallback level, bench feeds Hugging Face inputs and skips lengths past the
// table, and show says where the maximum length comes from.
func TestRealFileDefects(t *testing.T) {
	_, ortErr := ort.Open()
	text := filepath.Join(t.TempDir(), "229.txt")
	if err := os.WriteFile(text, bytes.Repeat([]byte("zoo runs files. "), 15)[:229], 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		file       string
		window     int
		parityArgs []string // float16 rounds each step in ONNX Runtime: two half-float ulps apart
		reference  string   // in parity's report, after "against"
		maxLen     string   // in show's table
	}{
		{"sliced_table.onnx", 16, nil, "onnxruntime 1.", "maximum length 16 (the rows of the position table pe)"},
		{"gather_range.onnx", 16, nil, "at optimization level basic: its default level failed: ", "maximum length 16 (the rows of the position table pe)"},
		{"float16.onnx", 64, []string{"--atol", "0.01", "--rtol", "0.01"}, "onnxruntime 1.", "maximum length 64 (the rows of the position table pos.weight)"},
		{"external_data.onnx", 64, nil, "onnxruntime 1.", "maximum length 64 (the rows of the position table pos.weight)"},
	} {
		t.Run(c.file, func(t *testing.T) {
			path := filepath.Join("testdata", "realfiles", c.file)
			code, out, errs := zooProcess(t, "run", path, "--input", text, "--json")
			var rep runout.Report
			if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || rep.Tokens != 229 || rep.Window != c.window {
				t.Errorf("run: exit %d, %d tokens in windows of %d, want 229 in windows of %d\nstderr: %s", code, rep.Tokens, rep.Window, c.window, errs)
			}
			if errors.Is(ortErr, ort.ErrNotFound) {
				t.Logf("parity skipped: ONNX Runtime not found (%v)", ortErr)
			} else {
				code, out, errs = zooProcess(t, append([]string{"parity", path}, c.parityArgs...)...)
				first, _, _ := strings.Cut(out, "\n")
				if code != 0 || !strings.Contains(first, c.reference) || strings.Contains(errs, "onnxruntime:") {
					t.Errorf("parity: exit %d, first line %q, want %q in it\nstdout:\n%s\nstderr: %s", code, first, c.reference, out, errs)
				}
			}
			code, out, errs = zooProcess(t, "bench", path, "--seq", "8,512", "--batch", "1", "--reps", "1", "--warmup", "0", "--format", "csv", "linformer.tiny")
			if code != 0 || strings.Count(out, c.file+",") != 1 || !strings.Contains(errs, c.file+" batch 1 n=512 skipped: longer than its maximum length") {
				t.Errorf("bench: exit %d, want one row of %s at n 8 and n 512 skipped\nstdout:\n%s\nstderr: %s", code, c.file, out, errs)
			}
			code, out, errs = zooProcess(t, "show", path)
			if code != 0 || !strings.Contains(out, c.maxLen) || !strings.Contains(out, "n/a") || strings.Contains(out, "paper:") {
				t.Errorf("show: exit %d, want %q, the seed formula n/a and no empty paper field\nstdout:\n%s\nstderr: %s", code, c.maxLen, out, errs)
			}
		})
	}
}
