//go:build !linux

package plugin

import "os/exec"

// setPdeathsig is Linux-only; elsewhere plugins watch their parent (see exitWithParent).
func setPdeathsig(*exec.Cmd) {}
