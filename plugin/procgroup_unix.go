//go:build unix

package plugin

import (
	"os"
	"syscall"
)

// sysProcAttr starts a plugin as the leader of a new process group (see proc.go).
func sysProcAttr() *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true}
	setPdeathsig(a)
	return a
}

// killGroup sends SIGKILL to the plugin's process group and to the plugin itself (in case
// it left its group).
func killGroup(p *os.Process) {
	_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
	_ = p.Kill()
}
