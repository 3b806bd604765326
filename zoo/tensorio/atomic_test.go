package tensorio

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func dirEntries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func TestAtomicWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.json")
	write := func(s string) func(io.Writer) error {
		return func(w io.Writer) error { _, err := io.WriteString(w, s); return err }
	}
	if err := AtomicWriteFile(path, write("one")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "one" {
		t.Fatalf("content %q", b)
	}
	fi, _ := os.Stat(path)
	if fi.Mode().Perm()&0o600 != 0o600 || fi.Mode().Perm()&0o111 != 0 {
		t.Errorf("new file mode %v", fi.Mode())
	}
	// Replacing keeps the old mode.
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := AtomicWriteFile(path, write("two")); err != nil {
		t.Fatal(err)
	}
	fi, _ = os.Stat(path)
	if b, _ := os.ReadFile(path); string(b) != "two" || fi.Mode().Perm() != 0o640 {
		t.Fatalf("content %q mode %v", b, fi.Mode())
	}

	// A failing writer leaves the old file and no temp file.
	boom := errors.New("model exploded")
	err := AtomicWriteFile(path, func(w io.Writer) error {
		io.WriteString(w, strings.Repeat("x", 3<<20))
		return boom
	})
	if !errors.Is(err, boom) || err.Error() != fmt.Sprintf("write %s: model exploded", path) {
		t.Fatalf("error = %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "two" {
		t.Fatalf("old file changed to %q", b[:min(len(b), 10)])
	}
	if got := dirEntries(t, dir); len(got) != 1 {
		t.Fatalf("directory holds %v, want only out.json", got)
	}

	// So does a panic inside the writer (the panic itself propagates).
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("panic swallowed")
			}
		}()
		AtomicWriteFile(path, func(w io.Writer) error { panic("bug") })
	}()
	if got := dirEntries(t, dir); len(got) != 1 {
		t.Fatalf("after panic, directory holds %v", got)
	}
}

func TestAtomicWriteFileSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "real.npy")
	link := filepath.Join(dir, "link.npy")
	os.WriteFile(target, []byte("old"), 0o644)
	if err := os.Symlink("real.npy", link); err != nil {
		t.Skip(err)
	}
	if err := AtomicWriteFile(link, func(w io.Writer) error { _, err := io.WriteString(w, "new"); return err }); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Lstat(link); fi.Mode()&os.ModeSymlink == 0 {
		t.Error("symlink replaced by a file")
	}
	if b, _ := os.ReadFile(target); string(b) != "new" {
		t.Errorf("target holds %q", b)
	}
}

func TestAtomicWriteFileErrors(t *testing.T) {
	dir := t.TempDir()
	nothing := func(io.Writer) error { return nil }
	missing := filepath.Join(dir, "nope", "out.json")
	err := AtomicWriteFile(missing, nothing)
	if err == nil || !strings.HasPrefix(err.Error(), "write "+missing+": open "+filepath.Join(dir, "nope", ".out.json.tmp-")) ||
		!strings.HasSuffix(err.Error(), ": no such file or directory") {
		t.Errorf("missing dir: %v", err)
	}
	if err := AtomicWriteFile(dir, nothing); err == nil || err.Error() != "write "+dir+": is a directory" {
		t.Errorf("directory: %v", err)
	}
	protected := filepath.Join(dir, "protected.json")
	os.WriteFile(protected, []byte("keep"), 0o444)
	if err := AtomicWriteFile(protected, func(w io.Writer) error { _, err := w.Write([]byte("new")); return err }); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("read-only file: %v", err)
	}
	if b, _ := os.ReadFile(protected); string(b) != "keep" {
		t.Errorf("read-only file replaced: %q", b)
	}
	if os.Geteuid() != 0 {
		ro := filepath.Join(dir, "ro")
		os.Mkdir(ro, 0o555)
		p := filepath.Join(ro, "out.json")
		err := AtomicWriteFile(p, nothing)
		if err == nil || !strings.HasSuffix(err.Error(), "permission denied") || !strings.HasPrefix(err.Error(), "write "+p+": ") {
			t.Errorf("read-only dir: %v", err)
		}
	}
}

func TestCheckWritable(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	os.WriteFile(file, nil, 0o644)
	cases := []struct{ path, want string }{
		{filepath.Join(dir, "out.json"), ""},
		{file, ""}, // an existing file is replaced
		{dir, "cannot write " + dir + ": it is a directory"},
		{filepath.Join(dir, "no", "x.json"), "cannot write " + filepath.Join(dir, "no", "x.json") + ": directory " + filepath.Join(dir, "no") + " does not exist"},
		{filepath.Join(file, "x.json"), "cannot write " + filepath.Join(file, "x.json") + ": " + file + " is not a directory"},
	}
	if os.Geteuid() != 0 {
		ro := filepath.Join(dir, "ro")
		os.Mkdir(ro, 0o555)
		cases = append(cases, struct{ path, want string }{filepath.Join(ro, "x"), "cannot write " + filepath.Join(ro, "x") + ": directory " + ro + " is not writable"})
	}
	for _, tc := range cases {
		err := CheckWritable(tc.path)
		if (err == nil) != (tc.want == "") || (err != nil && err.Error() != tc.want) {
			t.Errorf("CheckWritable(%s) = %v, want %q", tc.path, err, tc.want)
		}
	}
	for _, name := range dirEntries(t, dir) {
		if strings.HasPrefix(name, ".") {
			t.Errorf("CheckWritable left %s", name)
		}
	}
}

// TestRemoveStaleTemps removes exactly the temporary files AtomicWriteFile leaves for a path
// when it is killed before its rename: not the file, not another file's, not a look-alike.
func TestRemoveStaleTemps(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.safetensors")
	names := map[string]bool{ // name: removed
		"m.safetensors":                     false,
		".m.safetensors.tmp-0a1b2c3d":       true,
		".m.safetensors.tmp-ffffffff":       true,
		".m.safetensors.tmp-notahexx":       false,
		".m.safetensors.tmp-0a1b2c3d4":      false,
		".m.optim.safetensors.tmp-0a1b2c3d": false,
		".n.safetensors.tmp-0a1b2c3d":       false,
		"m.safetensors.tmp-0a1b2c3d":        false,
	}
	for n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := RemoveStaleTemps(path)
	if err != nil || len(removed) != 2 {
		t.Fatalf("removed %v, %v; want the two temporary files", removed, err)
	}
	for n, gone := range names {
		_, err := os.Stat(filepath.Join(dir, n))
		if gone != os.IsNotExist(err) {
			t.Errorf("%s: removed %v, want %v", n, os.IsNotExist(err), gone)
		}
	}
	if r, err := RemoveStaleTemps(filepath.Join(dir, "none", "x.safetensors")); err != nil || len(r) != 0 {
		t.Errorf("a missing directory: %v, %v", r, err)
	}
}
