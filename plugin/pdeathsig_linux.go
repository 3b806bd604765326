package plugin

import "syscall"

// setPdeathsig asks Linux to SIGKILL the plugin when the host dies without cleaning up
// (one of the two orphan guards; proc.go says why both).
func setPdeathsig(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
