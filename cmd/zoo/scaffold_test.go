package main

import (
	"bytes"
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestScaffoldLinksOnlyTheSDK renders `zoo plugin new`'s module and checks, with go list as a
// plugin author would, that it links zoo's SDK and building blocks only: no backend, no
// in-tree variant (the shared schema is zoo/nn's), no CLI. Its Go files are gofmt-clean.
func TestScaffoldLinksOnlyTheSDK(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	files, err := scaffold("myattn", "example.com/myattn", "my attention", root)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, f := range files {
		if strings.HasSuffix(f.name, ".go") {
			if formatted, err := format.Source(f.data); err != nil || !bytes.Equal(formatted, f.data) {
				t.Errorf("%s is not gofmt-clean (%v)", f.name, err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, f.name), f.data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "list", "-deps", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go list -deps in the scaffold: %v\n%s", err, stderr)
	}
	var linked []string
	for _, pkg := range strings.Fields(string(out)) {
		rel, ok := strings.CutPrefix(pkg, zooModule+"/")
		if !ok {
			continue
		}
		linked = append(linked, rel)
		for _, never := range []string{"backends", "variants", "cmd"} {
			if rel == never || strings.HasPrefix(rel, never+"/") {
				t.Errorf("the scaffolded plugin links %s: a plugin needs only zoo/... and plugin", rel)
			}
		}
	}
	if !slices.Contains(linked, "plugin") || !slices.Contains(linked, "zoo/nn") {
		t.Errorf("go list -deps shows %v, want plugin and zoo/nn among them", linked)
	}
}
