//go:build linux

package plugin_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/zoo-dev/zoo/plugin"
	"github.com/zoo-dev/zoo/plugin/plugintest"
)

// grandchild waits for the pid of the setsid grandchild of the plugin whose pid file is
// pidFile, and checks that it runs.
func grandchild(t *testing.T, pidFile string) int {
	t.Helper()
	pid, err := plugintest.WaitPid(plugintest.GrandchildFile(pidFile), hangBound)
	if err != nil {
		t.Fatal(err)
	}
	if !plugintest.Alive(pid) {
		t.Fatalf("grandchild %d is not running", pid)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	return pid
}

// assertGrandchildGone fails when the grandchild still runs (before, it lived on, re-parented to PID 1:
// a process-group kill cannot reach a process in a session of its own).
func assertGrandchildGone(t *testing.T, what string, pid int) {
	t.Helper()
	if !plugintest.WaitGone(pid, 20*time.Second) { // shorter than within's bound, so the test says what is wrong
		t.Errorf("%s: the plugin's setsid grandchild %d survives", what, pid)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// buildingPlugin starts a plugin that hangs in Build (plugintest.ModeSetsidBuild) on a new
// host with an hour's Build timeout, and a Build under ctx, and returns once the plugin is
// building: the host, the Build's result and the pid of the plugin's setsid grandchild.
func buildingPlugin(t *testing.T, ctx context.Context) (*plugin.Host, <-chan error, int) {
	t.Helper()
	spec, pidFile := self(t, plugintest.ModeSetsidBuild)
	h := plugin.NewHost(plugin.HostOptions{StartTimeout: time.Minute, BuildTimeout: time.Hour})
	c, err := h.Client(context.Background(), spec)
	if err != nil {
		h.Close()
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { _, err := c.Build(ctx, resolve(t, c), 1); errc <- err }()
	if _, err := plugintest.WaitFile(plugintest.BuildingFile(pidFile), hangBound); err != nil {
		h.Close()
		t.Fatal(err)
	}
	return h, errc, grandchild(t, pidFile)
}

// TestSetsidGrandchildKilled: a plugin's descendant in a session of its own is killed on every
// exit path: a start that times out, a cancelled start, a Build timeout, a cancelled Build, a
// host closed during Build, Host.Kill (a signal), a plugin that exits during Build, and Close
// after a good Build of a plugin whose grandchild double-forked away from it.
func TestSetsidGrandchildKilled(t *testing.T) {
	script := func(t *testing.T) (plugin.Spec, string) {
		dir := t.TempDir()
		path, err := plugintest.SetsidScript(dir)
		if err != nil {
			t.Fatal(err)
		}
		pidFile := filepath.Join(dir, "pid")
		return plugin.Spec{Name: "setsid", Path: path, Env: map[string]string{plugintest.PidFileEnv: pidFile}}, pidFile
	}
	cases := []struct {
		name string
		run  func(t *testing.T) // returns once the exit path has been taken
	}{
		{"start timeout", func(t *testing.T) {
			spec, pidFile := script(t)
			h := plugin.NewHost(plugin.HostOptions{StartTimeout: 2 * time.Second})
			defer h.Close()
			errc := make(chan error, 1)
			go func() { _, err := h.Client(context.Background(), spec); errc <- err }()
			pid := grandchild(t, pidFile)
			if err := <-errc; err == nil {
				t.Fatal("the start did not time out")
			}
			assertGrandchildGone(t, "start timeout", pid) // before Close: the timeout killed it
		}},
		{"start cancelled", func(t *testing.T) {
			spec, pidFile := script(t)
			h := plugin.NewHost(plugin.HostOptions{StartTimeout: time.Hour})
			defer h.Close()
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() { _, err := h.Client(ctx, spec); errc <- err }()
			pid := grandchild(t, pidFile)
			cancel()
			<-errc
			assertGrandchildGone(t, "start cancelled", pid)
		}},
		{"build timeout", func(t *testing.T) {
			spec, pidFile := self(t, plugintest.ModeSetsidBuild)
			h := plugin.NewHost(plugin.HostOptions{StartTimeout: time.Minute, BuildTimeout: 2 * time.Second})
			defer h.Close()
			c, err := h.Client(context.Background(), spec)
			if err != nil {
				t.Fatal(err)
			}
			errc := make(chan error, 1)
			go func() { _, err := c.Build(context.Background(), resolve(t, c), 1); errc <- err }()
			pid := grandchild(t, pidFile)
			if err := <-errc; err == nil {
				t.Fatal("Build did not time out")
			}
			assertGrandchildGone(t, "build timeout", pid)
		}},
		{"build cancelled, then the host closed", func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			h, errc, pid := buildingPlugin(t, ctx)
			cancel()
			<-errc
			h.Close()
			assertGrandchildGone(t, "build cancelled", pid)
		}},
		{"host closed during build", func(t *testing.T) {
			h, _, pid := buildingPlugin(t, context.Background())
			h.Close()
			assertGrandchildGone(t, "host closed", pid)
		}},
		{"host killed (a signal)", func(t *testing.T) {
			h, _, pid := buildingPlugin(t, context.Background())
			defer h.Close()
			h.Kill()
			assertGrandchildGone(t, "Host.Kill", pid)
		}},
		{"plugin exits during build", func(t *testing.T) {
			spec, pidFile := self(t, plugintest.ModeSetsidExit)
			h := plugin.NewHost(plugin.HostOptions{StartTimeout: time.Minute, BuildTimeout: time.Minute})
			c, err := h.Client(context.Background(), spec)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Build(context.Background(), resolve(t, c), 1); err == nil {
				t.Fatal("Build of an exiting plugin succeeded")
			}
			pid := grandchild(t, pidFile) // now zoo's own child: its parent is gone
			h.Close()
			assertGrandchildGone(t, "exited plugin", pid)
		}},
		{"close after a good build, daemon grandchild", func(t *testing.T) {
			spec, pidFile := self(t, plugintest.ModeSetsidDaemon)
			h := plugin.NewHost(plugin.HostOptions{StartTimeout: time.Minute, BuildTimeout: time.Minute})
			defer h.Close()
			c, err := h.Client(context.Background(), spec)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Build(context.Background(), resolve(t, c), 1); err != nil {
				t.Fatal(err)
			}
			pid := grandchild(t, pidFile)

			c.Close()

			assertGrandchildGone(t, "Client.Close", pid)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			within(t, c.name, func() { c.run(t) })
		})
	}
}

// TestContainmentSparesOthers: killing one plugin leaves alone another plugin's grandchild
// and a process the host's program started itself in a session of its own.
func TestContainmentSparesOthers(t *testing.T) {
	mine := exec.Command("sleep", "1000")
	mine.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := mine.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = mine.Process.Kill(); _ = mine.Wait() }()
	h := plugin.NewHost(plugin.HostOptions{StartTimeout: time.Minute, BuildTimeout: time.Minute})
	defer h.Close()
	specA, pidA := self(t, plugintest.ModeSetsidDaemon)
	specB, pidB := self(t, plugintest.ModeSetsidDaemon)
	specB.Name = "other"
	a, err := h.Client(context.Background(), specA)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Client(context.Background(), specB); err != nil {
		t.Fatal(err)
	}
	ga, gb := grandchild(t, pidA), grandchild(t, pidB)
	a.Close()
	assertGrandchildGone(t, "plugin A closed", ga)
	time.Sleep(200 * time.Millisecond)
	if !plugintest.Alive(gb) {
		t.Errorf("closing plugin A killed plugin B's grandchild %d", gb)
	}
	if !plugintest.Alive(mine.Process.Pid) {
		t.Errorf("closing a plugin killed the program's own child %d", mine.Process.Pid)
	}
	h.Close()
	assertGrandchildGone(t, "host closed", gb)
}

// TestAdoptedZombieReaped: a process the plugin left in its group that exited by itself is a
// zombie of zoo (the subreaper that adopted it) until zoo reaps it, which closing the plugin
// does.
func TestAdoptedZombieReaped(t *testing.T) {
	spec, pidFile := self(t, plugintest.ModeOrphanExit)
	h := plugin.NewHost(plugin.HostOptions{StartTimeout: time.Minute})
	defer h.Close()
	c, err := h.Client(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := plugintest.WaitPid(plugintest.GrandchildFile(pidFile), hangBound)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(hangBound)
	for {
		st, ppid := plugintest.State(pid)
		if st == 'Z' && ppid == os.Getpid() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("orphan %d is %c with parent %d, want a zombie of this process %d", pid, st, ppid, os.Getpid())
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.Close()
	for st, _ := plugintest.State(pid); st != 0; st, _ = plugintest.State(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("zombie %d not reaped after Close", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
