package format

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseCounts(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int
		err  string
	}{
		{"1", []int{1}, ""},
		{"1, 8,64", []int{1, 8, 64}, ""},
		{"0", nil, `--seq "0": want positive integers`},
		{"1,,2", nil, `--seq "1,,2"`},
		{"x", nil, "separated by commas"},
	} {
		got, err := ParseCounts("seq", c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%q: %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

func TestReadHead(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "t.txt")
	if err := os.WriteFile(path, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.txt")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		n    int
		want string
		err  string
	}{
		{path, 3, "hel", ""},
		{path, 10, "hello", ""},
		{empty, 4, "", "is empty (0 bytes)"},
		{filepath.Join(dir, "none"), 4, "", "input " + filepath.Join(dir, "none") + ": no such file"},
		{dir, 4, "", "input " + dir},
	} {
		got, err := ReadHead(c.path, c.n)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want %q", c.path, err, c.err)
			}
			continue
		}
		if err != nil || string(got) != c.want {
			t.Errorf("%s, %d: %q, %v; want %q", c.path, c.n, got, err, c.want)
		}
	}
}
