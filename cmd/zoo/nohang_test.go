package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zoo-dev/zoo/cmd/zoo/internal/list"
	"github.com/zoo-dev/zoo/plugin"
	"github.com/zoo-dev/zoo/plugin/plugintest"
)

// hangBound is how long a zoo process may take before a test calls it a hang: generous,
// since the machine may be loaded. These tests check that zoo exits at all, not how fast.
const hangBound = time.Minute

// zooProc is a zoo process: this test binary run as zoo (see asZooEnv), which is main's
// code path without building a binary.
type zooProc struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	done           chan error
}

// startZoo starts zoo with args; env adds to the test's environment, and the Describe
// cache lives in cacheDir.
func startZoo(t *testing.T, cacheDir string, env []string, args ...string) *zooProc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := &zooProc{cmd: exec.Command(exe, args...), done: make(chan error, 1)}
	p.cmd.Env = append(append(os.Environ(), asZooEnv+"=1", "XDG_CACHE_HOME="+cacheDir), env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// wait waits for zoo to exit and returns its exit code; a zoo that runs past hangBound fails
// the test (and is killed).
func (p *zooProc) wait(t *testing.T) int {
	t.Helper()
	select {
	case err := <-p.done:
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		p.done <- err // for Cleanup
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(hangBound):
		p.cmd.Process.Kill()
		t.Fatalf("zoo %s did not exit within %s (a hang); stderr %q", strings.Join(p.cmd.Args[1:], " "), hangBound, p.stderr.String())
		return 0
	}
}

// hangRegistry writes a registry whose entry hangy is plugintest's hanging shell script
// (its child holds the script's stdout and stderr); the script writes its pid to pidFile.
func hangRegistry(t *testing.T) (reg, pidFile string) {
	t.Helper()
	dir := t.TempDir()
	script, err := plugintest.HangScript(dir)
	if err != nil {
		t.Fatal(err)
	}
	pidFile = filepath.Join(dir, "pid")
	return writeRegistry(t, dir, "hangy", script, "", map[string]string{plugintest.PidFileEnv: pidFile}), pidFile
}

// assertGroupGone fails when a process of the group led by the pid in pidFile is alive.
func assertGroupGone(t *testing.T, pidFile string) {
	t.Helper()
	pgid, err := plugintest.WaitPid(pidFile, hangBound)
	if err != nil {
		t.Fatal(err)
	}
	live, err := plugintest.WaitGroupGone(pgid, hangBound)
	if errors.Is(err, plugintest.ErrNoProc) {
		t.Log(err)
		return
	}
	if err != nil || len(live) > 0 {
		t.Errorf("processes %v of the plugin's group %d outlive zoo (%v)", live, pgid, err)
	}
}

// TestHangingHandshake is the case that hung zoo: a registered plugin that never completes
// the handshake while a child keeps its pipes open. zoo run fails after the start timeout,
// with one line, and leaves no process of the plugin's group; zoo list does not start it.
func TestHangingHandshake(t *testing.T) {
	reg, pidFile := hangRegistry(t)
	cache := t.TempDir()
	env := []string{plugin.StartTimeoutEnv + "=1s"}

	for _, args := range [][]string{{"list", "--registry", reg}, {"list", "--registry", reg, "--json"}} {
		p := startZoo(t, cache, env, args...)
		if code := p.wait(t); code != 0 || !strings.Contains(p.stdout.String(), "hangy") {
			t.Errorf("zoo %v: exit %d, stdout %q, stderr %q", args, code, p.stdout.String(), p.stderr.String())
		}
		if _, err := os.Stat(pidFile); err == nil {
			t.Fatalf("zoo %v started the plugin", args)
		}
	}

	p := startZoo(t, cache, env, "run", "hangy", "--registry", reg, "--input", text)
	code := p.wait(t)
	errs := p.stderr.String()
	if code != 1 || !strings.Contains(errs, "plugin hangy (") || !strings.Contains(errs, "handshake within 1s") {
		t.Errorf("zoo run: exit %d, stderr %q", code, errs)
	}
	checkOneLine(t, errs)
	assertGroupGone(t, pidFile)
}

// TestSignals sends SIGINT and SIGTERM to zoo while its plugin hangs in the handshake (the
// script, with a start timeout far beyond the test) and while it hangs in Build: zoo exits
// 130 or 143 with one line, and the plugin's process group is gone. SIGKILL leaves zoo no
// say; the kernel (Pdeathsig) and the SDK (exitWithParent) still end a Go plugin.
func TestSignals(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Linux process checks")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := []string{plugin.StartTimeoutEnv + "=1h", plugin.BuildTimeoutEnv + "=1h"}
	cases := []struct {
		phase string
		sig   syscall.Signal
		code  int
		line  string
	}{
		{"handshake", syscall.SIGINT, 130, "zoo: interrupted"},
		{"handshake", syscall.SIGTERM, 143, "zoo: terminated"},
		{"build", syscall.SIGINT, 130, "zoo: interrupted"},
		{"build", syscall.SIGTERM, 143, "zoo: terminated"},
		{"build", syscall.SIGKILL, -1, ""},
	}
	for _, c := range cases {
		t.Run(c.phase+"/"+c.sig.String(), func(t *testing.T) {
			var reg, pidFile, marker string
			if c.phase == "handshake" {
				reg, pidFile = hangRegistry(t)
				marker = pidFile
			} else {
				dir := t.TempDir()
				pidFile = filepath.Join(dir, "pid")
				reg = writeRegistry(t, dir, "hang", exe, "", map[string]string{plugintest.ModeEnv: plugintest.ModeHangBuild, plugintest.PidFileEnv: pidFile})
				marker = plugintest.BuildingFile(pidFile)
			}
			name := strings.TrimSuffix(filepath.Base(reg), ".yaml")
			p := startZoo(t, t.TempDir(), env, "run", name, "--registry", reg, "--input", text)
			if _, err := plugintest.WaitFile(marker, hangBound); err != nil {
				t.Fatalf("%v; zoo's stderr %q", err, p.stderr.String())
			}
			p.cmd.Process.Signal(c.sig)
			code := p.wait(t)
			if c.sig == syscall.SIGKILL {
				pid, _ := plugintest.WaitPid(pidFile, hangBound)
				deadline := time.Now().Add(hangBound)
				for syscall.Kill(pid, 0) == nil && !zombie(pid) {
					if time.Now().After(deadline) {
						syscall.Kill(pid, syscall.SIGKILL)
						t.Fatalf("plugin %d outlived a SIGKILLed zoo by %s", pid, hangBound)
					}
					time.Sleep(10 * time.Millisecond)
				}
				return
			}
			if errs := strings.TrimSpace(p.stderr.String()); code != c.code || errs != c.line {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, errs, c.code, c.line)
			}
			assertGroupGone(t, pidFile)
		})
	}
}

// zombie reports whether pid has exited and waits for its parent to reap it.
func zombie(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(data)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] == 'Z' || s[i+2] == 'X'
	}
	return false
}

// TestListDescribeCache: zoo list shows a third-party plugin's Describe answer only from the
// cache that a command which started it (zoo show) filled, and forgets it when the
// executable changes; it never starts the plugin.
func TestListDescribeCache(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// A copy of the plugin, so that the test can change its modification time.
	bin := filepath.Join(dir, "testvar")
	copyFile(t, exe, bin)
	pidFile := filepath.Join(dir, "pid")
	reg := writeRegistry(t, dir, "tv", bin, "", map[string]string{plugintest.ModeEnv: plugintest.ModeOK, plugintest.PidFileEnv: pidFile})
	cache := t.TempDir()
	list := func(want bool, complexity string) {
		t.Helper()
		p := startZoo(t, cache, nil, "list", "--registry", reg, "--json")
		if code := p.wait(t); code != 0 {
			t.Fatalf("zoo list: exit %d, %s", code, p.stderr.String())
		}
		var rows []list.Row
		if err := json.Unmarshal(p.stdout.Bytes(), &rows); err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if r.Name == "tv" && (r.Described != want || r.Complexity != complexity || r.Summary != "test") {
				t.Errorf("zoo list row %+v; want described %v, complexity %q", r, want, complexity)
			}
		}
		if _, err := os.Stat(pidFile); err == nil {
			t.Fatal("zoo list started the plugin")
		}
	}
	list(false, "")
	p := startZoo(t, cache, nil, "show", "tv", "--registry", reg, "--seq", "64")
	if code := p.wait(t); code != 0 {
		t.Fatalf("zoo show: exit %d, %s", code, p.stderr.String())
	}
	if _, err := os.Stat(pidFile); err != nil {
		t.Fatal("zoo show did not start the plugin")
	}
	os.Remove(pidFile)
	list(true, "O(n²)")
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(bin, later, later); err != nil {
		t.Fatal(err)
	}
	list(false, "")
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
