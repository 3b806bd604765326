package tensorio

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// AtomicWriteFile writes a file at path so that readers see either the old file or the complete
// new one, never a partial write: write receives a buffered writer on a temporary file in the
// same directory, which is then flushed, fsynced, closed and renamed over path (the directory
// is fsynced too, best effort). On any error — including an error returned by write or a panic
// inside it — the temporary file is removed and an existing file at path is left untouched.
// A symbolic link at path is followed, so its target is replaced. The new file gets the mode
// of the file it replaces, or 0666 minus the umask. Errors name the path, e.g.
// "write out.json: open .out.json.tmp-1a2b3c4d: permission denied".
func AtomicWriteFile(path string, write func(io.Writer) error) (err error) {
	target := path
	if resolved, rerr := filepath.EvalSymlinks(path); rerr == nil {
		target = resolved
	}
	mode := fs.FileMode(0o666)
	if fi, serr := os.Stat(target); serr == nil {
		if fi.IsDir() {
			return fmt.Errorf("write %s: is a directory", path)
		}
		// The rename below needs only the directory's permission; a file the user made
		// read-only is kept, as an editor or cp would.
		if fi.Mode().IsRegular() && fi.Mode().Perm()&0o222 == 0 {
			return fmt.Errorf("write %s: the file exists and is read-only; make it writable (chmod u+w) or choose another name", path)
		}
		mode = fi.Mode().Perm()
	}
	f, tmp, err := createTemp(target, mode)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	done := false
	defer func() {
		if !done {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if mode != 0o666 {
		// An existing file's mode is kept; umask does not apply to an explicit chmod.
		if err := f.Chmod(mode); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	if err := write(bw); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		done = true
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, target); err != nil {
		os.Remove(tmp)
		done = true
		return fmt.Errorf("write %s: %w", path, err)
	}
	done = true
	if d, derr := os.Open(filepath.Dir(target)); derr == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// tempPrefix is the name of AtomicWriteFile's temporary files for base, before their random
// suffix of 8 hex digits.
func tempPrefix(base string) string { return "." + base + ".tmp-" }

// RemoveStaleTemps removes the temporary files that AtomicWriteFile(path, ...) calls left next
// to path when they were killed before their rename (".NAME.tmp-1a2b3c4d"), and returns the
// names it removed. Call it before writing path, when no other process is writing it: a
// write in progress would lose its temporary file and fail.
func RemoveStaleTemps(path string) ([]string, error) {
	target := path
	if resolved, err := filepath.EvalSymlinks(path); err == nil {
		target = resolved
	}
	dir, base := filepath.Split(target)
	if dir == "" {
		dir = "."
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	prefix := tempPrefix(base)
	var removed []string
	for _, e := range entries {
		name := e.Name()
		rest, ok := strings.CutPrefix(name, prefix)
		if !ok || len(rest) != 8 || !e.Type().IsRegular() {
			continue
		}
		if _, err := hex.DecodeString(rest); err != nil {
			continue
		}
		p := filepath.Join(dir, name)
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return removed, err
		}
		removed = append(removed, p)
	}
	return removed, nil
}

// createTemp creates a new hidden file next to target with the given permission (before
// umask), returning it and its name.
func createTemp(target string, perm fs.FileMode) (*os.File, string, error) {
	dir, base := filepath.Split(target)
	for range 100 {
		var r [4]byte
		_, _ = rand.Read(r[:])
		name := filepath.Join(dir, tempPrefix(base)+hex.EncodeToString(r[:]))
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, "", err
		}
		return f, name, nil
	}
	return nil, "", fmt.Errorf("could not create a temporary file in %s", dir)
}

// CheckWritable reports, before a long computation, whether AtomicWriteFile(path, ...) can
// succeed: path's directory must exist, be a directory and allow creating files (checked by
// creating and removing a temporary file), and path must not be a directory. It returns nil
// when all hold, or an error naming path and the reason, e.g.
// "cannot write out/x.json: directory out does not exist".
func CheckWritable(path string) error {
	target := path
	if resolved, err := filepath.EvalSymlinks(path); err == nil {
		target = resolved
	}
	if fi, err := os.Stat(target); err == nil && fi.IsDir() {
		return fmt.Errorf("cannot write %s: it is a directory", path)
	}
	dir := filepath.Dir(target)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("cannot write %s: directory %s does not exist", path, filepath.Dir(path))
	case err != nil:
		return fmt.Errorf("cannot write %s: %w", path, err)
	case !fi.IsDir():
		return fmt.Errorf("cannot write %s: %s is not a directory", path, filepath.Dir(path))
	}
	f, tmp, err := createTemp(target, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrPermission) {
			return fmt.Errorf("cannot write %s: directory %s is not writable", path, filepath.Dir(path))
		}
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	f.Close()
	os.Remove(tmp)
	return nil
}
