package plugin_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zoo-dev/zoo/plugin"
	"github.com/zoo-dev/zoo/plugin/plugintest"
)

// hangBound is how long a call may take before a test calls it a hang: generous, since the
// machine may be loaded; these tests check that calls end at all, not how fast.
const hangBound = time.Minute

// within runs f and fails the test when it does not return within hangBound.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(hangBound):
		t.Fatalf("%s did not return within %s (a hang)", what, hangBound)
	}
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
		t.Skip(err)
	}
	if err != nil || len(live) > 0 {
		t.Errorf("processes %v of the plugin's group %d survive (%v)", live, pgid, err)
	}
}

func hangScript(t *testing.T) (plugin.Spec, string) {
	t.Helper()
	dir := t.TempDir()
	script, err := plugintest.HangScript(dir)
	if err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(dir, "pid")
	return plugin.Spec{Name: "hangy", Path: script, Env: map[string]string{plugintest.PidFileEnv: pidFile}}, pidFile
}

// TestHangingScriptTimesOut is the case that hung zoo: a shell script that never completes
// the handshake while its background child holds stdout and stderr. The start fails with a
// timeout, Close returns, and nothing of the script's process group survives.
func TestHangingScriptTimesOut(t *testing.T) {
	spec, pidFile := hangScript(t)
	h := plugin.NewHost(plugin.HostOptions{StartTimeout: time.Second})
	var err error
	within(t, "Client and Close", func() {
		_, err = h.Client(context.Background(), spec)
		h.Close()
	})
	var pe *plugin.Error
	if !errors.As(err, &pe) || pe.Kind != plugin.ErrTimeout || !strings.Contains(err.Error(), "handshake within 1s") {
		t.Errorf("error %v, want a handshake timeout", err)
	}
	assertGroupGone(t, pidFile)
}

// TestStopsAreBounded stops a plugin that hangs, at start or in Build, by cancelling the
// caller's context or by closing the host: the call ends with ErrStopped, and the plugin's
// process group is gone.
func TestStopsAreBounded(t *testing.T) {
	cases := []struct {
		name  string
		spec  func(t *testing.T) (plugin.Spec, string)
		build bool // stop during Build (else during the start)
		close bool // stop with Host.Close (else by cancelling the context)
	}{
		{name: "script start cancel", spec: hangScript},
		{name: "script start close", spec: hangScript, close: true},
		{name: "go start cancel", spec: func(t *testing.T) (plugin.Spec, string) { return self(t, plugintest.ModeHangStart) }},
		{name: "build cancel", spec: func(t *testing.T) (plugin.Spec, string) { return self(t, plugintest.ModeHangBuild) }, build: true},
		{name: "build close", spec: func(t *testing.T) (plugin.Spec, string) { return self(t, plugintest.ModeHangBuild) }, build: true, close: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spec, pidFile := c.spec(t)
			// Timeouts far beyond the test: only the stop can end the calls.
			h := plugin.NewHost(plugin.HostOptions{StartTimeout: time.Hour, BuildTimeout: time.Hour})
			defer h.Close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			stop := func() {
				if c.close {
					h.Close()
				} else {
					cancel()
				}
			}
			errc := make(chan error, 1)
			marker := pidFile
			if c.build {
				cl, err := h.Client(ctx, spec)
				if err != nil {
					t.Fatal(err)
				}
				marker = plugintest.BuildingFile(pidFile)
				go func() { _, err := cl.Build(ctx, resolve(t, cl), 1); errc <- err }()
			} else {
				go func() { _, err := h.Client(ctx, spec); errc <- err }()
			}
			if _, err := plugintest.WaitFile(marker, hangBound); err != nil {
				t.Fatal(err)
			}
			var err error
			within(t, "the stopped call", func() {
				stop()
				err = <-errc
			})
			var pe *plugin.Error
			if !errors.As(err, &pe) || pe.Kind != plugin.ErrStopped || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %v, want one line of kind ErrStopped", err)
			}
			if !c.close && !errors.Is(err, context.Canceled) {
				t.Errorf("error %v does not wrap context.Canceled", err)
			}
			within(t, "Close", func() { h.Close() })
			assertGroupGone(t, pidFile)
		})
	}
}
