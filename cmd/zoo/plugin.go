package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/zoo-dev/zoo/cmd/zoo/internal/format"
	"github.com/zoo-dev/zoo/internal/env"
	"github.com/zoo-dev/zoo/plugin/conformance"
	"github.com/zoo-dev/zoo/plugin/scaffold"
)

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

func pluginNewAction(c *cli.Context) error {
	if c.NArg() != 1 {
		return badInputf("plugin new: want one NAME, got %d arguments", c.NArg())
	}
	name := c.Args().First()
	if !scaffold.ValidName(name) {
		return badInputf("plugin new: name %q: want lower-case letters, digits, - and _, starting with a letter", name)
	}
	dir := c.String("dir")
	if dir == "" {
		dir = name
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return badInputf("plugin new: %s exists and is not empty; choose another --dir", dir)
	}
	envSrc, _ := env.Get(env.Src)
	src, err := scaffold.FindSource(c.String("zoo-src"), envSrc)
	if errors.Is(err, scaffold.ErrNoSource) {
		return badInputf("%w; pass --zoo-src DIR or set ZOO_SRC", err)
	} else if err != nil {
		return badInputf("--zoo-src %w", err)
	}
	opts := scaffold.Options{Name: name, Module: c.String("module"), Summary: c.String("summary"), ZooSource: src}.WithDefaults()
	files, err := scaffold.Files(opts)
	if err != nil {
		return failed(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return badInputf("plugin new: %w", err)
	}
	if err := scaffold.Write(dir, files); err != nil {
		return failed(fmt.Errorf("plugin new: %w", err))
	}
	fmt.Fprintf(c.App.Writer, "wrote %s (module %s, zoo from %s)\nnext:\n  cd %s\n  go test ./...\n  go build -o %s .\n  zoo plugin test ./%s\n  zoo run %s --registry registry.yaml --preset tiny --input text.txt\n",
		dir, opts.Module, src, dir, name, name, name)
	return nil
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
