package plugin

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin/runner"
)

// How zoo runs a plugin executable, and why it does not use go-plugin's own runner.
//
// go-plugin reads the plugin's stdout (the handshake line) and stderr until both pipes reach
// end of file, and only then waits for the process; its Kill waits for all of that. A plugin
// that leaves a child holding the pipes (a shell script whose `sleep 1000 &` inherits them)
// therefore hangs go-plugin's Kill forever, even after the plugin itself was killed. zoo's
// runner starts each plugin in a process group of its own and kills the whole group, and
// closes its ends of the pipes killGrace after the kill, so that every wait on a plugin ends
// even when something in the group escaped it (setsid) or cannot be killed.
//
// A process group also keeps the terminal's Ctrl-C away from plugins: zoo receives it, and
// kills them itself (see Host.Close).
//
// Orphans: the host kills the group on every exit path it controls, and on Linux every
// descendant of the plugin besides, whatever sessions they made (contain_linux.go). When the host itself
// is killed with SIGKILL, two guards remain, and both are kept on purpose: on Linux the
// direct child gets SIGKILL from the kernel (Pdeathsig, host side, works for any executable,
// a script included), and a plugin built with the SDK also polls its parent (exitWithParent,
// plugin side, portable: macOS has no Pdeathsig). Neither reaches a script's own children
// after a SIGKILL of the host; nothing portable can.

// killGrace is how long the pipes of a killed plugin may stay open before zoo closes its
// ends of them (a child outside the group still holds them).
const killGrace = 2 * time.Second

// errStopped is the start error of a plugin that zoo stopped before it ran.
var errStopped = errors.New("stopped by zoo before it started")

// procRunner is go-plugin's runner.Runner for one plugin process (see above).
type procRunner struct {
	cmd            *exec.Cmd
	stdout, stderr io.ReadCloser

	marker string // ZOO_PLUGIN_ID=…: marks the plugin and its descendants

	mu      sync.Mutex
	started bool
	killed  bool
	pid     int
	state   *os.ProcessState // set once Wait returned
	closed  sync.Once
}

var _ runner.Runner = (*procRunner)(nil)

// newProcRunner returns the runner of path with args. env is the plugin's own environment,
// added after go-plugin's (the host's environment and the handshake variables), which tmpl
// carries.
func newProcRunner(tmpl *exec.Cmd, path string, args, env []string) *procRunner {
	cmd := exec.Command(path, args...)
	marker := PluginIDEnv + "=" + strconv.Itoa(os.Getpid()) + "." + strconv.FormatUint(pluginIDs.Add(1), 10)
	cmd.Env = append(append(append([]string{}, tmpl.Env...), env...), marker)
	// No stdin: a plugin in a background process group that read the terminal would be
	// stopped (SIGTTIN), and it has no business with zoo's input anyway.
	cmd.Stdin = nil
	cmd.SysProcAttr = sysProcAttr()
	return &procRunner{cmd: cmd, marker: marker}
}

// pluginIDs numbers the plugin processes this process starts (their ZOO_PLUGIN_ID).
var pluginIDs atomic.Uint64

// Start starts the process, unless Kill came first.
func (r *procRunner) Start(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.killed {
		return errStopped
	}
	var err error
	if r.stdout, err = r.cmd.StdoutPipe(); err != nil {
		return err
	}
	if r.stderr, err = r.cmd.StderrPipe(); err != nil {
		return err
	}
	// The plugin's orphans are re-parented to zoo, which can then kill them (Linux).
	_ = becomeSubreaper()
	// On failure Start closes the pipes itself.
	if err := r.cmd.Start(); err != nil {
		return err
	}
	r.started, r.pid = true, r.cmd.Process.Pid
	return nil
}

// Kill kills the plugin, its process group and (on Linux) every descendant at once (a plugin
// has nothing to save), and closes the pipes killGrace later. It does not wait, and may be
// called any number of times, from any goroutine, before or after Start.
func (r *procRunner) Kill(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.killed {
		return nil
	}
	r.killed = true
	if !r.started {
		return nil
	}
	killPlugin(r.pid, r.state == nil, r.marker)
	killGroup(r.cmd.Process)
	time.AfterFunc(killGrace, r.closePipes)
	return nil
}

// closePipes closes zoo's ends of the plugin's stdout and stderr, which ends go-plugin's
// readers whoever still holds the other ends. It runs only after a successful Start.
func (r *procRunner) closePipes() {
	r.mu.Lock()
	stdout, stderr := r.stdout, r.stderr
	r.mu.Unlock()
	r.closed.Do(func() {
		_ = stdout.Close()
		_ = stderr.Close()
	})
}

// Wait waits for the process; go-plugin calls it once both pipes are closed.
func (r *procRunner) Wait(context.Context) error {
	err := r.cmd.Wait()
	r.mu.Lock()
	r.state = r.cmd.ProcessState
	r.mu.Unlock()
	return err
}

// Stdout is the pipe that carries the handshake.
func (r *procRunner) Stdout() io.ReadCloser { return r.stdout }

// Stderr is the plugin's stderr.
func (r *procRunner) Stderr() io.ReadCloser { return r.stderr }

// Name is the executable's path.
func (r *procRunner) Name() string { return r.cmd.Path }

// ID is the process id, "" before the process started.
func (r *procRunner) ID() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.started {
		return ""
	}
	return strconv.Itoa(r.pid)
}

// Diagnose adds nothing: classifyStart explains start failures itself.
func (r *procRunner) Diagnose(context.Context) string { return "" }

// PluginToHost is the identity: plugin and host share the machine.
func (r *procRunner) PluginToHost(network, addr string) (string, string, error) {
	return network, addr, nil
}

// HostToPlugin is the identity: plugin and host share the machine.
func (r *procRunner) HostToPlugin(network, addr string) (string, string, error) {
	return network, addr, nil
}

// process returns the started process, or nil.
func (r *procRunner) process() *os.Process {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.started {
		return nil
	}
	return r.cmd.Process
}

// processState returns how the process ended, once Wait has returned; nil before.
func (r *procRunner) processState() *os.ProcessState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state
}

// runnerFor returns a go-plugin RunnerFunc that builds the plugin's runner and hands it to
// keep (so that the host can kill it while go-plugin still holds its own locks).
func runnerFor(path string, args, env []string, keep func(*procRunner) error) func(hclog.Logger, *exec.Cmd, string) (runner.Runner, error) {
	return func(_ hclog.Logger, tmpl *exec.Cmd, _ string) (runner.Runner, error) {
		r := newProcRunner(tmpl, path, args, env)
		if err := keep(r); err != nil {
			return nil, err
		}
		return r, nil
	}
}
