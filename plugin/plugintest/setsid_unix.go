//go:build unix

package plugintest

import "syscall"

// setsidAttr starts a process in a session of its own.
func setsidAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }
