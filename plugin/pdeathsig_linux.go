package plugin

import (
	"os/exec"
	"syscall"
)

// setPdeathsig asks Linux to kill the plugin if the host dies without cleaning up.
func setPdeathsig(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
