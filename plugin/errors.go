package plugin

import (
	"fmt"
	"strings"
)

// ErrorKind classifies plugin failures.
type ErrorKind int

// The kinds of plugin failure.
const (
	// ErrNotFound: the plugin executable does not exist.
	ErrNotFound ErrorKind = iota + 1
	// ErrNotExecutable: the path is a directory, lacks the execute bit, or is no program.
	ErrNotExecutable
	// ErrChecksum: the executable's sha256 differs from the one pinned in the registry.
	ErrChecksum
	// ErrNotPlugin: the program ran but did not answer with zoo's plugin handshake.
	ErrNotPlugin
	// ErrProtocol: the plugin speaks another major version of the protocol.
	ErrProtocol
	// ErrStart: the plugin failed or exited while starting.
	ErrStart
	// ErrTimeout: the plugin did not start, describe or build in time.
	ErrTimeout
	// ErrCrashed: the plugin process died during a call.
	ErrCrashed
	// ErrInvalidGraph: the plugin returned bytes that are not a valid zoo encoder graph.
	ErrInvalidGraph
	// ErrProtocolViolation: the plugin broke the Build stream's rules (chunks, checksum).
	ErrProtocolViolation
	// ErrConfig: the variant refused the hyperparameters (a user error, not a plugin fault).
	ErrConfig
	// ErrInternal: the plugin reported an internal error.
	ErrInternal
	// ErrStopped: the host stopped the plugin (Close, Ctrl-C) while a call was running.
	ErrStopped
	// ErrNotPinned: the executable is not pinned by sha256 and the host requires pins
	// (HostOptions.RequirePinned).
	ErrNotPinned
)

// Error is a plugin failure: one line that names the plugin, says what happened and what to do.
type Error struct {
	Kind ErrorKind
	// Plugin is the variant name the plugin serves (the registry entry).
	Plugin string
	// Path is the executable ("" in in-process mode).
	Path string
	// Msg says what happened; Fix what to do (may be empty).
	Msg, Fix string
	// Stderr holds the last lines the plugin wrote on stderr, for crashes.
	Stderr []string
	// Err is the underlying error, if any.
	Err error
}

// Error renders the failure as one line.
func (e *Error) Error() string {
	if e.Kind == ErrConfig {
		return e.Msg
	}
	var b strings.Builder
	fmt.Fprintf(&b, "plugin %s", e.Plugin)
	if e.Path != "" {
		fmt.Fprintf(&b, " (%s)", e.Path)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	if len(e.Stderr) > 0 {
		fmt.Fprintf(&b, "; its last stderr: %s", strings.Join(e.Stderr, " | "))
	}
	if e.Fix != "" {
		b.WriteString("; ")
		b.WriteString(e.Fix)
	}
	return oneLine(b.String())
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// BadInput reports whether the failure is the user's to fix in their registry, config or
// files (exit 2 in the CLI), as opposed to a failure of the plugin while doing its job.
func (e *Error) BadInput() bool {
	switch e.Kind {
	case ErrNotFound, ErrNotExecutable, ErrChecksum, ErrNotPlugin, ErrProtocol, ErrConfig, ErrNotPinned:
		return true
	}
	return false
}

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	s = strings.ReplaceAll(s, "\r", "")
	return strings.ReplaceAll(s, "\n", "; ")
}
