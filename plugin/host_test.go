package plugin_test

import (
	"context"

	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zoo-dev/zoo/onnx"
	"github.com/zoo-dev/zoo/plugin"
	"github.com/zoo-dev/zoo/plugin/plugintest"
	"github.com/zoo-dev/zoo/zoo/tensor"
	"github.com/zoo-dev/zoo/zoo/variant"
)

func TestMain(m *testing.M) {
	plugintest.MaybeServe()
	os.Exit(m.Run())
}

// self returns a spec that starts this test binary as a plugin in mode, writing its pid to
// a file in dir.
func self(t testing.TB, mode string) (plugin.Spec, string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(t.TempDir(), "pid")
	return plugin.Spec{Name: "testvar", Path: exe, Env: map[string]string{plugintest.ModeEnv: mode, plugintest.PidFileEnv: pidFile}}, pidFile
}

func newHost(t *testing.T) *plugin.Host {
	t.Helper()
	h := plugin.NewHost(plugin.HostOptions{StartTimeout: 10 * time.Second, BuildTimeout: time.Minute})
	t.Cleanup(func() { h.Close() })
	return h
}

// variantConfig resolves a client's defaults.
func variantConfig(c *plugin.Client) (variant.Config, error) {
	return variant.Resolve(c.Describe())
}

func resolve(t *testing.T, v variant.Variant, layers ...map[string]any) variant.Config {
	t.Helper()
	cfg, err := variant.Resolve(v.Describe(), layers...)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// assertGone fails if the process whose pid is in pidFile still runs.
func assertGone(t *testing.T, pidFile string) {
	t.Helper()
	data, err := os.ReadFile(pidFile)
	if err != nil {
		return // never started
	}
	pid, _ := strconv.Atoi(string(data))
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Errorf("plugin process %d still runs after Close", pid)
			syscall.Kill(pid, syscall.SIGKILL)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestRemoteBuildMatchesDirect(t *testing.T) {
	spec, pidFile := self(t, plugintest.ModeOK)
	h := newHost(t)
	v, err := h.Client(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	direct := plugintest.Variant()
	if got, want := v.Describe().Name, direct.Describe().Name; got != want {
		t.Fatalf("Describe name %q, want %q", got, want)
	}
	for i, p := range direct.Describe().Params {
		if got := v.Describe().Params[i]; got.Name != p.Name || got.Kind != p.Kind || got.Default != p.Default || got.Doc != p.Doc {
			t.Errorf("param %d: %+v, want %+v", i, got, p)
		}
	}
	cfg := resolve(t, v, map[string]any{"layers": 2})
	g, err := v.Build(context.Background(), cfg, 7)
	if err != nil {
		t.Fatal(err)
	}
	want, err := direct.Build(context.Background(), cfg, 7)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := onnx.Export(g, onnx.ExportOptions{})
	b, _ := onnx.Export(want, onnx.ExportOptions{})
	if string(a) != string(b) {
		t.Error("the graph built through the plugin differs from the direct build")
	}
	wi := want.InitializerMap()
	for name, x := range g.InitializerMap() {
		if !tensor.Equal(x, wi[name]) {
			t.Errorf("initializer %s differs", name)
		}
	}
	// One process per plugin, reused.
	c1, _ := h.Client(t.Context(), spec)
	c2, _ := h.Client(t.Context(), spec)
	if c1 != c2 || c1.Pid() == 0 {
		t.Errorf("two lookups of one plugin gave clients %p (pid %d) and %p", c1, c1.Pid(), c2)
	}
	if _, err := v.Build(context.Background(), resolve(t, v, map[string]any{"heads": 3}), 1); err == nil || !strings.Contains(err.Error(), "heads=3 must divide d_model=32") {
		t.Errorf("config error: %v", err)
	} else if pe := (*plugin.Error)(nil); !errors.As(err, &pe) || pe.Kind != plugin.ErrConfig || !pe.BadInput() {
		t.Errorf("config error %v is not an ErrConfig", err)
	}
	h.Close()
	assertGone(t, pidFile)
}

func TestInProcessUsesTheSameServer(t *testing.T) {
	c, err := plugin.InProcess(t.Context(), plugintest.Variant(), plugin.HostOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Pid() != 0 {
		t.Errorf("in-process client has pid %d", c.Pid())
	}
	var v variant.Variant = c
	g, err := v.Build(context.Background(), resolve(t, v), 3)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := plugintest.Variant().Build(context.Background(), resolve(t, v), 3)
	a, _ := onnx.Export(g, onnx.ExportOptions{})
	b, _ := onnx.Export(want, onnx.ExportOptions{})
	if string(a) != string(b) {
		t.Error("in-process build differs from the direct build")
	}
}

// TestBaseSizedModelStreams builds an ~87 MB model (the seed's base encoder shape) through a
// plugin process: far above gRPC's 4 MiB message cap.
func TestBaseSizedModelStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("builds an 87 MB model")
	}
	spec, _ := self(t, plugintest.ModeOK)
	h := newHost(t)
	c, err := h.Client(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	cfg := resolve(t, c, map[string]any{"d_model": 512, "heads": 8, "layers": 6, "d_ff": 2048, "max_len": 5000})
	g, st, err := c.BuildStats(t.Context(), cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	if st.Bytes < 80<<20 || st.Chunks < 80 {
		t.Errorf("moved %d bytes in %d chunks, want a model over 80 MiB in 1 MiB chunks", st.Bytes, st.Chunks)
	}
	if g.ParamCount() < 15_000_000 {
		t.Errorf("%d parameters", g.ParamCount())
	}
	t.Logf("%d bytes in %d chunks: stream %s (incl. build and export), import %s", st.Bytes, st.Chunks, st.Stream, st.Import)
}

func TestFailuresAreClearAndNeverHang(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "script.sh")
	os.WriteFile(script, []byte("#!/bin/sh\necho hello from a script\n"), 0o755)
	noexec := filepath.Join(dir, "noexec")
	os.WriteFile(noexec, []byte("#!/bin/sh\n"), 0o644)
	junk := filepath.Join(dir, "junk")
	os.WriteFile(junk, []byte("\x00\x01\x02 not a program"), 0o755)
	exe, _ := os.Executable()
	sum, err := plugin.FileSHA256(exe)
	if err != nil {
		t.Fatal(err)
	}
	badSum := strings.Repeat("0", 64)
	cases := []struct {
		name   string
		mode   string // plugintest mode; "" uses path
		path   string
		sha    string
		kind   plugin.ErrorKind
		build  bool // the failure shows at Build
		want   []string
		within time.Duration
	}{
		{name: "missing", path: filepath.Join(dir, "nope"), kind: plugin.ErrNotFound, want: []string{"does not exist", "go build"}},
		{name: "directory", path: dir, kind: plugin.ErrNotExecutable, want: []string{"is a directory"}},
		{name: "not executable", path: noexec, kind: plugin.ErrNotExecutable, want: []string{"not executable", "chmod +x"}},
		{name: "not a program", path: junk, kind: plugin.ErrNotExecutable, want: []string{"exec format error"}},
		{name: "script", path: script, kind: plugin.ErrNotPlugin, want: []string{"not a zoo variant plugin", "plugin.Serve"}},
		{name: "prints to stdout", mode: plugintest.ModeStdout, kind: plugin.ErrNotPlugin, want: []string{"not a zoo variant plugin"}},
		{name: "sha256 mismatch", mode: plugintest.ModeOK, sha: badSum, kind: plugin.ErrChecksum, want: []string{"sha256 mismatch", sum, badSum}},
		{name: "protocol version", mode: plugintest.ModeProtocolOld, kind: plugin.ErrProtocol, want: []string{
			fmt.Sprintf("protocol version %d,", plugin.ProtocolVersion-1), fmt.Sprintf("speaks version %d", plugin.ProtocolVersion), "rebuild"}},
		{name: "hangs at start", mode: plugintest.ModeHangStart, kind: plugin.ErrTimeout, want: []string{"handshake within 1s", plugin.StartTimeoutEnv}, within: 5 * time.Second},
		{name: "bad describe", mode: plugintest.ModeBadDescribe, kind: plugin.ErrProtocolViolation, want: []string{"invalid Describe", "vocab"}},
		{name: "crashes in build", mode: plugintest.ModeCrashBuild, build: true, kind: plugin.ErrCrashed, want: []string{"crashed during Build", "panic: plugintest: crash during Build"}},
		{name: "exits in build", mode: plugintest.ModeExitBuild, build: true, kind: plugin.ErrCrashed, want: []string{"crashed during Build", "exit status 3", "out of cheese"}},
		{name: "hangs in build", mode: plugintest.ModeHangBuild, build: true, kind: plugin.ErrTimeout, want: []string{"did not finish Build within 1s", plugin.BuildTimeoutEnv}, within: 5 * time.Second},
		{name: "not onnx", mode: plugintest.ModeGarbage, build: true, kind: plugin.ErrInvalidGraph, want: []string{"invalid graph", "zoo plugin test"}},
		{name: "no hidden output", mode: plugintest.ModeNoHidden, build: true, kind: plugin.ErrInvalidGraph, want: []string{`no output "hidden"`}},
		{name: "bad checksum", mode: plugintest.ModeBadChecksum, build: true, kind: plugin.ErrProtocolViolation, want: []string{"CRC-32C"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spec, pidFile := self(t, c.mode)
			if c.mode == "" {
				spec.Path = c.path
			}
			spec.SHA256 = c.sha
			h := plugin.NewHost(plugin.HostOptions{StartTimeout: time.Second, BuildTimeout: time.Second})
			defer h.Close()
			start := time.Now()
			v, err := h.Client(context.Background(), spec)
			if err == nil && c.build {
				_, err = v.Build(context.Background(), resolve(t, v), 1)
			} else if err == nil {
				t.Fatal("no error")
			} else if c.build {
				t.Fatalf("failed before Build: %v", err)
			}
			elapsed := time.Since(start)
			var pe *plugin.Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T) is not a *plugin.Error", err, err)
			}
			msg := err.Error()
			if pe.Kind != c.kind {
				t.Errorf("kind %d, want %d: %s", pe.Kind, c.kind, msg)
			}
			if !strings.HasPrefix(msg, "plugin testvar (") || strings.Contains(msg, "\n") {
				t.Errorf("message is not one line naming the plugin: %q", msg)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message lacks %q: %s", w, msg)
				}
			}
			if c.within == 0 {
				c.within = 3 * time.Second
			}
			if elapsed > c.within {
				t.Errorf("took %s (want under %s)", elapsed, c.within)
			}
			t.Logf("%s: %s", elapsed.Round(time.Millisecond), msg)
			h.Close()
			assertGone(t, pidFile)
		})
	}
}
