package scaffold

import (
	"bytes"
	"errors"
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestScaffoldLinksOnlyTheSDK renders `zoo plugin new`'s module (Files) and checks, with go list as a
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
	files, err := Files(Options{Name: "myattn", Module: "example.com/myattn", Summary: "my attention", ZooSource: root})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, f := range files {
		if strings.HasSuffix(f.Name, ".go") {
			if formatted, err := format.Source(f.Data); err != nil || !bytes.Equal(formatted, f.Data) {
				t.Errorf("%s is not gofmt-clean (%v)", f.Name, err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, f.Name), f.Data, 0o644); err != nil {
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
		rel, ok := strings.CutPrefix(pkg, ZooModule+"/")
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

func TestValidName(t *testing.T) {
	for name, ok := range map[string]bool{"myattn": true, "my-attn_2": true, "MyAttn": false, "2attn": false, "": false, "a b": false} {
		if ValidName(name) != ok {
			t.Errorf("ValidName(%q) = %v", name, !ok)
		}
	}
}

func TestFindSource(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := FindSource(root, ""); err != nil || got != root {
		t.Errorf("FindSource(root) = %q, %v", got, err)
	}
	if got, err := FindSource("", root); err != nil || got != root {
		t.Errorf("FindSource(\"\", root) = %q, %v", got, err)
	}
	other := t.TempDir()
	var nc *NotCheckoutError
	if _, err := FindSource(other, ""); !errors.As(err, &nc) || nc.Dir != other {
		t.Errorf("FindSource(not a checkout) = %v", err)
	}
}

func TestFilesAndWrite(t *testing.T) {
	root, _ := filepath.Abs("../..")
	files, err := Files(Options{Name: "x", ZooSource: root})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var gomod string
	for _, f := range files {
		names = append(names, f.Name)
		if f.Name == "go.mod" {
			gomod = string(f.Data)
		}
	}
	if !slices.Equal(names, []string{"main.go", "main_test.go", "registry.yaml", "README.md", ".gitignore", "go.mod", "go.sum"}) {
		t.Errorf("files %v", names)
	}
	for _, want := range []string{"module example.com/zoo-variant-x\n", "replace " + ZooModule + " => " + root, "// indirect"} {
		if !strings.Contains(gomod, want) {
			t.Errorf("go.mod lacks %q:\n%s", want, gomod)
		}
	}
	dir := t.TempDir()
	if err := Write(dir, files[:1]); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "main.go")); err != nil || !bytes.Equal(data, files[0].Data) {
		t.Errorf("main.go written: %v", err)
	}
	if o := (Options{Name: "y"}).WithDefaults(); o.Module != "example.com/zoo-variant-y" || o.Summary != DefaultSummary {
		t.Errorf("defaults %+v", o)
	}
}
