// Package ort runs ONNX models under ONNX Runtime, the reference runtime for zoo's parity
// checks, through github.com/yalue/onnxruntime_go (cgo; it loads the shared library at run
// time, so zoo builds and runs without it).
//
// # Finding the library
//
// The library is libonnxruntime.so.1 of ONNX Runtime 1.24 or newer (1.30 is tested). It is
// looked for, in order, at
//
//  1. $ZOO_ORT_LIB (an error if set to a missing file);
//  2. $XDG_DATA_HOME/zoo/onnxruntime/libonnxruntime.so.1, with XDG_DATA_HOME defaulting to
//     ~/.local/share;
//  3. ./node_modules/onnxruntime-node/bin/napi-v6/linux/x64/libonnxruntime.so.1 (the copy that
//     ships inside the npm package onnxruntime-node).
//
// Install it (no download script runs; the library is inside the npm tarball) with:
//
//	mkdir -p /tmp/ortnpm && cd /tmp/ortnpm && ONNXRUNTIME_NODE_INSTALL=skip npm install onnxruntime-node@1.30.0
//	mkdir -p ~/.local/share/zoo/onnxruntime
//	cp node_modules/onnxruntime-node/bin/napi-v6/linux/x64/libonnxruntime.so.1 ~/.local/share/zoo/onnxruntime/
package ort

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/zoo-dev/zoo/internal/env"
)

// LibraryEnv names the environment variable that points at libonnxruntime.so.1.
const LibraryEnv = env.ORTLib

// LibraryName is the file name searched for.
const LibraryName = "libonnxruntime.so.1"

// npmLibrary is where the npm package onnxruntime-node keeps the library.
var npmLibrary = filepath.Join("node_modules", "onnxruntime-node", "bin", "napi-v6", "linux", "x64", LibraryName)

// InstallHint says, in one line, how to install the library.
const InstallHint = "install it with: mkdir -p /tmp/ortnpm && cd /tmp/ortnpm && ONNXRUNTIME_NODE_INSTALL=skip npm install onnxruntime-node@1.30.0 && " +
	"mkdir -p ~/.local/share/zoo/onnxruntime && cp node_modules/onnxruntime-node/bin/napi-v6/linux/x64/libonnxruntime.so.1 ~/.local/share/zoo/onnxruntime/ " +
	"(or set " + LibraryEnv + "=/path/to/libonnxruntime.so.1)"

// ErrNotFound is returned (wrapped, with the places searched and InstallHint) when the
// library is not installed.
var ErrNotFound = errors.New("ONNX Runtime library not found")

// DefaultLibraryPath returns the per-user install location:
// $XDG_DATA_HOME/zoo/onnxruntime/libonnxruntime.so.1, or ~/.local/share/... when XDG_DATA_HOME
// is unset. It returns "" when neither XDG_DATA_HOME nor the home directory is known.
func DefaultLibraryPath() string {
	dir := os.Getenv("XDG_DATA_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil || home == "" {
			return ""
		}
		dir = filepath.Join(home, ".local", "share")
	}
	return filepath.Join(dir, "zoo", "onnxruntime", LibraryName)
}

// LibraryPath returns the library to load, searched as the package documentation says. It
// returns an error wrapping ErrNotFound, naming every place looked at and how to install
// the library, when none exists.
func LibraryPath() (string, error) {
	if p, _ := env.Get(LibraryEnv); p != "" {
		if st, err := os.Stat(p); err != nil || st.IsDir() {
			return "", fmt.Errorf("%w: %s=%s does not name a file; %s", ErrNotFound, LibraryEnv, p, InstallHint)
		}
		return p, nil
	}
	var tried []string
	for _, p := range []string{DefaultLibraryPath(), npmLibrary} {
		if p == "" {
			continue
		}
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			if abs, err := filepath.Abs(p); err == nil {
				p = abs
			}
			return p, nil
		}
		tried = append(tried, p)
	}
	return "", fmt.Errorf("%w (%s unset; looked at %s); %s", ErrNotFound, LibraryEnv, strings.Join(tried, ", "), InstallHint)
}
