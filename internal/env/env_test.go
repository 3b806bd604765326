package env

import (
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the README's environment table from the table")

const (
	readme     = "../../README.md"
	tableBegin = "<!-- env table: generated from internal/env by `go test ./internal/env -update` -->\n"
	tableEnd   = "<!-- end of env table -->"
)

// TestREADMETable checks that the README's environment section is the table.
func TestREADMETable(t *testing.T) {
	data, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	i, j := strings.Index(s, tableBegin), strings.Index(s, tableEnd)
	if i < 0 || j < i {
		t.Fatalf("README.md lacks the markers %q and %q around the environment table", tableBegin, tableEnd)
	}
	got, want := s[i+len(tableBegin):j], Markdown()
	if got == want {
		return
	}
	if *update {
		if err := os.WriteFile(readme, []byte(s[:i+len(tableBegin)]+want+s[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("README.md's environment table differs from internal/env (run go test ./internal/env -update):\n got:\n%s\nwant:\n%s", got, want)
}

// misspelt are the ZOO_* names tests outside this package use as deliberate unknowns.
var misspelt = map[string]bool{"ZOO_THRADS": true, "ZOO_BAKCEND": true}

// TestEveryNameInTable scans the module's Go and shell sources for ZOO_* names: each must be in
// the table. And each entry of the table must be used somewhere outside this package, by its
// name or by its constant (env.Threads).
func TestEveryNameInTable(t *testing.T) {
	consts := constNames(t)
	re := regexp.MustCompile(`\bZOO_[A-Z0-9_]*[A-Z0-9]\b|\benv\.[A-Z][A-Za-z0-9]*\b`)
	used := map[string][]string{}
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == ".git" || n == "testdata" || n == "node_modules" || path == filepath.Join("..", "..", "internal", "env") {
				return filepath.SkipDir
			}
			return nil
		}
		if !(strings.HasSuffix(path, ".go") || strings.HasSuffix(path, ".sh") || strings.HasSuffix(path, ".tmpl") || strings.HasSuffix(path, filepath.Join(".ci", "run"))) {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllString(string(data), -1) {
			if c, ok := strings.CutPrefix(m, "env."); ok {
				if m, ok = consts[c]; !ok {
					continue // env.Get and friends
				}
			}
			used[m] = append(used[m], path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for name, paths := range used {
		if _, ok := Lookup(name); !ok && !misspelt[name] {
			missing = append(missing, name+" (in "+paths[0]+")")
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("ZOO_* names used in the module but missing from internal/env's table: %s", strings.Join(missing, ", "))
	}
	for _, v := range vars {
		if _, ok := used[v.Name]; !ok {
			t.Errorf("%s is in the table but nothing in the module uses it", v.Name)
		}
	}
}

// constNames maps the package's string constants (Threads) to their values (ZOO_THREADS).
func constNames(t *testing.T) map[string]string {
	f, err := parser.ParseFile(token.NewFileSet(), "env.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if i < len(vs.Values) {
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						out[n.Name] = strings.Trim(lit.Value, `"`)
					}
				}
			}
		}
	}
	if out["Threads"] != Threads {
		t.Fatalf("constNames found Threads = %q", out["Threads"])
	}
	return out
}

// TestTableIsWellFormed checks that names are unique ZOO_* names and every field is filled.
func TestTableIsWellFormed(t *testing.T) {
	seen := map[string]bool{}
	for _, v := range vars {
		if !strings.HasPrefix(v.Name, "ZOO_") || seen[v.Name] {
			t.Errorf("%q: not a ZOO_* name, or listed twice", v.Name)
		}
		seen[v.Name] = true
		if v.Syntax == "" || v.Default == "" || v.Doc == "" || !strings.HasSuffix(v.Doc, ".") {
			t.Errorf("%s: syntax %q, default %q, doc %q: all three are needed, the doc a sentence", v.Name, v.Syntax, v.Default, v.Doc)
		}
	}
}

func TestProblems(t *testing.T) {
	cases := []struct {
		env      []string
		errs     []string
		warnings []string
	}{
		{env: []string{"ZOO_CPU=sse2"}, errs: []string{`ZOO_CPU="sse2": want one of auto, avx512, avx2, generic`}},
		{env: []string{"ZOO_CPU=AVX2", "ZOO_CPU_X"}, warnings: []string{"unknown environment variable ZOO_CPU_X ignored"}},
		{env: []string{"ZOO_CPU=avx"}, errs: []string{`(did you mean "avx2"?)`}},
		{env: []string{"ZOO_THREADS=abc"}, errs: []string{`ZOO_THREADS="abc": want a positive integer`}},
		{env: []string{"ZOO_THREADS=0"}, errs: []string{`ZOO_THREADS="0"`}},
		{env: []string{"ZOO_THREADS=", "ZOO_THREADS= 4 "}},
		{env: []string{"ZOO_PLUGIN_START_TIMEOUT=5"}, errs: []string{`ZOO_PLUGIN_START_TIMEOUT="5": want a positive duration`}},
		{env: []string{"ZOO_PLUGIN_BUILD_TIMEOUT=-1s"}, errs: []string{"ZOO_PLUGIN_BUILD_TIMEOUT"}},
		{env: []string{"ZOO_PLUGIN_BUILD_TIMEOUT=90s", "ZOO_VERBOSE=1", "ZOO_PLUGIN_INPROCESS=0"}},
		{env: []string{"ZOO_VERBOSE=yes"}, errs: []string{`ZOO_VERBOSE="yes": want 1 or 0`}},
		{env: []string{"ZOO_CUDA_PRECISION=fp16"}, errs: []string{"want one of fp32, tf32, bf16"}},
		{env: []string{"ZOO_CUDA_DEVICE=-1"}, errs: []string{"device ordinal"}},
		{env: []string{"ZOO_THRADS=4"}, warnings: []string{`unknown environment variable ZOO_THRADS ignored (did you mean "ZOO_THREADS"?)`}},
		{env: []string{"ZOO_GPU_TESTS=whatever", "ZOO_VARIANT_PLUGIN=x", "HOME=/x=y", "GOFLAGS=-x"}},
	}
	for _, c := range cases {
		errs, warnings := Problems(c.env)
		if len(errs) != len(c.errs) || len(warnings) != len(c.warnings) {
			t.Errorf("%v: errors %v, warnings %q; want %d and %d", c.env, errs, warnings, len(c.errs), len(c.warnings))
			continue
		}
		for i, e := range errs {
			if !strings.Contains(e.Error(), c.errs[i]) {
				t.Errorf("%v: error %q lacks %q", c.env, e, c.errs[i])
			}
		}
		for i, w := range warnings {
			if !strings.Contains(w, c.warnings[i]) || strings.Contains(w, "\n") {
				t.Errorf("%v: warning %q lacks %q (or is not one line)", c.env, w, c.warnings[i])
			}
		}
	}
}

func TestGetters(t *testing.T) {
	t.Setenv(Threads, " 3 ")
	if n, set, err := Int(Threads); n != 3 || !set || err != nil {
		t.Errorf("Int(ZOO_THREADS= 3 ) = %d, %v, %v", n, set, err)
	}
	t.Setenv(Threads, "x")
	if _, set, err := Int(Threads); !set || err == nil {
		t.Errorf("Int(ZOO_THREADS=x): set %v, err %v; want set and an error", set, err)
	}
	t.Setenv(Threads, "")
	if _, set, err := Int(Threads); set || err != nil {
		t.Errorf("Int(ZOO_THREADS=): set %v, err %v; want unset", set, err)
	}
	t.Setenv(PluginStartTimeout, "1m30s")
	if d, set, err := Duration(PluginStartTimeout); d.Seconds() != 90 || !set || err != nil {
		t.Errorf("Duration = %v, %v, %v", d, set, err)
	}
	t.Setenv(Verbose, "1")
	if b, err := Bool(Verbose); !b || err != nil {
		t.Errorf("Bool(ZOO_VERBOSE=1) = %v, %v", b, err)
	}
	t.Setenv(Verbose, "2")
	if b, err := Bool(Verbose); b || err == nil {
		t.Errorf("Bool(ZOO_VERBOSE=2) = %v, %v; want false and an error", b, err)
	}
	t.Setenv(CPU, "AVX2")
	if s, err := Get(CPU); s != "AVX2" || err != nil {
		t.Errorf("Get(ZOO_CPU=AVX2) = %q, %v", s, err)
	}
	if _, err := Get("ZOO_NOT_IN_TABLE"); err == nil {
		t.Error("Get of a name missing from the table gave no error")
	}
}

// TestText checks that the help text lists every variable once, under its scope's heading.
func TestText(t *testing.T) {
	var b strings.Builder
	if err := WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, v := range vars {
		if strings.Count(out, "  "+v.Name+"=") != 1 {
			t.Errorf("help text lists %s %d times", v.Name, strings.Count(out, v.Name+"="))
		}
	}
	if a, b := strings.Index(out, "ZOO_CPU="), strings.Index(out, headings[Test]); a < 0 || b < a {
		t.Errorf("user variables do not come before the test-only ones:\n%s", out)
	}
}
