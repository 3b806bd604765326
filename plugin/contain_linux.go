//go:build linux

package plugin

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Containment on Linux: zoo becomes a child subreaper (PR_SET_CHILD_SUBREAPER) before it
// starts its first plugin, so that a process a plugin leaves behind — a daemon that
// double-forked, a child that called setsid and so left the plugin's process group, the
// children of a plugin that exited — is re-parented to zoo instead of to PID 1, and stays
// within reach. Every plugin process is started with ZOO_PLUGIN_ID set to an id of its own,
// which its descendants inherit.
//
// Killing a plugin (every exit path: Close, a timeout, a cancelled call, Host.Kill on a
// signal, a plugin that exited by itself and is closed) stops with SIGSTOP, so that none can
// fork away meanwhile, and then kills with SIGKILL: the plugin, every process below it in the
// process tree, whatever sessions or groups they made, and every process zoo adopted whose
// environment carries the plugin's id, with theirs; then it reaps the ones it adopted, and
// those it adopted that had exited by themselves in the plugin's process group. A descendant
// that both lost its parent and dropped its environment (env -i) cannot be told from a
// process of someone else's and is left alone, and one that left the group and exited by
// itself stays a zombie until zoo exits; a SIGKILL of zoo itself hands the adopted ones to
// PID 1 (the plugin itself still gets Pdeathsig).

var subreaper struct {
	once sync.Once
	err  error
}

// becomeSubreaper makes this process the child subreaper of its descendants, once.
func becomeSubreaper() error {
	subreaper.once.Do(func() {
		subreaper.err = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	})
	return subreaper.err
}

// procEntry is a process as /proc/PID/stat shows it.
type procEntry struct {
	ppid, pgrp int
	state      byte
}

// readProcs returns every process of the system (of this PID namespace) by pid.
func readProcs() (map[int]procEntry, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	out := make(map[int]procEntry, len(entries))
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(data, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(data[i+1:]))
		if len(f) < 3 || len(f[0]) != 1 {
			continue
		}
		ppid, err1 := strconv.Atoi(f[1])
		pgrp, err2 := strconv.Atoi(f[2])
		if err1 != nil || err2 != nil {
			continue
		}
		out[pid] = procEntry{ppid: ppid, pgrp: pgrp, state: f[0][0]}
	}
	return out, nil
}

// carries reports whether process pid's environment holds the variable assignment kv.
func carries(pid int, kv string) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	for _, v := range bytes.Split(data, []byte{0}) {
		if string(v) == kv {
			return true
		}
	}
	return false
}

// killPlugin kills the plugin process root (alive: not yet reaped, so the pid is still its)
// and its descendants as the package comment says, and returns the pids it killed besides
// root. marker is the plugin's ZOO_PLUGIN_ID assignment.
func killPlugin(root int, alive bool, marker string) []int {
	self := os.Getpid()
	seen := map[int]bool{}
	stop := func(pid int) {
		seen[pid] = true
		_ = syscall.Kill(pid, syscall.SIGSTOP)
	}
	if alive {
		stop(root)
	}
	var zombies []int // adopted descendants that exited on their own, waiting to be reaped
	for round := 0; round < 100; round++ {
		procs, err := readProcs()
		if err != nil {
			break
		}
		if round == 0 {
			// A zombie's environment is gone; one still in the plugin's process group is
			// the plugin's (its pid is the group's id).
			for pid, p := range procs {
				if p.ppid == self && p.state == 'Z' && p.pgrp == root && pid != root {
					zombies = append(zombies, pid)
				}
			}
		}
		children := map[int][]int{}
		for pid, p := range procs {
			children[p.ppid] = append(children[p.ppid], pid)
		}
		added := false
		var queue []int
		for pid := range seen {
			queue = append(queue, pid)
		}
		for _, pid := range children[self] {
			if !seen[pid] && pid != root && procs[pid].state != 'Z' && carries(pid, marker) {
				stop(pid)
				added = true
				queue = append(queue, pid)
			}
		}
		for len(queue) > 0 {
			pid := queue[len(queue)-1]
			queue = queue[:len(queue)-1]
			for _, c := range children[pid] {
				if !seen[c] && procs[c].state != 'Z' {
					stop(c)
					added = true
					queue = append(queue, c)
				}
			}
		}
		if !added {
			break
		}
	}
	var killed []int
	for pid := range seen {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		if pid != root {
			killed = append(killed, pid)
		}
	}
	if len(killed)+len(zombies) > 0 {
		go reap(append(killed, zombies...), 10*time.Second)
	}
	return killed
}

// reap waits for the killed processes that are (or, once their killed parents are gone,
// become) this process's children, for at most d; the others are their parents' business.
// Only these pids are waited for: a wait for any child would take the exit status of
// processes that os/exec waits for elsewhere.
func reap(pids []int, d time.Duration) {
	deadline := time.Now().Add(d)
	for len(pids) > 0 && time.Now().Before(deadline) {
		left := pids[:0]
		for _, pid := range pids {
			var ws syscall.WaitStatus
			got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
			switch {
			case got == pid:
			case errors.Is(err, syscall.ECHILD):
				// Not (yet) ours: still a child of a dying parent, or already reaped.
				if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
					left = append(left, pid)
				}
			default:
				left = append(left, pid)
			}
		}
		pids = left
		time.Sleep(20 * time.Millisecond)
	}
}
