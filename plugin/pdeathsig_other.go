//go:build unix && !linux

package plugin

import "syscall"

// setPdeathsig is Linux-only; elsewhere SDK plugins watch their parent (exitWithParent).
func setPdeathsig(*syscall.SysProcAttr) {}
