// Package scaffold writes a new variant plugin module, ready to build: a Go module (outside
// zoo's) with a working attention variant, a conformance test, a registry.yaml, a README and
// a .gitignore. Until zoo is published, its go.mod points at a zoo checkout with a replace
// directive, and lists zoo's own requirements so that it builds offline.
//
//	src, err := scaffold.FindSource("", os.Getenv("ZOO_SRC"))
//	files, err := scaffold.Files(scaffold.Options{Name: "myattn", ZooSource: src})
//	err = scaffold.Write("myattn", files)
//
// `zoo plugin new` is this package behind flags.
package scaffold

import (
	"bufio"
	"bytes"
	"embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"text/template"
)

//go:embed templates/*.tmpl
var templates embed.FS

// ZooModule is zoo's module path; scaffolds point at a checkout of it with a replace
// directive.
const ZooModule = "github.com/zoo-dev/zoo"

// DefaultSummary is the summary of a plugin that names none: the scaffold's variant.
const DefaultSummary = "multi-head attention with a learned temperature per head"

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)

// ValidName reports whether name can name a plugin: lower-case letters, digits, - and _,
// starting with a letter.
func ValidName(name string) bool { return nameRE.MatchString(name) }

// Options describe a new plugin module.
type Options struct {
	// Name is the variant's name (see ValidName).
	Name string
	// Module is the Go module path (default example.com/zoo-variant-NAME).
	Module string
	// Summary is the one-line summary of the variant (default DefaultSummary).
	Summary string
	// ZooSource is the zoo checkout the go.mod's replace directive points at (FindSource).
	ZooSource string
}

// File is one file of the module, by its name in the module's directory.
type File struct {
	Name string
	Data []byte
}

// WithDefaults returns o with the defaults of the fields left empty: the module
// example.com/zoo-variant-NAME and DefaultSummary.
func (o Options) WithDefaults() Options {
	if o.Module == "" {
		o.Module = "example.com/zoo-variant-" + o.Name
	}
	if o.Summary == "" {
		o.Summary = DefaultSummary
	}
	return o
}

// Files renders the plugin module's files (o with its defaults).
func Files(o Options) ([]File, error) {
	o = o.WithDefaults()
	data := struct{ Name, Summary string }{o.Name, strings.ReplaceAll(o.Summary, `"`, `'`)}
	var out []File
	for _, f := range []struct{ tmpl, name string }{
		{"main.go.tmpl", "main.go"}, {"main_test.go.tmpl", "main_test.go"}, {"registry.yaml.tmpl", "registry.yaml"},
		{"README.md.tmpl", "README.md"}, {"gitignore.tmpl", ".gitignore"},
	} {
		t, err := template.ParseFS(templates, "templates/"+f.tmpl)
		if err != nil {
			return nil, fmt.Errorf("scaffold template %s: %w", f.tmpl, err)
		}
		var b bytes.Buffer
		if err := t.Execute(&b, data); err != nil {
			return nil, fmt.Errorf("scaffold template %s: %w", f.tmpl, err)
		}
		out = append(out, File{f.name, b.Bytes()})
	}
	gomod, err := goMod(o.Module, o.ZooSource)
	if err != nil {
		return nil, err
	}
	gosum, err := os.ReadFile(filepath.Join(o.ZooSource, "go.sum"))
	if err != nil {
		return nil, fmt.Errorf("read zoo's go.sum: %w", err)
	}
	return append(out, File{"go.mod", gomod}, File{"go.sum", gosum}), nil
}

// Write writes files into dir, which must exist.
func Write(dir string, files []File) error {
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.Name), f.Data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// goMod writes a go.mod that requires zoo (replaced by the checkout at src) and, so that it
// builds offline without `go mod tidy`, every module zoo requires.
func goMod(module, src string) ([]byte, error) {
	zooMod, err := os.ReadFile(filepath.Join(src, "go.mod"))
	if err != nil {
		return nil, fmt.Errorf("read zoo's go.mod: %w", err)
	}
	goLine := "go 1.26"
	var reqs []string
	inBlock := false
	sc := bufio.NewScanner(bytes.NewReader(zooMod))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if i := strings.Index(line, "//"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		switch {
		case strings.HasPrefix(line, "go "):
			goLine = line
		case line == "require (":
			inBlock = true
		case inBlock && line == ")":
			inBlock = false
		case inBlock && line != "":
			reqs = append(reqs, line)
		case strings.HasPrefix(line, "require "):
			reqs = append(reqs, strings.TrimSpace(strings.TrimPrefix(line, "require ")))
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "module %s\n\n%s\n\nrequire %s v0.0.0-00010101000000-000000000000\n\n", module, goLine, ZooModule)
	if len(reqs) > 0 {
		b.WriteString("// zoo's own requirements, so that the module builds offline; `go mod tidy` trims them.\nrequire (\n")
		for _, r := range reqs {
			fmt.Fprintf(&b, "\t%s // indirect\n", r)
		}
		b.WriteString(")\n\n")
	}
	fmt.Fprintf(&b, "// zoo is not published yet: build against a checkout.\nreplace %s => %s\n", ZooModule, src)
	return []byte(b.String()), nil
}

// NotCheckoutError says that the directory given as the zoo checkout is not one.
type NotCheckoutError struct{ Dir string }

// Error says which directory is not a zoo checkout.
func (e *NotCheckoutError) Error() string {
	return fmt.Sprintf("%s is not a zoo checkout (no go.mod with module %s)", e.Dir, ZooModule)
}

// ErrNoSource is returned (wrapped, with the directories tried) when no zoo checkout is found.
var ErrNoSource = errors.New("cannot find a zoo checkout for the plugin's go.mod")

// FindSource finds the zoo checkout for a scaffold's replace directive: dir when given (an
// error when it is not a checkout: *NotCheckoutError), else the first that is one of
// envDir (e.g. $ZOO_SRC; "" for none), the directories from the working directory up, and
// the checkout this package was built from. Nothing found is ErrNoSource, wrapped with the
// directories tried.
func FindSource(dir, envDir string) (string, error) {
	var tried []string
	try := func(dir string) (string, bool) {
		if dir == "" {
			return "", false
		}
		abs, err := filepath.Abs(dir)
		if err != nil {
			return "", false
		}
		tried = append(tried, abs)
		data, err := os.ReadFile(filepath.Join(abs, "go.mod"))
		if err != nil {
			return "", false
		}
		first, _, _ := strings.Cut(string(data), "\n")
		return abs, strings.TrimSpace(first) == "module "+ZooModule
	}
	if dir != "" {
		if d, ok := try(dir); ok {
			return d, nil
		}
		return "", &NotCheckoutError{Dir: dir}
	}
	if d, ok := try(envDir); ok {
		return d, nil
	}
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			if s, ok := try(d); ok {
				return s, nil
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	// The checkout this package was built from (plugin/scaffold/scaffold.go → the module root).
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		if d, ok := try(filepath.Dir(filepath.Dir(filepath.Dir(file)))); ok {
			return d, nil
		}
	}
	return "", fmt.Errorf("%w (tried %s)", ErrNoSource, strings.Join(tried, ", "))
}
