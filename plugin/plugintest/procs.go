package plugintest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// HangScript writes an executable shell script into dir that never completes the plugin
// handshake while a child keeps its stdout and stderr open: it writes its pid to the file
// named by PidFileEnv (when set), starts `sleep 1000` in the background and sleeps itself.
// Started as a plugin, it leads a process group (the host's), so Group(pid) lists what is
// left of it. It returns the script's path.
func HangScript(dir string) (string, error) {
	path := filepath.Join(dir, "hang.sh")
	script := "#!/bin/sh\n" +
		"if [ -n \"$" + PidFileEnv + "\" ]; then echo $$ > \"$" + PidFileEnv + ".tmp\" && mv \"$" + PidFileEnv + ".tmp\" \"$" + PidFileEnv + "\"; fi\n" +
		"sleep 1000 &\n" +
		"sleep 1000\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		return "", fmt.Errorf("plugintest: %w", err)
	}
	return path, nil
}

// SetsidScript writes an executable shell script into dir that starts a grandchild in a
// session of its own (setsid: out of the plugin's process group), which writes its pid to
// GrandchildFile, then never completes the handshake. It returns the script's path.
func SetsidScript(dir string) (string, error) {
	path := filepath.Join(dir, "setsid.sh")
	script := "#!/bin/sh\n" +
		"echo $$ > \"$" + PidFileEnv + ".tmp\" && mv \"$" + PidFileEnv + ".tmp\" \"$" + PidFileEnv + "\"\n" +
		"setsid /bin/sh -c 'echo $$ > \"$0.tmp\" && mv \"$0.tmp\" \"$0\"; exec sleep 1000' \"$" + PidFileEnv + ".grandchild\" &\n" +
		"sleep 1000\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		return "", fmt.Errorf("plugintest: %w", err)
	}
	return path, nil
}

// GrandchildFile is the file the grandchild of a setsid mode or SetsidScript writes its pid
// to, next to the plugin's pid file.
func GrandchildFile(pidFile string) string { return pidFile + ".grandchild" }

// StartGrandchild starts `sleep` in a session of its own that writes its pid to
// GrandchildFile (of PidFileEnv's file) and waits until it has. daemon double-forks it: the
// shell that starts it exits at once, leaving it without a parent.
func StartGrandchild(daemon bool) error {
	pidFile := os.Getenv(PidFileEnv)
	if pidFile == "" {
		return errors.New("plugintest: no pid file to name the grandchild's")
	}
	inner := `echo $$ > "$0.tmp" && mv "$0.tmp" "$0"; exec sleep 1000`
	var cmd *exec.Cmd
	if daemon {
		cmd = exec.Command("/bin/sh", "-c", `(setsid /bin/sh -c '`+inner+`' "$0" &)`, GrandchildFile(pidFile))
	} else {
		cmd = exec.Command("/bin/sh", "-c", inner, GrandchildFile(pidFile))
		cmd.SysProcAttr = setsidAttr()
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("plugintest: %w", err)
	}
	if daemon {
		_ = cmd.Wait()
	}
	_, err := WaitFile(GrandchildFile(pidFile), time.Minute)
	return err
}

// StartOrphan double-forks a process in this process's group that writes its pid to
// GrandchildFile and exits at once, its parent gone before it: it is left for whoever adopts
// it (a subreaper) to reap.
func StartOrphan() error {
	pidFile := os.Getenv(PidFileEnv)
	if pidFile == "" {
		return errors.New("plugintest: no pid file to name the orphan's")
	}
	cmd := exec.Command("/bin/sh", "-c", `(/bin/sh -c 'sleep 0.2; echo $$ > "$0.tmp" && mv "$0.tmp" "$0"' "$0" &)`, GrandchildFile(pidFile))
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("plugintest: %w", err)
	}
	_, err := WaitFile(GrandchildFile(pidFile), time.Minute)
	return err
}

// State returns the state letter of process pid ('R', 'S', 'Z', ...) and its parent, or 0
// when it does not exist.
func State(pid int) (byte, int) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, 0
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	f := strings.Fields(s[i+1:])
	if i < 0 || len(f) < 2 || len(f[0]) != 1 {
		return 0, 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return f[0][0], ppid
}

// Alive reports whether process pid runs (a zombie does not), read from /proc.
func Alive(pid int) bool {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return false
	}
	f := strings.Fields(s[i+1:])
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// WaitGone waits until process pid no longer runs, at most within, and reports whether it
// is gone.
func WaitGone(pid int, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for Alive(pid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// BuildingFile is the file a plugin in ModeHangBuild creates, next to its pid file, when its
// Build has begun (so that a test can interrupt it there without guessing with sleeps).
func BuildingFile(pidFile string) string { return pidFile + ".building" }

// WaitFile waits until path exists and is not empty, at most within, and returns its
// trimmed contents.
func WaitFile(path string, within time.Duration) (string, error) {
	deadline := time.Now().Add(within)
	for {
		if data, err := os.ReadFile(path); err == nil && len(data) > 0 {
			return strings.TrimSpace(string(data)), nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("plugintest: %s did not appear within %s", path, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// WaitPid waits for the pid a plugin wrote to pidFile (see PidFileEnv).
func WaitPid(pidFile string, within time.Duration) (int, error) {
	s, err := WaitFile(pidFile, within)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("plugintest: pid file %s holds %q", pidFile, s)
	}
	return pid, nil
}

// ErrNoProc is returned by Group where /proc cannot tell (not Linux).
var ErrNoProc = errors.New("plugintest: process groups are read from /proc, which this system lacks")

// Group returns the live processes (zombies excluded: they hold nothing and wait for a
// parent to reap them) of process group pgid, read from /proc.
func Group(pgid int) ([]int, error) {
	if runtime.GOOS != "linux" {
		return nil, ErrNoProc
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("plugintest: %w", err)
	}
	var live []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses.
		s := string(data)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if g, err := strconv.Atoi(f[2]); err == nil && g == pgid {
			live = append(live, pid)
		}
	}
	return live, nil
}

// WaitGroupGone waits until no live process of group pgid remains, at most within, and
// returns the survivors otherwise.
func WaitGroupGone(pgid int, within time.Duration) ([]int, error) {
	deadline := time.Now().Add(within)
	for {
		live, err := Group(pgid)
		if err != nil || len(live) == 0 {
			return nil, err
		}
		if time.Now().After(deadline) {
			return live, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
}
