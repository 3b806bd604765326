package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zoo-dev/zoo/cmd/zoo/internal/runout"
	"github.com/zoo-dev/zoo/plugin"
	"github.com/zoo-dev/zoo/plugin/plugintest"
)

// writeRegistry writes a registry with one entry and returns its path.
func writeRegistry(t *testing.T, dir, name, pluginPath, sha string, env map[string]string) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "variants:\n  - name: %s\n    summary: test\n    plugin: %q\n", name, pluginPath)
	if sha != "" {
		fmt.Fprintf(&b, "    sha256: %q\n", sha)
	}
	if len(env) > 0 {
		b.WriteString("    env:\n")
		for k, v := range env {
			fmt.Fprintf(&b, "      %s: %q\n", k, v)
		}
	}
	b.WriteString("    presets:\n      tiny: {d_model: 64, heads: 4, layers: 2, d_ff: 128}\n")
	path := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkOneLine fails unless stderr is one line without a Go trace.
func checkOneLine(t *testing.T, stderr string) {
	t.Helper()
	if n := strings.Count(strings.TrimSpace(stderr), "\n"); n > 0 {
		t.Errorf("stderr has %d lines, want one:\n%s", n+1, stderr)
	}
	if strings.Contains(stderr, "goroutine ") {
		t.Errorf("a Go trace reached the user:\n%s", stderr)
	}
}

// TestPluginFailuresCLI runs the CLI against misbehaving plugins (this test binary in
// plugintest's modes): one clear line naming the plugin, the right exit code, no hang.
func TestPluginFailuresCLI(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	t.Setenv(plugin.BuildTimeoutEnv, "2s")
	t.Setenv(plugin.StartTimeoutEnv, "2s")
	cases := []struct {
		name, path, mode, sha string
		code                  int
		want                  []string
	}{
		{name: "missing", path: filepath.Join(dir, "nope"), code: 2, want: []string{"plugin missing (", "does not exist"}},
		{name: "sha", path: exe, mode: plugintest.ModeOK, sha: strings.Repeat("ab", 32), code: 2, want: []string{"plugin sha (", "sha256 mismatch"}},
		{name: "proto", path: exe, mode: plugintest.ModeProtocolOld, code: 2, want: []string{"plugin proto (", fmt.Sprintf("protocol version %d,", plugin.ProtocolVersion-1)}},
		{name: "notplugin", path: exe, mode: plugintest.ModeStdout, code: 2, want: []string{"plugin notplugin (", "not a zoo variant plugin"}},
		{name: "crash", path: exe, mode: plugintest.ModeCrashBuild, code: 1, want: []string{"plugin crash (", "crashed during Build", "panic: plugintest: crash during Build"}},
		{name: "hang", path: exe, mode: plugintest.ModeHangBuild, code: 1, want: []string{"plugin hang (", "did not finish Build within 2s"}},
		{name: "garbage", path: exe, mode: plugintest.ModeGarbage, code: 1, want: []string{"plugin garbage (", "invalid graph"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := map[string]string{}
			if c.mode != "" {
				env[plugintest.ModeEnv] = c.mode
			}
			reg := writeRegistry(t, dir, c.name, c.path, c.sha, env)
			start := time.Now()
			code, _, errs := zoo(t, "run", c.name, "--registry", reg, "--input", text)
			if code != c.code {
				t.Errorf("exit %d, want %d; stderr %q", code, c.code, errs)
			}
			for _, w := range c.want {
				if !strings.Contains(errs, w) {
					t.Errorf("stderr lacks %q: %s", w, errs)
				}
			}
			checkOneLine(t, errs)
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("took %s", d)
			}
		})
	}
	// A config error from the plugin is bad input (exit 2), reported as the variant says it.
	reg := writeRegistry(t, dir, "cfg", exe, "", map[string]string{plugintest.ModeEnv: plugintest.ModeOK})
	code, _, errs := zoo(t, "run", "cfg", "--registry", reg, "--input", text, "--set", "heads=3")
	if code != 2 || !strings.Contains(errs, "heads=3 must divide d_model=32") {
		t.Errorf("config error: exit %d, stderr %q", code, errs)
	}
}

// TestInProcessMode runs a built-in variant through go-plugin's reattach mode.
func TestInProcessMode(t *testing.T) {
	t.Setenv(inProcessEnv, "1")
	code, out, errs := zoo(t, "run", "vanilla.tiny", "--input", text, "--verbose")
	if code != 0 || !strings.Contains(out, "vanilla.tiny") || !strings.Contains(errs, "in process") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// TestExamplePluginEndToEnd builds examples/talkingheads (its own module) and runs it
// through the real plugin path: run, export, parity and the conformance kit, pinned by sha256.
func TestExamplePluginEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the example plugin")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	// Build a copy whose replace directive points at this checkout, so that the committed
	// files stay untouched even if zoo's requirements moved on.
	src := filepath.Join(root, "examples", "talkingheads")
	work := t.TempDir()
	for _, f := range []string{"main.go", "go.mod", "go.sum"} {
		data, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "go.mod" {
			data = bytes.ReplaceAll(data, []byte("=> ../.."), []byte("=> "+root))
		}
		os.WriteFile(filepath.Join(work, f), data, 0o644)
	}
	bin := filepath.Join(work, "talkingheads")
	build := exec.Command("go", "build", "-mod=mod", "-o", bin, ".")
	build.Dir = work
	build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build examples/talkingheads: %v\n%s", err, out)
	}
	sum, err := plugin.FileSHA256(bin)
	if err != nil {
		t.Fatal(err)
	}
	reg := writeRegistry(t, work, "talkingheads", bin, sum, nil)

	code, out, errs := zoo(t, "run", "talkingheads", "--registry", reg, "--preset", "tiny", "--input", text, "--json")
	var rep runout.Report
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || rep.Tokens != 592 {
		t.Fatalf("run: exit %d, stderr %q, report %+v", code, errs, rep)
	}
	onnxPath := filepath.Join(work, "th.onnx")
	if code, _, errs := zoo(t, "export", "talkingheads", "--registry", reg, "--preset", "tiny", "--onnx", "-o", onnxPath); code != 0 {
		t.Fatalf("export: exit %d, %s", code, errs)
	}
	if st, err := os.Stat(onnxPath); err != nil || st.Size() < 100_000 {
		t.Fatalf("export wrote %v, %v", st, err)
	}
	if code, out, errs := zoo(t, "parity", "talkingheads", "--registry", reg, "--preset", "tiny"); code != 0 {
		if strings.Contains(errs, "ONNX Runtime") {
			t.Logf("parity skipped: %s", errs)
		} else {
			t.Errorf("parity: exit %d, %s\n%s", code, errs, out)
		}
	}
	if code, out, errs := zoo(t, "plugin", "test", bin); code != 0 || !strings.Contains(out, "conforms: 9 of 9") {
		t.Errorf("plugin test: exit %d, %s\n%s", code, errs, out)
	}
	// Pinned: a rebuilt (different) binary is refused.
	bad := writeRegistry(t, work, "th2", bin, strings.Repeat("0", 64), nil)
	if code, _, errs := zoo(t, "run", "th2", "--registry", bad, "--preset", "tiny", "--input", text); code != 2 || !strings.Contains(errs, "sha256 mismatch") {
		t.Errorf("sha256 mismatch: exit %d, %s", code, errs)
	}
}

// TestPluginNewBuilds scaffolds a plugin module and builds and checks it offline.
func TestPluginNewBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the scaffold")
	}
	root, _ := filepath.Abs("../..")
	dir := filepath.Join(t.TempDir(), "myattn")
	if code, out, errs := zoo(t, "plugin", "new", "myattn", "--dir", dir, "--zoo-src", root); code != 0 {
		t.Fatalf("plugin new: exit %d, %s %s", code, out, errs)
	}
	bin := filepath.Join(dir, "myattn")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build the scaffold: %v\n%s", err, out)
	}
	if code, out, errs := zoo(t, "plugin", "test", bin, "--seed", "5"); code != 0 || !strings.Contains(out, "conforms") {
		t.Errorf("plugin test: exit %d, %s\n%s", code, errs, out)
	}
	code, out, errs := zoo(t, "run", "myattn", "--registry", filepath.Join(dir, "registry.yaml"), "--preset", "tiny", "--input", text)
	if code != 0 || !strings.Contains(out, "myattn.tiny") {
		t.Errorf("run: exit %d, %s\n%s", code, errs, out)
	}
	// The template's attention is vanilla attention with a per-head temperature: fused by what
	// it computes, its program runs the same steps, fused kernels included, as vanilla's.
	report := func(args ...string) string {
		t.Helper()
		code, _, errs := zoo(t, append(args, "--input", text, "--verbose")...)
		var lines []string
		for _, l := range strings.Split(errs, "\n") {
			if strings.HasPrefix(l, "cpu: ") {
				lines = append(lines, l)
			}
		}
		if code != 0 || len(lines) == 0 {
			t.Fatalf("run %v --verbose: exit %d, no compile report in\n%s", args, code, errs)
		}
		return strings.Join(lines, "\n")
	}
	if got, want := report("run", "myattn", "--registry", filepath.Join(dir, "registry.yaml"), "--preset", "tiny"), report("run", "vanilla", "--preset", "tiny"); got != want {
		t.Errorf("the template compiles to\n%s\nvanilla to\n%s", got, want)
	}
	if code, _, errs := zoo(t, "plugin", "new", "myattn", "--dir", dir); code != 2 || !strings.Contains(errs, "not empty") {
		t.Errorf("plugin new into a full dir: exit %d, %s", code, errs)
	}
	if code, _, errs := zoo(t, "plugin", "new", "My Attn"); code != 2 || !strings.Contains(errs, "lower-case") {
		t.Errorf("plugin new with a bad name: exit %d, %s", code, errs)
	}
}

// TestRequirePinnedCLI: --require-pinned (anywhere) and ZOO_REQUIRE_PINNED=1 refuse an
// unpinned third-party plugin before it runs, with the sha256 to pin it; zoo list marks it.
func TestRequirePinnedCLI(t *testing.T) {
	dir := t.TempDir()
	ran := filepath.Join(dir, "ran")
	prog := filepath.Join(dir, "loose")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\ntouch "+ran+"\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	reg := filepath.Join(dir, "registry.yaml")
	if err := os.WriteFile(reg, []byte("variants:\n  - name: loose\n    summary: s\n    plugin: ./loose\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sum, err := plugin.FileSHA256(prog)
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"show", "loose", "--registry", reg, "--require-pinned"},
		{"--require-pinned", "show", "--registry", reg, "loose"},
		{"show", "loose", "--registry", reg, "env"},
	} {
		if args[len(args)-1] == "env" {
			args = args[:len(args)-1]
			t.Setenv("ZOO_REQUIRE_PINNED", "1")
		}
		code, _, errs := zoo(t, args...)
		want := "is not pinned by sha256, and unpinned plugins are refused (ZOO_REQUIRE_PINNED=1 or --require-pinned); if you trust this file, pin it in " + reg + ":2: sha256: \"" + sum + "\""
		if code != 2 || !strings.Contains(errs, want) || strings.Count(errs, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q, want exit 2 and one line holding %q", args, code, errs, want)
		}
		if _, err := os.Stat(ran); err == nil {
			t.Fatalf("%v: the unpinned plugin ran", args)
		}
	}
	code, out, _ := zoo(t, "list", "--registry", reg)
	if code != 0 || !strings.Contains(out, "loose [unpinned]") {
		t.Errorf("zoo list: exit %d\n%s", code, out)
	}
}
