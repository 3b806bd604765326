//go:build !unix

package plugin

import (
	"os"
	"syscall"
)

// sysProcAttr: process groups are a Unix notion; elsewhere the plugin alone is killed.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// killGroup kills the plugin process.
func killGroup(p *os.Process) { _ = p.Kill() }
