package main

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

	"github.com/urfave/cli/v2"

	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
	"github.com/zoo-dev/zoo/internal/env"
	"github.com/zoo-dev/zoo/plugin/conformance"
)

//go:embed scaffold/*.tmpl
var scaffoldFS embed.FS

// zooModule is zoo's module path; scaffolds point at a checkout of it with a replace directive.
const zooModule = "github.com/zoo-dev/zoo"

func pluginCommand() *cli.Command {
	return &cli.Command{
		Name:        "plugin",
		Usage:       "write and check variant plugins",
		Description: examples("zoo plugin new myvariant", "zoo plugin test ./myvariant/myvariant"),
		Subcommands: []*cli.Command{
			{
				Name:      "new",
				Usage:     "write a new variant plugin module, ready to build",
				ArgsUsage: "NAME",
				Description: "Writes a Go module (outside zoo's) with a working attention variant, a conformance test and a\n" +
					"registry.yaml. Until zoo is published, its go.mod points at a zoo checkout with a replace\n" +
					"directive: --zoo-src, else ZOO_SRC, else the checkout around the current directory, else the one\n" +
					"this zoo binary was built from." + examples("zoo plugin new myvariant", "zoo plugin new myvariant --dir ~/src/myvariant --module example.com/myvariant"),
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "dir", Usage: "`DIR` to write (default ./NAME); must not exist or be empty"},
					&cli.StringFlag{Name: "module", Usage: "Go module `PATH` (default example.com/zoo-variant-NAME)"},
					&cli.StringFlag{Name: "zoo-src", Usage: "zoo checkout `DIR` for the replace directive"},
					&cli.StringFlag{Name: "summary", Usage: "one-line summary of the variant"},
				},
				Action: pluginNewAction,
			},
			{
				Name:      "test",
				Usage:     "run the conformance kit on a plugin executable",
				ArgsUsage: "PATH",
				Description: "Checks the handshake, Describe, Build at two small configs, the graphs' validity, determinism\n" +
					"for a seed, that unknown hyperparameters are refused, and a forward pass on the CPU backend.\n" +
					"Exit 0 when the plugin conforms, 1 when a check fails, 2 when PATH cannot run as a plugin." +
					examples("zoo plugin test ./myvariant/myvariant", "zoo plugin test ./myvariant/myvariant --json"),
				Flags:  []cli.Flag{flagSet, flagSeed, flagJSON},
				Action: pluginTestAction,
			},
		},
	}
}

var pluginNameRE = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)

func pluginNewAction(c *cli.Context) error {
	if c.NArg() != 1 {
		return badInputf("plugin new: want one NAME, got %d arguments", c.NArg())
	}
	name := c.Args().First()
	if !pluginNameRE.MatchString(name) {
		return badInputf("plugin new: name %q: want lower-case letters, digits, - and _, starting with a letter", name)
	}
	dir := c.String("dir")
	if dir == "" {
		dir = name
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return badInputf("plugin new: %s exists and is not empty; choose another --dir", dir)
	}
	src, err := zooSource(c.String("zoo-src"))
	if err != nil {
		return badInput(err)
	}
	module := c.String("module")
	if module == "" {
		module = "example.com/zoo-variant-" + name
	}
	summary := c.String("summary")
	if summary == "" {
		summary = "multi-head attention with a learned temperature per head"
	}
	files, err := scaffold(name, module, summary, src)
	if err != nil {
		return failed(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return badInputf("plugin new: %w", err)
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.name), f.data, 0o644); err != nil {
			return failed(fmt.Errorf("plugin new: %w", err))
		}
	}
	fmt.Fprintf(c.App.Writer, "wrote %s (module %s, zoo from %s)\nnext:\n  cd %s\n  go test ./...\n  go build -o %s .\n  zoo plugin test ./%s\n  zoo run %s --registry registry.yaml --preset tiny --input text.txt\n",
		dir, module, src, dir, name, name, name)
	return nil
}

type scaffoldFile struct {
	name string
	data []byte
}

// scaffold renders the plugin module's files.
func scaffold(name, module, summary, src string) ([]scaffoldFile, error) {
	data := struct{ Name, Summary string }{name, strings.ReplaceAll(summary, `"`, `'`)}
	var out []scaffoldFile
	for _, f := range []struct{ tmpl, name string }{
		{"main.go.tmpl", "main.go"}, {"main_test.go.tmpl", "main_test.go"}, {"registry.yaml.tmpl", "registry.yaml"},
		{"README.md.tmpl", "README.md"}, {"gitignore.tmpl", ".gitignore"},
	} {
		t, err := template.ParseFS(scaffoldFS, "scaffold/"+f.tmpl)
		if err != nil {
			return nil, fmt.Errorf("scaffold template %s: %w", f.tmpl, err)
		}
		var b bytes.Buffer
		if err := t.Execute(&b, data); err != nil {
			return nil, fmt.Errorf("scaffold template %s: %w", f.tmpl, err)
		}
		out = append(out, scaffoldFile{f.name, b.Bytes()})
	}
	gomod, err := scaffoldGoMod(module, src)
	if err != nil {
		return nil, err
	}
	gosum, err := os.ReadFile(filepath.Join(src, "go.sum"))
	if err != nil {
		return nil, fmt.Errorf("read zoo's go.sum: %w", err)
	}
	return append(out, scaffoldFile{"go.mod", gomod}, scaffoldFile{"go.sum", gosum}), nil
}

// scaffoldGoMod writes a go.mod that requires zoo (replaced by the checkout at src) and, so
// that it builds offline without `go mod tidy`, every module zoo requires.
func scaffoldGoMod(module, src string) ([]byte, error) {
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
	fmt.Fprintf(&b, "module %s\n\n%s\n\nrequire %s v0.0.0-00010101000000-000000000000\n\n", module, goLine, zooModule)
	if len(reqs) > 0 {
		b.WriteString("// zoo's own requirements, so that the module builds offline; `go mod tidy` trims them.\nrequire (\n")
		for _, r := range reqs {
			fmt.Fprintf(&b, "\t%s // indirect\n", r)
		}
		b.WriteString(")\n\n")
	}
	fmt.Fprintf(&b, "// zoo is not published yet: build against a checkout.\nreplace %s => %s\n", zooModule, src)
	return []byte(b.String()), nil
}

// zooSource finds the zoo checkout for a scaffold's replace directive.
func zooSource(flag string) (string, error) {
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
		return abs, strings.TrimSpace(first) == "module "+zooModule
	}
	if flag != "" {
		if d, ok := try(flag); ok {
			return d, nil
		}
		return "", fmt.Errorf("--zoo-src %s is not a zoo checkout (no go.mod with module %s)", flag, zooModule)
	}
	src, _ := env.Get(env.Src)
	if d, ok := try(src); ok {
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
	// The checkout this binary was built from (cmd/zoo/plugin.go → the module root).
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		if d, ok := try(filepath.Dir(filepath.Dir(filepath.Dir(file)))); ok {
			return d, nil
		}
	}
	return "", fmt.Errorf("cannot find a zoo checkout for the plugin's go.mod (tried %s); pass --zoo-src DIR or set ZOO_SRC", strings.Join(tried, ", "))
}

func pluginTestAction(c *cli.Context) error {
	if c.NArg() != 1 {
		return badInputf("plugin test: want one plugin executable PATH, got %d arguments", c.NArg())
	}
	path, err := filepath.Abs(c.Args().First())
	if err != nil {
		return badInputf("plugin test: %w", err)
	}
	sets, err := parseSets(c.StringSlice(flagSet.Name))
	if err != nil {
		return badInput(err)
	}
	anySets := make(map[string]any, len(sets))
	for k, v := range sets {
		anySets[k] = v
	}
	opts := conformance.Options{Sets: anySets, Seed: c.Uint64(flagSeed.Name), Context: c.Context}
	if verboseOf(c.Context) {
		opts.Logs = c.App.ErrWriter
	}
	r := conformance.RunPath(path, opts)
	if err := c.Context.Err(); err != nil {
		return failed(err) // interrupted: run says so; a report of stopped checks would mislead
	}
	if c.Bool(flagJSON.Name) {
		if err := format.WriteJSON(c.App.Writer, r); err != nil {
			return failed(err)
		}
	} else {
		r.Write(c.App.Writer)
	}
	if r.OK() {
		return nil
	}
	// The first failure decides the exit code: 2 when PATH cannot run as a plugin at all.
	for _, ch := range r.Checks {
		if ch.OK() {
			continue
		}
		err := fmt.Errorf("plugin test: %s does not conform: %s: %s", path, ch.Name, ch.Err)
		if ch.Name == "handshake" && handshakeBadInput(path) {
			return badInput(err)
		}
		return failed(err)
	}
	return failed(errors.New("plugin test: no checks ran"))
}

// handshakeBadInput reports whether path is missing or not executable (bad input, exit 2).
func handshakeBadInput(path string) bool {
	st, err := os.Stat(path)
	return err != nil || st.IsDir() || st.Mode()&0o111 == 0
}

// reorderCommandArgs is reorderArgs that also handles commands with subcommands
// (`zoo plugin test PATH --json`): flags are moved before the subcommand's arguments.
func reorderCommandArgs(app *cli.App, args []string) []string {
	i := 1
	for i < len(args) && strings.HasPrefix(args[i], "-") {
		i++
	}
	if i < len(args) {
		if cmd := app.Command(args[i]); cmd != nil && len(cmd.Subcommands) > 0 {
			sub := &cli.App{Commands: cmd.Subcommands}
			return append(append([]string{}, args[:i]...), reorderArgs(sub, args[i:])...)
		}
	}
	return reorderArgs(app, args)
}
