package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zoo-dev/zoo/cmd/zoo/internal/runout"
)

// zooStdin runs zoo in a fresh process (this test binary, which runs the CLI when
// ZOO_BENCH_TEST_CLI=1) with stdin as its standard input and tmp as its TMPDIR.
func zooStdin(t *testing.T, stdin []byte, tmp string, args ...string) (int, string, string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), "ZOO_BENCH_TEST_CLI=1", "TMPDIR="+tmp)
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, stdout.String(), stderr.String()
}

// TestRunStdin: zoo run -i - reads standard input, on either side of the name, and encodes
// it as it encodes the same bytes in a file; an empty standard input is the error an empty
// file is; the copy it makes is removed.
func TestRunStdin(t *testing.T) {
	data, err := os.ReadFile(text)
	if err != nil {
		t.Fatal(err)
	}
	dir, tmp := t.TempDir(), t.TempDir()
	fromFile := filepath.Join(dir, "file.npy")
	if code, _, errs := zoo(t, "run", "vanilla.tiny", "--input", text, "-o", fromFile); code != 0 {
		t.Fatalf("run --input %s: exit %d: %s", text, code, errs)
	}
	want, _ := os.ReadFile(fromFile)
	for i, args := range [][]string{
		{"run", "vanilla.tiny", "-i", "-", "--json", "-o"},
		{"run", "--input", "-", "--json", "vanilla.tiny", "-o"},
	} {
		out := filepath.Join(dir, string(rune('a'+i))+".npy")
		code, stdout, errs := zooStdin(t, data, tmp, append(args, out)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
		var rep runout.Report
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil || rep.Tokens != 592 || rep.Input != "stdin" {
			t.Errorf("%v: report %+v (%v): want 592 tokens from stdin", args, rep, err)
		}
		if got, _ := os.ReadFile(out); !bytes.Equal(got, want) {
			t.Errorf("%v: the output differs from the same text read from a file", args)
		}
	}

	empty := filepath.Join(dir, "empty.txt")
	os.WriteFile(empty, nil, 0o644)
	code, _, fileErr := zoo(t, "run", "vanilla.tiny", "--input", empty)
	code2, stdout, errs := zooStdin(t, nil, tmp, "run", "vanilla.tiny", "--input", "-")
	if code != 2 || code2 != 2 || stdout != "" || errs != "zoo: input stdin is empty (0 bytes): nothing to encode\n" ||
		strings.Replace(fileErr, empty, "stdin", 1) != errs {
		t.Errorf("empty stdin: exit %d, stderr %q; want exit 2 and the empty file's error (exit %d, %q)", code2, errs, code, fileErr)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("the copies of stdin were left behind: %v", left)
	}
}

// TestTokenizeStdin: zoo tokenize --input - reads standard input, as it reads a file.
func TestTokenizeStdin(t *testing.T) {
	data := []byte("héllo\n")
	path := filepath.Join(t.TempDir(), "t.txt")
	os.WriteFile(path, data, 0o644)
	_, want, _ := zoo(t, "tokenize", "--input", path)
	for _, flag := range []string{"--input", "-i"} {
		code, out, errs := zooStdin(t, data, t.TempDir(), "tokenize", flag, "-")
		if code != 0 || out != want || errs != "zoo: 7 tokens (bytes, vocabulary 257)\n" {
			t.Errorf("tokenize %s -: exit %d, stderr %q, stdout %q; want %q", flag, code, errs, out, want)
		}
	}
}
