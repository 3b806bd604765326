package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/zoo-dev/zoo/zoo/tensorio"
)

// checkOutputPath reports, before any work starts, whether a verb may write its output to
// path: what tensorio.CheckWritable checks (the directory exists and takes new files, path
// is not a directory), and that an existing file there is not read-only. The atomic write
// renames a new file over the old one, which the directory's permissions alone allow, so
// without this check a file the user protected with chmod a-w would be replaced. A file
// without any write bit counts as read-only even for root. The error names path and says
// what to do; callers wrap it as bad input (exit 2). Every verb that writes a file the
// user names calls it (export, bench --plot; run --output should too).
func checkOutputPath(path string) error {
	if err := tensorio.CheckWritable(path); err != nil {
		return err
	}
	fi, err := os.Stat(path) // follows a symbolic link, as the write does
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	readOnly := fmt.Errorf("cannot write %s: the file exists and is read-only; make it writable (chmod u+w) or choose another name", path)
	if !fi.Mode().IsRegular() {
		return nil
	}
	if fi.Mode().Perm()&0o222 == 0 {
		return readOnly
	}
	// Opening for writing without O_TRUNC changes nothing, and tells whether this user may.
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if errors.Is(err, fs.ErrPermission) {
		return readOnly
	}
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	return f.Close()
}

// checkExtension reports whether path ends in one of exts (".onnx", compared without case),
// naming the flag and the extensions wanted when it does not.
// checkOutputFile is checkExtension and then checkOutputPath: the checks every file a flag
// writes gets before any work starts.
func checkOutputFile(flag, path string, exts ...string) error {
	if err := checkExtension(flag, path, exts...); err != nil {
		return err
	}
	return checkOutputPath(path)
}

func checkExtension(flag, path string, exts ...string) error {
	ext := strings.ToLower(filepath.Ext(path))
	for _, e := range exts {
		if ext == e {
			return nil
		}
	}
	return fmt.Errorf("%s %s: want a %s file", flag, path, strings.Join(exts, " or "))
}
