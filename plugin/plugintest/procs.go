package plugintest

import (
	"errors"
	"fmt"
	"os"
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
