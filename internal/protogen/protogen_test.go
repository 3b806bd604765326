package protogen

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var (
	goPackage  = regexp.MustCompile(`(?m)^option\s+go_package\s*=\s*"([^"]+)"\s*;`)
	modulePath = regexp.MustCompile(`(?m)^module\s+(\S+)`)
)

// TestEveryProtoChecked walks the module for .proto files and checks, for each folder that
// has one, what keeps its generated code honest after a move: the go_package option names the
// folder's own import path (the generated code embeds it, and Go code imports the package
// there), gen.go's //go:generate protoc line names every .proto of the folder, and a test of
// the folder runs Check (TestGenerated), so that a stale *.pb.go fails where protoc is installed.
func TestEveryProtoChecked(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := modulePath.FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod names no module")
	}
	module := string(m[1])
	protos := map[string][]string{} // folder (relative, slash-separated) → its .proto files
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			// Another module (its own go.mod) or a folder the go tool ignores.
			if p != root && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") || exists(filepath.Join(p, "go.mod"))) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(d.Name(), ".proto") {
			rel, _ := filepath.Rel(root, filepath.Dir(p))
			rel = filepath.ToSlash(rel)
			protos[rel] = append(protos[rel], d.Name())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(protos) == 0 {
		t.Fatalf("no .proto file under %s", root)
	}
	for dir, files := range protos {
		abs := filepath.Join(root, filepath.FromSlash(dir))
		want := module + "/" + dir
		for _, f := range files {
			src, err := os.ReadFile(filepath.Join(abs, f))
			if err != nil {
				t.Fatal(err)
			}
			if g := goPackage.FindSubmatch(src); g == nil {
				t.Errorf("%s/%s has no go_package option; want %q", dir, f, want)
			} else if string(g[1]) != want {
				t.Errorf("%s/%s: go_package %q, want %q (its folder's import path); fix it and run go generate ./%s", dir, f, g[1], want, dir)
			}
		}
		args := generateLine(t, filepath.Join(abs, "gen.go"))
		for _, f := range files {
			if !slices.Contains(args, f) {
				t.Errorf("%s/gen.go: the protoc line does not generate %s", dir, f)
			}
		}
		tests, _ := filepath.Glob(filepath.Join(abs, "*_test.go"))
		checked := false
		for _, f := range tests {
			src, _ := os.ReadFile(f)
			checked = checked || strings.Contains(string(src), "protogen.Check(")
		}
		if !checked {
			t.Errorf("%s: no test runs protogen.Check on its generated code (add gen_test.go with TestGenerated)", dir)
		}
	}
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
