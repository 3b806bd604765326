package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/zoo-dev/zoo/internal/hostile"
	"github.com/zoo-dev/zoo/internal/memlimit"
	"github.com/zoo-dev/zoo/plugin"
	"github.com/zoo-dev/zoo/plugin/plugintest"
)

// zooPeak runs zoo (this test binary as zoo) in dir with args and returns its exit code, its
// stderr and its peak resident memory (VmHWM, written by TestMain). Standard output goes to
// /dev/null: a tokenizer's listing of 64 MB is not what is measured. addressSpace > 0 runs it
// under that address-space limit (ulimit -v). The tests assert bounds on memory, never on
// time: the input is generated here, and the machine may be loaded.
func zooPeak(t *testing.T, dir string, addressSpace int64, env []string, args ...string) (int, string, int64) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	peakFile := filepath.Join(t.TempDir(), "peak")
	cmd := exec.Command(exe, args...)
	if addressSpace > 0 {
		cmd = exec.Command("/bin/sh", append([]string{"-c", fmt.Sprintf(`ulimit -v %d && exec "$0" "$@"`, addressSpace>>10), exe}, args...)...)
	}
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), asZooEnv+"=1", peakFileEnv+"="+peakFile, "XDG_CACHE_HOME="+t.TempDir()), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	data, err := os.ReadFile(peakFile)
	if err != nil {
		t.Fatalf("zoo %s wrote no peak memory (exit %d): %v\n%s", strings.Join(args, " "), cmd.ProcessState.ExitCode(), err, stderr.String())
	}
	peak, err := strconv.ParseInt(string(data), 10, 64)
	if err != nil || peak <= 0 {
		t.Fatalf("zoo %s: peak memory %q (%v)", strings.Join(args, " "), data, err)
	}
	return cmd.ProcessState.ExitCode(), stderr.String(), peak
}

// TestHostileInputsPeakMemory feeds zoo, as a process, the hostile files of issue 35 and
// bounds its peak resident memory by what the job needs, not by what the file claims. Before
// (main at 58212c3): the 2 MB .npz bomb took zoo run to 6.7 GB (and a Go stack dump under
// ulimit -v 8 GiB); zoo tokenize took 696 MB for the 32 MB CRLF text and 11.8 s for the 64 MB
// line; a 180 KB tokenizer.json of nested Sequence normalizers 712 MB; a registry whose alias
// fans out 3,000 × 3,000 took zoo list to 1.3 GB.
func TestHostileInputsPeakMemory(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("VmHWM is read from /proc")
	}
	if testing.Short() {
		t.Skip("tokenizes 96 MB of generated text")
	}
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	bomb, err := hostile.ZeroNPZ(map[string]int{"x": 512 << 20}) // 2 GiB of float32 zeros
	if err != nil {
		t.Fatal(err)
	}
	write("bomb.npz", bomb)
	write("crlf.txt", hostile.Text(32<<20, "\r\n"))
	write("line.txt", hostile.Text(64<<20, ""))
	write("deep.json", hostile.NestedTokenizerJSON("normalizer", 4990))
	write("fan.yaml", hostile.AliasFanout(3000))
	wordpiece, err := filepath.Abs("../../zoo/tokenize/testdata/minilm.tokenizer.json") // BERT WordPiece, 30,522 tokens
	if err != nil {
		t.Fatal(err)
	}
	const mib = 1 << 20
	// What zoo tokenize takes for a small text with the same tokenizer: the big texts may grow
	// past it by 16 MiB, half the smaller input, so that a tokenizer that held the whole input
	// (or its one line) fails the bound.
	write("small.txt", hostile.Text(64<<10, "\r\n"))
	code, stderr, base := zooPeak(t, dir, 0, nil, "tokenize", "--tokenizer", wordpiece, "--input", "small.txt")
	if code != 0 {
		t.Fatalf("zoo tokenize of 64 KB: exit %d, %s", code, stderr)
	}
	t.Logf("zoo tokenize of 64 KB: peak resident memory %d MiB", base/mib)
	tokenized := func(code int, stderr string) error {
		if code != 0 || !strings.Contains(stderr, "tokens (tokenizer.json WordPiece, vocabulary 30522)") {
			return fmt.Errorf("exit %d, stderr %q", code, stderr)
		}
		return nil
	}
	refused := func(code int, stderr string, want ...string) error {
		if code != 2 || strings.Count(strings.TrimSpace(stderr), "\n") > 0 || strings.Contains(stderr, "goroutine ") {
			return fmt.Errorf("exit %d, stderr %q: want exit 2 and one line", code, stderr)
		}
		for _, w := range want {
			if !strings.Contains(stderr, w) {
				return fmt.Errorf("stderr %q lacks %q", stderr, w)
			}
		}
		return nil
	}
	cases := []struct {
		name  string
		as    int64 // ulimit -v, bytes; 0: none
		env   []string
		args  []string
		bound int64
		check func(code int, stderr string) error
	}{
		{"npz bomb, ZOO_MEMORY_LIMIT=1GiB", 0, []string{memlimit.Env + "=1GiB"},
			[]string{"run", "vanilla.tiny", "--input", "bomb.npz"}, 200 * mib,
			func(code int, stderr string) error {
				return refused(code, stderr, `npz: member "x.npy" takes 2.0 GiB in memory, more than the memory budget of 1.0 GiB (ZOO_MEMORY_LIMIT=1GiB)`)
			}},
		{"npz bomb, ulimit -v 3 GiB", 3 << 30, nil,
			[]string{"run", "vanilla.tiny", "--input", "bomb.npz"}, 200 * mib,
			func(code int, stderr string) error {
				want := []string{`npz: member "x.npy" takes 2.0 GiB in memory, more than the memory budget`}
				if mem, err := memlimit.Available(); err == nil && mem.Available > 3<<30 {
					want = append(want, "ulimit -v (RLIMIT_AS) 3.0 GiB") // else a smaller limit is the budget
				}
				return refused(code, stderr, want...)
			}},
		{"32 MB CRLF text, WordPiece", 0, nil,
			[]string{"tokenize", "--tokenizer", wordpiece, "--input", "crlf.txt"}, base + 16*mib, tokenized},
		{"64 MB single line, WordPiece", 0, nil,
			[]string{"tokenize", "--tokenizer", wordpiece, "--input", "line.txt"}, base + 16*mib, tokenized},
		{"tokenizer.json, Sequence normalizers 4,990 deep", 0, nil,
			[]string{"tokenize", "--tokenizer", "deep.json", "--input", "crlf.txt"}, 100 * mib,
			func(code int, stderr string) error {
				return refused(code, stderr, "deep.json: normalizer: Sequence nested more than 16 deep")
			}},
		{"registry, alias fan-out 3,000 × 3,000", 0, nil,
			[]string{"list", "--registry", "fan.yaml"}, 100 * mib,
			func(code int, stderr string) error {
				return refused(code, stderr, "fan.yaml:", "YAML aliases expand the registry (", "*p repeats the anchor &p")
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stderr, peak := zooPeak(t, dir, c.as, c.env, c.args...)
			t.Logf("zoo %s: exit %d, peak resident memory %d MiB (bound %d MiB); %s", strings.Join(c.args, " "), code, peak/mib, c.bound/mib, strings.TrimSpace(stderr))
			if err := c.check(code, stderr); err != nil {
				t.Error(err)
			}
			if peak > c.bound {
				t.Errorf("peak resident memory %d MiB, more than %d MiB", peak/mib, c.bound/mib)
			}
		})
	}
}

// TestSetsidGrandchildCLI: a plugin's descendant in a session of its own (setsid: a
// process-group kill cannot reach it; before issue 35 it lived on, re-parented to PID 1) is
// gone after every way zoo stops: a run that succeeds, a Build timeout, SIGINT and SIGTERM
// to zoo during Build, and a plugin that exits during Build.
func TestSetsidGrandchildCLI(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("containment is Linux's (PR_SET_CHILD_SUBREAPER)")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		mode   string
		env    []string
		signal syscall.Signal // sent once Build has begun; 0: none
		code   int
		stderr string
	}{
		{"normal exit", plugintest.ModeSetsidDaemon, nil, 0, 0, ""},
		{"build timeout", plugintest.ModeSetsidBuild, []string{plugin.BuildTimeoutEnv + "=2s"}, 0, 1, "2s"},
		{"SIGINT", plugintest.ModeSetsidBuild, []string{plugin.BuildTimeoutEnv + "=1h"}, syscall.SIGINT, 130, "zoo: interrupted"},
		{"SIGTERM", plugintest.ModeSetsidBuild, []string{plugin.BuildTimeoutEnv + "=1h"}, syscall.SIGTERM, 143, "zoo: terminated"},
		{"plugin crash", plugintest.ModeSetsidExit, nil, 0, 1, "plugin sd ("},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			pidFile := filepath.Join(dir, "pid")
			reg := writeRegistry(t, dir, "sd", exe, "", map[string]string{plugintest.ModeEnv: c.mode, plugintest.PidFileEnv: pidFile})
			p := startZoo(t, t.TempDir(), c.env, "run", "sd", "--registry", reg, "--input", text)
			if c.signal != 0 {
				if _, err := plugintest.WaitFile(plugintest.BuildingFile(pidFile), hangBound); err != nil {
					t.Fatalf("%v; zoo's stderr %q", err, p.stderr.String())
				}
			}
			pid, err := plugintest.WaitPid(plugintest.GrandchildFile(pidFile), hangBound)
			if err != nil {
				t.Fatalf("%v; zoo's stderr %q", err, p.stderr.String())
			}
			t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
			if c.signal != 0 {
				if !plugintest.Alive(pid) {
					t.Fatalf("the grandchild %d is not running before the signal", pid)
				}
				p.cmd.Process.Signal(c.signal)
			}
			code := p.wait(t)
			if errs := p.stderr.String(); code != c.code || !strings.Contains(errs, c.stderr) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, errs, c.code, c.stderr)
			}
			if !plugintest.WaitGone(pid, hangBound) {
				t.Errorf("the plugin's setsid grandchild %d outlives zoo", pid)
			}
		})
	}
}
